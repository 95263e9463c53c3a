//! Where relayed packets begin and end in the bytes of an answer, however the transport's
//! pieces split them (sans-IO): the writer follows it so that a packet of the sidecar's own
//! takes the next sequence id at a packet boundary, and so that a packet a broken answer left
//! half-written, or a LOCAL INFILE request the client must not see, can be taken back.

use common::mysql::packets::PacketHead;

/// The packet boundaries of relayed bytes, followed piece by piece.
#[derive(Debug, Default, Clone)]
pub struct RelayedPackets {
    /// Payload bytes still to come of the packet being relayed (0: at a boundary).
    left: usize,
    /// The bytes of a header split across pieces, and how many came.
    head: ([u8; PacketHead::LEN], usize),
    /// The payload length of the packet whose header was read last, and the sequence id that
    /// was next before it.
    last: (usize, u8),
    /// That packet's first payload byte, once it passed.
    first: Option<u8>,
}

/// What the bytes at the end of those followed are of their last packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    /// How many bytes at the end belong to the last packet, header included (the whole packet
    /// when it is whole).
    pub bytes: usize,
    /// The last packet's payload length (`None` while its header is not whole).
    pub len: Option<usize>,
    /// Its first payload byte, once it passed.
    pub first: Option<u8>,
    /// Whether it is whole.
    pub whole: bool,
}

impl RelayedPackets {
    /// Follows `data`, the next relayed bytes; `seq` (the writer's next sequence id) moves
    /// past each header read whole.
    pub fn feed(&mut self, mut data: &[u8], seq: &mut u8) {
        while !data.is_empty() {
            if self.left > 0 {
                if self.left == self.last.0 {
                    self.first = data.first().copied();
                }
                let take = self.left.min(data.len());
                self.left -= take;
                data = &data[take..];
                continue;
            }
            let (head, have) = &mut self.head;
            let parsed = if *have == 0 && data.len() >= PacketHead::LEN {
                // A whole header here (most are): read in place, not gathered.
                let parsed = PacketHead::parse(data);
                data = &data[PacketHead::LEN..];
                parsed
            } else {
                let take = (PacketHead::LEN - *have).min(data.len());
                head[*have..*have + take].copy_from_slice(&data[..take]);
                *have += take;
                data = &data[take..];
                if *have < PacketHead::LEN {
                    continue;
                }
                *have = 0;
                PacketHead::parse(&head[..])
            };
            let parsed = parsed.unwrap_or(PacketHead { len: 0, seq: 0 });
            self.left = parsed.len;
            self.last = (parsed.len, *seq);
            self.first = None;
            *seq = parsed.seq.wrapping_add(1);
        }
    }

    /// True unless a packet was followed in part: a packet of the sidecar's own may follow.
    pub fn at_boundary(&self) -> bool {
        self.left == 0 && self.head.1 == 0
    }

    /// The last packet's bytes at the end of what was followed, `None` before any.
    pub fn tail(&self) -> Tail {
        match self.head.1 {
            0 => {
                let len = self.last.0;
                let bytes = PacketHead::LEN + len - self.left;
                Tail { bytes, len: Some(len), first: self.first, whole: self.left == 0 }
            }
            have => Tail { bytes: have, len: None, first: None, whole: false },
        }
    }

    /// Forgets the last packet's bytes, taken back from the end of the queue: the writer is at
    /// a boundary again. Answers the sequence id that was next before that packet's header,
    /// when its header was read whole (else the id has not moved).
    pub fn take_back_tail(&mut self) -> Option<u8> {
        let seq_before = (self.head.1 == 0).then_some(self.last.1);
        self.left = 0;
        self.head.1 = 0;
        self.first = None;
        seq_before
    }
}

#[cfg(test)]
mod tests {
    use super::{RelayedPackets, Tail};

    /// A row `ab` (id 1), an EOF (id 2) and a 0xFB request (id 3), as the transport relays them.
    const ANSWER: &[u8] =
        b"\x02\x00\x00\x01ab\x05\x00\x00\x02\xfe\x00\x00\x02\x00\x02\x00\x00\x03\xfbf";

    #[test]
    fn boundaries_and_ids_are_found_at_every_split() {
        let ends = [6, 15, 21];
        for cut in 0..=ANSWER.len() {
            let (mut relayed, mut seq) = (RelayedPackets::default(), 0);
            relayed.feed(&ANSWER[..cut], &mut seq);
            assert_eq!(relayed.at_boundary(), cut == 0 || ends.contains(&cut), "cut at {cut}");
            relayed.feed(&ANSWER[cut..], &mut seq);
            assert!(relayed.at_boundary());
            assert_eq!(seq, 4, "the id after the last packet's");
            let tail = Tail { bytes: 6, len: Some(2), first: Some(0xfb), whole: true };
            assert_eq!(relayed.tail(), tail, "the request, whole");
        }
    }

    #[test]
    fn a_packet_cut_anywhere_is_taken_back_with_its_id() {
        for cut in 16..ANSWER.len() {
            let (mut relayed, mut seq) = (RelayedPackets::default(), 0);
            relayed.feed(&ANSWER[..cut], &mut seq);
            let tail = relayed.tail();
            assert_eq!(tail.bytes, cut - 15, "cut at {cut}: the request's bytes so far");
            assert!(!tail.whole);
            assert_eq!(tail.len, (cut >= 19).then_some(2), "its length once its header is whole");
            assert_eq!(tail.first, (cut >= 20).then_some(0xfb), "its first byte once it came");
            let seq = relayed.take_back_tail().unwrap_or(seq);
            assert!(relayed.at_boundary());
            assert_eq!(seq, 3, "cut at {cut}: the request's id is next again");
        }
    }

    #[test]
    fn an_empty_packet_and_a_broken_header_end_where_they_say() {
        let (mut relayed, mut seq) = (RelayedPackets::default(), 9);
        relayed.feed(b"\x00\x00\x00\x07", &mut seq);
        assert!(relayed.at_boundary());
        assert_eq!((seq, relayed.tail().bytes), (8, 4));
        relayed.feed(b"\xff\xff", &mut seq);
        assert!(!relayed.at_boundary());
        assert_eq!(relayed.tail(), Tail { bytes: 2, len: None, first: None, whole: false });
    }
}
