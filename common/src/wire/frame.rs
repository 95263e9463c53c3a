//! Binary frames of a relayed answer: `[tag u8][len u32 LE][payload]`. `Packets` carries MySQL
//! packets exactly as the upstream sent them, `Heartbeat` keeps proxies from timing out while
//! a long command runs, and `Turn` ends the answer, saying who speaks next.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::Error;

const TAG_HEARTBEAT: u8 = 6;
const TAG_PACKETS: u8 = 9;
const TAG_TURN: u8 = 10;
const HEADER_LEN: usize = 5;

/// Bytes of a `Packets` frame around its packets, and of a whole `Turn` frame: room to
/// reserve for an answer written in one go.
pub const FRAMING_OVERHEAD: usize = HEADER_LEN * 2 + 1;

/// Default largest frame payload a decoder accepts (a transport sends at most its read buffer,
/// 64 KiB, per frame; the margin is for future senders).
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// Why the transport's answer to a relayed request ended: whose turn it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TurnEnd {
    /// The upstream's answer is complete; the client sends its next command.
    Done,
    /// The upstream asked for a local file (LOAD DATA LOCAL): the client sends it, and the
    /// sidecar uploads its packets to `…/infile`.
    AwaitFile,
    /// The upstream asked the client for an authentication packet (auth switch, more data):
    /// the sidecar sends the client's answer to `…/login`.
    AwaitAuth,
    /// The upstream closed the connection (after a refused login, `wait_timeout`, a kill…):
    /// the sidecar closes its client connection too.
    Closed,
}

impl TurnEnd {
    const ALL: [TurnEnd; 4] =
        [TurnEnd::Done, TurnEnd::AwaitFile, TurnEnd::AwaitAuth, TurnEnd::Closed];

    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Sent while a long command runs so that proxies see traffic; carries nothing.
    Heartbeat,
    /// Relayed MySQL packets, headers included, exactly as the upstream sent them.
    Packets(Bytes),
    /// The end of a relayed answer, and whose turn it is.
    Turn(TurnEnd),
}

fn header(buf: &mut BytesMut, tag: u8, len: usize) {
    // One copy of the five bytes (a byte and a word put apart are two).
    let [a, b, c, d] = u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes();
    buf.put_slice(&[tag, a, b, c, d]);
}

/// Appends a `Heartbeat` frame.
pub fn encode_heartbeat(buf: &mut BytesMut) {
    header(buf, TAG_HEARTBEAT, 0);
}

/// Appends a `Packets` frame holding `packets` (raw MySQL packets).
pub fn encode_packets(buf: &mut BytesMut, packets: &[u8]) {
    header(buf, TAG_PACKETS, packets.len());
    buf.put_slice(packets);
}

/// Appends a `Turn` frame.
pub fn encode_turn(buf: &mut BytesMut, end: TurnEnd) {
    buf.put_slice(&[TAG_TURN, 1, 0, 0, 0, end.code()]);
}

/// Incremental decoder: feed body chunks with [`FrameDecoder::extend`] (copied) or
/// [`FrameDecoder::extend_shared`] (decoded in place while no partial frame is buffered: the
/// frames share the chunk's memory), take frames with [`FrameDecoder::next_frame`], or with
/// [`FrameDecoder::next_piece`] a `Packets` frame's payload as it arrives.
#[derive(Debug)]
pub struct FrameDecoder {
    /// A partial frame and what came after it.
    buf: BytesMut,
    /// A chunk being decoded in place (only while `buf` is empty).
    shared: Bytes,
    /// Bytes still to come of a `Packets` frame taken in pieces.
    packets_left: usize,
    max_frame: usize,
}

impl FrameDecoder {
    /// A decoder refusing frames whose payload exceeds `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        Self { buf: BytesMut::new(), shared: Bytes::new(), packets_left: 0, max_frame }
    }

    /// Appends received bytes.
    pub fn extend(&mut self, chunk: &[u8]) {
        self.spill();
        self.buf.extend_from_slice(chunk);
    }

    /// Appends a received chunk, without a copy when nothing is buffered.
    pub fn extend_shared(&mut self, chunk: Bytes) {
        if self.buf.is_empty() && self.shared.is_empty() {
            self.shared = chunk;
        } else {
            self.extend(&chunk);
        }
    }

    /// Moves the chunk decoded in place into the buffer (a frame goes on past its end), with
    /// room for that frame whole when its header is there.
    fn spill(&mut self) {
        if !self.shared.is_empty() {
            let shared = std::mem::take(&mut self.shared);
            if self.buf.is_empty() && self.packets_left == 0 && shared.len() >= HEADER_LEN {
                let len = (&shared[1..HEADER_LEN]).get_u32_le() as usize;
                self.buf.reserve(HEADER_LEN + len.min(self.max_frame));
            }
            self.buf.extend_from_slice(&shared);
        }
    }

    /// True when no partial frame is buffered or being taken in pieces.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.shared.is_empty() && self.packets_left == 0
    }

    /// The tag and length of the frame `bytes` begin with, once its header is there.
    fn header_of(&self, bytes: &[u8]) -> Result<Option<(u8, usize)>, Error> {
        if bytes.len() < HEADER_LEN {
            return Ok(None);
        }
        let len = (&bytes[1..HEADER_LEN]).get_u32_le() as usize;
        if len > self.max_frame {
            return Err(Error::FrameTooLarge { size: len, limit: self.max_frame });
        }
        Ok(Some((bytes[0], len)))
    }

    /// Decodes the next frame, like [`Self::next_frame`], but a `Packets` frame's payload comes
    /// as it arrives, in pieces that may end anywhere (inside a MySQL packet too): nothing is
    /// gathered into a buffer, and a large frame's first bytes need not wait for its last.
    pub fn next_piece(&mut self) -> Result<Option<Frame>, Error> {
        if self.packets_left == 0 {
            let source = if self.shared.is_empty() { &self.buf[..] } else { &self.shared[..] };
            match self.header_of(source)? {
                Some((TAG_PACKETS, len)) if len > 0 => {
                    if self.shared.is_empty() {
                        self.buf.advance(HEADER_LEN);
                    } else {
                        self.shared.advance(HEADER_LEN);
                    }
                    self.packets_left = len;
                }
                _ => return self.next_frame(),
            }
        }
        Ok(self.take_piece())
    }

    /// What has arrived of the `Packets` frame being taken in pieces, up to its end.
    fn take_piece(&mut self) -> Option<Frame> {
        let piece = if !self.shared.is_empty() {
            self.shared.split_to(self.packets_left.min(self.shared.len()))
        } else if !self.buf.is_empty() {
            self.buf.split_to(self.packets_left.min(self.buf.len())).freeze()
        } else {
            return None;
        };
        self.packets_left -= piece.len();
        Some(Frame::Packets(piece))
    }

    /// Decodes the next complete frame, if one is buffered (the rest of a frame begun with
    /// [`Self::next_piece`] comes in pieces).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, Error> {
        if self.packets_left > 0 {
            return Ok(self.take_piece());
        }
        if !self.shared.is_empty() {
            if let Some((tag, len)) = self.header_of(&self.shared)?
                && self.shared.len() >= HEADER_LEN + len
            {
                self.shared.advance(HEADER_LEN);
                return frame_of(tag, self.shared.split_to(len)).map(Some);
            }
            self.spill();
        }
        let Some((tag, len)) = self.header_of(&self.buf)? else { return Ok(None) };
        if self.buf.len() < HEADER_LEN + len {
            self.buf.reserve(HEADER_LEN + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(HEADER_LEN);
        frame_of(tag, self.buf.split_to(len).freeze()).map(Some)
    }
}

/// The frame of tag `tag` with `payload`.
fn frame_of(tag: u8, payload: Bytes) -> Result<Frame, Error> {
    let len = payload.len();
    Ok(match tag {
        TAG_HEARTBEAT if len == 0 => Frame::Heartbeat,
        TAG_PACKETS => Frame::Packets(payload),
        TAG_TURN if len == 1 => match TurnEnd::from_code(payload[0]) {
            Some(end) => Frame::Turn(end),
            None => return Err(Error::Wire("unknown turn end")),
        },
        TAG_HEARTBEAT | TAG_TURN => {
            return Err(Error::Wire("frame payload has the wrong length for its tag"));
        }
        _ => return Err(Error::Wire("unknown frame tag")),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Feeds `buf` to a decoder in chunks ending at `cuts`, each copied or shared as the bits
    /// of `copied` say (as a sidecar may mix them), taking what `take` gives after each.
    fn take_in_chunks(
        buf: &Bytes,
        cuts: Vec<usize>,
        copied: u8,
        take: fn(&mut FrameDecoder) -> Result<Option<Frame>, Error>,
    ) -> (FrameDecoder, Vec<Frame>) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(buf.len())).collect();
        cuts.push(buf.len());
        cuts.sort_unstable();
        let (mut dec, mut got, mut at) = (FrameDecoder::new(DEFAULT_MAX_FRAME), Vec::new(), 0);
        for (i, cut) in cuts.into_iter().enumerate() {
            if copied & (1 << (i % 8)) != 0 {
                dec.extend(&buf[at..cut]);
            } else {
                dec.extend_shared(buf.slice(at..cut));
            }
            at = cut;
            while let Some(f) = take(&mut dec).ok().flatten() {
                got.push(f);
            }
        }
        (dec, got)
    }

    /// An answer's frames: a `Packets` frame per item, a heartbeat after every
    /// `heartbeat_every`-th item from the first (none when 0), and the turn's end.
    fn answer_of(items: &[Vec<u8>], heartbeat_every: usize) -> BytesMut {
        let mut buf = BytesMut::new();
        for (i, item) in items.iter().enumerate() {
            encode_packets(&mut buf, item);
            if heartbeat_every > 0 && i % heartbeat_every == 0 {
                encode_heartbeat(&mut buf);
            }
        }
        encode_turn(&mut buf, TurnEnd::Done);
        buf
    }

    fn decode_all(bytes: &[u8]) -> Vec<Frame> {
        let mut dec = FrameDecoder::new(DEFAULT_MAX_FRAME);
        dec.extend(bytes);
        let mut out = Vec::new();
        while let Ok(Some(f)) = dec.next_frame() {
            out.push(f);
        }
        assert!(dec.is_empty(), "trailing bytes");
        out
    }

    #[test]
    fn round_trips_every_kind() {
        let mut buf = BytesMut::new();
        encode_packets(&mut buf, b"\x01\x00\x00\x01\x00");
        encode_heartbeat(&mut buf);
        for end in TurnEnd::ALL {
            encode_turn(&mut buf, end);
        }
        let frames = decode_all(&buf);
        assert_eq!(frames[0], Frame::Packets(Bytes::from_static(b"\x01\x00\x00\x01\x00")));
        assert_eq!(frames[1], Frame::Heartbeat);
        assert_eq!(frames[2..].to_vec(), TurnEnd::ALL.map(Frame::Turn).to_vec());
    }

    #[test]
    fn refuses_bad_frames() {
        let mut dec = FrameDecoder::new(16);
        dec.extend(&[TAG_PACKETS, 17, 0, 0, 0]);
        assert!(matches!(dec.next_frame(), Err(Error::FrameTooLarge { size: 17, .. })));
        for bad in [[99, 0, 0, 0, 0, 0], [TAG_TURN, 1, 0, 0, 0, 9], [TAG_HEARTBEAT, 1, 0, 0, 0, 0]]
        {
            let mut dec = FrameDecoder::new(16);
            dec.extend(&bad);
            assert!(dec.next_frame().is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn any_split_of_the_stream_decodes_the_same(
            items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20),
            cut in 0usize..1000,
        ) {
            let buf = answer_of(&items, 1);
            let whole = decode_all(&buf);
            let cut = cut.min(buf.len());
            let mut dec = FrameDecoder::new(DEFAULT_MAX_FRAME);
            let mut got = Vec::new();
            for part in [&buf[..cut], &buf[cut..]] {
                dec.extend(part);
                while let Some(f) = dec.next_frame().ok().flatten() { got.push(f); }
            }
            prop_assert_eq!(got, whole);
        }

        #[test]
        fn shared_chunks_at_any_splits_decode_the_same(
            items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20),
            cuts in proptest::collection::vec(0usize..1000, 0..6),
            copied in any::<u8>(),
        ) {
            let buf = answer_of(&items, 0);
            let whole = decode_all(&buf);
            let (dec, got) = take_in_chunks(&buf.freeze(), cuts, copied, FrameDecoder::next_frame);
            prop_assert!(dec.is_empty());
            prop_assert_eq!(got, whole);
        }

        #[test]
        fn frames_taken_in_pieces_carry_the_same_bytes(
            items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20),
            cuts in proptest::collection::vec(0usize..1000, 0..8),
            copied in any::<u8>(),
        ) {
            let buf = answer_of(&items, 3);
            let whole = decode_all(&buf);
            let (dec, got) = take_in_chunks(&buf.freeze(), cuts, copied, FrameDecoder::next_piece);
            prop_assert!(dec.is_empty());
            // The pieces of each frame, joined, are the frame: in the same order, the same
            // bytes, and the other frames as they were.
            let mut joined: Vec<Frame> = Vec::new();
            let mut left = 0usize;
            let mut expected = whole.iter();
            for frame in got {
                if let Frame::Packets(piece) = &frame && left > 0 {
                    prop_assert!(piece.len() <= left);
                    left -= piece.len();
                    if let Some(Frame::Packets(last)) = joined.last_mut() {
                        *last = [&last[..], &piece[..]].concat().into();
                    }
                    continue;
                }
                let next = expected.next().cloned();
                if let (Frame::Packets(piece), Some(Frame::Packets(full))) = (&frame, &next) {
                    prop_assert!(!piece.is_empty() || full.is_empty());
                    left = full.len() - piece.len();
                }
                joined.push(frame);
            }
            prop_assert_eq!(left, 0);
            prop_assert_eq!(joined, whole);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut dec = FrameDecoder::new(1024);
            dec.extend(&bytes);
            while let Ok(Some(_)) = dec.next_frame() {}
            let mut dec = FrameDecoder::new(1024);
            dec.extend_shared(Bytes::from(bytes));
            while let Ok(Some(_)) = dec.next_piece() {}
        }
    }
}
