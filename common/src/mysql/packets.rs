//! MySQL packet headers and the few payload fields both halves read (sans-IO): the one place
//! a packet's 3-byte length is decoded, the one reader of length-encoded integers.

pub use super::packet::MAX_PAYLOAD;

/// A packet header: payload length and sequence id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketHead {
    /// Payload length.
    pub len: usize,
    /// Sequence id.
    pub seq: u8,
}

impl PacketHead {
    /// Header length.
    pub const LEN: usize = 4;

    /// The header at the start of `buf`, if four bytes are there.
    pub fn parse(buf: &[u8]) -> Option<Self> {
        let h = buf.get(..Self::LEN)?;
        Some(Self {
            len: usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16,
            seq: h[3],
        })
    }

    /// Writes a header for a payload of `len` (< 16 MiB) bytes.
    pub fn write(buf: &mut impl bytes::BufMut, len: usize, seq: u8) {
        buf.put_uint_le(len as u64, 3);
        buf.put_u8(seq);
    }
}

/// A length-encoded integer at the start of `p`, and its width.
pub fn lenenc_int(p: &[u8]) -> Option<(u64, usize)> {
    let le = |n: usize| {
        p.get(1..=n).map(|b| b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x)))
    };
    match *p.first()? {
        n @ 0..=0xfa => Some((u64::from(n), 1)),
        0xfc => Some((le(2)?, 3)),
        0xfd => Some((le(3)?, 4)),
        0xfe => Some((le(8)?, 9)),
        _ => None,
    }
}

/// Status flags of an OK payload (header byte 0x00 or 0xFE, affected rows, insert id, status).
pub fn ok_status(p: &[u8]) -> Option<u16> {
    let (_, a) = lenenc_int(p.get(1..)?)?;
    let (_, b) = lenenc_int(p.get(1 + a..)?)?;
    let at = 1 + a + b;
    p.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

/// How the next logical packet at the start of a buffer stands: a logical packet is one packet,
/// or a run of 16 MiB − 1 packets that continue into the next, ended by a shorter one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logical {
    /// Whole: its bytes, headers included, and the payload bytes it carries in all.
    Whole {
        /// Bytes from the buffer's start to its end.
        len: usize,
        /// Payload bytes, continuations joined.
        payload: usize,
        /// The sequence id of its last packet.
        last_seq: u8,
    },
    /// Not all here: at least this many bytes must be buffered before it can be.
    Need(usize),
    /// Its payload, continuations joined, exceeds the limit given; `seq` is the sequence id of
    /// the header that said so (an error packet answering it takes the next).
    TooLarge {
        /// Sequence id of that header.
        seq: u8,
    },
}

/// Where the next logical packet at the start of `buf` stands, refusing one whose payload
/// would exceed `max` as soon as a header says so (before its bytes are read).
pub fn logical_packet(buf: &[u8], max: usize) -> Logical {
    let (mut at, mut payload) = (0, 0);
    loop {
        let Some(head) = buf.get(at..).and_then(PacketHead::parse) else {
            return Logical::Need(at + PacketHead::LEN);
        };
        payload += head.len;
        if payload > max {
            return Logical::TooLarge { seq: head.seq };
        }
        at += PacketHead::LEN + head.len;
        if buf.len() < at {
            return Logical::Need(at);
        }
        if head.len != MAX_PAYLOAD {
            return Logical::Whole { len: at, payload, last_seq: head.seq };
        }
    }
}

/// Splits a buffer of whole packets into (header, payload) pairs; `None` if one is cut short.
pub fn split_packets(mut buf: &[u8]) -> Option<Vec<(PacketHead, &[u8])>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let head = PacketHead::parse(buf)?;
        let payload = buf.get(PacketHead::LEN..PacketHead::LEN + head.len)?;
        out.push((head, payload));
        buf = &buf[PacketHead::LEN + head.len..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lenenc_ints_of_every_width() {
        assert_eq!(lenenc_int(&[0xfa]), Some((250, 1)));
        assert_eq!(lenenc_int(&[0xfc, 0x01, 0x02]), Some((0x0201, 3)));
        assert_eq!(lenenc_int(&[0xfd, 1, 2, 3]), Some((0x03_0201, 4)));
        assert_eq!(
            lenenc_int(&[0xfe, 1, 0, 0, 0, 0, 0, 0, 0x10]),
            Some((0x1000_0000_0000_0001, 9))
        );
        assert_eq!(lenenc_int(&[0xfc, 0x01]), None);
        assert_eq!(lenenc_int(&[0xfb]), None);
    }

    #[test]
    fn reads_ok_status_after_two_lenencs() {
        assert_eq!(ok_status(&[0, 0xfc, 1, 0, 5, 0x0a, 0, 0, 0]), Some(0x000a));
        assert_eq!(ok_status(&[0xfe, 0, 0, 0x22, 0]), Some(0x0022));
        assert_eq!(ok_status(&[0, 0, 0, 2]), None);
    }

    #[test]
    fn logical_packets_are_found_whatever_has_arrived() {
        // A 16 MiB − 1 packet, its continuation of 3 bytes, then the next command.
        let mut wire = vec![0xff, 0xff, 0xff, 0];
        wire.resize(4 + MAX_PAYLOAD, b'x');
        wire.extend_from_slice(&[3, 0, 0, 1, b'a', b'b', b'c']);
        let first = wire.len();
        wire.extend_from_slice(&[1, 0, 0, 0, 0x0e]);
        let whole = Logical::Whole { len: first, payload: MAX_PAYLOAD + 3, last_seq: 1 };
        assert_eq!(logical_packet(&wire, usize::MAX), whole);
        for cut in [0, 3, 4, 100, 4 + MAX_PAYLOAD, 4 + MAX_PAYLOAD + 5, first - 1] {
            let need = logical_packet(&wire[..cut], usize::MAX);
            assert!(
                matches!(need, Logical::Need(n) if n > cut && n <= first),
                "cut {cut}: {need:?}"
            );
        }
        assert_eq!(logical_packet(&wire, MAX_PAYLOAD + 2), Logical::TooLarge { seq: 1 });
        assert_eq!(logical_packet(&wire[..4], 10), Logical::TooLarge { seq: 0 }, "on its header");
        assert_eq!(
            logical_packet(&wire[first..], 10),
            Logical::Whole { len: 5, payload: 1, last_seq: 0 },
            "a small one"
        );
        let empty = Logical::Whole { len: 4, payload: 0, last_seq: 7 };
        assert_eq!(logical_packet(&[0, 0, 0, 7], 10), empty);
    }

    #[test]
    fn splits_whole_packets_only() {
        let buf = [1, 0, 0, 0, 9, 0, 0, 0, 1];
        let packets = split_packets(&buf).unwrap_or_default();
        assert_eq!(packets.len(), 2);
        assert_eq!(packets[0].1, &[9]);
        assert_eq!(packets[1].0, PacketHead { len: 0, seq: 1 });
        assert!(split_packets(&[2, 0, 0, 0, 9]).is_none());
    }
}
