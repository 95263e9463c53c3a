//! Binary frames of a command response: `[tag u8][len u32 LE][payload]`.
//!
//! `Columns` and `Rows` payloads are lists of MySQL packet payloads, each `[len u32 LE][bytes]`,
//! so the sidecar writes them to its client with nothing but a packet header added.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::Error;

const TAG_COLUMNS: u8 = 1;
const TAG_ROWS: u8 = 2;
const TAG_END: u8 = 3;
const TAG_OK: u8 = 4;
const TAG_ERR: u8 = 5;
const TAG_HEARTBEAT: u8 = 6;
const TAG_PREPARED: u8 = 7;
const TAG_INFILE: u8 = 8;
const TAG_PACKETS: u8 = 9;
const TAG_TURN: u8 = 10;
const HEADER_LEN: usize = 5;

/// Default largest frame payload a decoder accepts (a row may be as big as
/// `max_allowed_packet`, 1 GiB at most, plus list framing).
pub const DEFAULT_MAX_FRAME: usize = (1 << 30) + 1024;

/// The affected-rows part of a MySQL OK packet, carried exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OkInfo {
    /// Affected rows.
    pub affected_rows: u64,
    /// Last insert id.
    pub last_insert_id: u64,
    /// Server status flags.
    pub status: u16,
    /// Warning count.
    pub warnings: u16,
    /// Human-readable info (`Rows matched: 1  Changed: 1  Warnings: 0`), raw bytes.
    pub info: Bytes,
}

/// Why the transport's answer to a relayed request ended: whose turn it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// Column definitions of a result set (a [`PacketList`] of ColumnDefinition41 payloads).
    Columns(Bytes),
    /// A batch of rows (a [`PacketList`] of row payloads).
    Rows(Bytes),
    /// End of a result set.
    End {
        /// Status flags of the terminator (with MORE_RESULTS_EXISTS when another set follows).
        status: u16,
        /// Warning count.
        warnings: u16,
    },
    /// A command's OK (or a result set without rows, e.g. in a multi-statement).
    Ok(OkInfo),
    /// A command's error; ends the response.
    Err {
        /// Error code.
        code: u16,
        /// SQLSTATE.
        sqlstate: [u8; 5],
        /// Message bytes.
        message: Bytes,
    },
    /// Sent while a long command runs so that proxies see traffic; carries nothing.
    Heartbeat,
    /// The upstream asks for a local file (LOAD DATA LOCAL INFILE): the client is to send it,
    /// and the sidecar uploads it to `…/sessions/{id}/infile`. Carries the file name.
    Infile(Bytes),
    /// COM_STMT_PREPARE succeeded; parameter then column definitions follow as `Columns`
    /// frames (each only when its count is not zero).
    Prepared {
        /// Statement id the client uses.
        statement_id: u32,
        /// Result columns.
        columns: u16,
        /// Parameters.
        params: u16,
        /// Warning count.
        warnings: u16,
    },
    /// Relayed MySQL packets, headers included, exactly as the upstream sent them.
    Packets(Bytes),
    /// The end of a relayed answer, and whose turn it is.
    Turn(TurnEnd),
}

/// Iterator over a `Columns` or `Rows` payload.
#[derive(Debug, Clone)]
pub struct PacketList(Bytes);

impl PacketList {
    /// Wraps a list payload.
    pub fn new(payload: Bytes) -> Self {
        Self(payload)
    }
}

impl Iterator for PacketList {
    type Item = Result<Bytes, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        if self.0.len() < 4 {
            self.0.clear();
            return Some(Err(Error::Wire("truncated packet length in list")));
        }
        let len = (&self.0[..4]).get_u32_le() as usize;
        if self.0.len() - 4 < len {
            self.0.clear();
            return Some(Err(Error::Wire("packet in list overruns its frame")));
        }
        self.0.advance(4);
        Some(Ok(self.0.split_to(len)))
    }
}

/// Position of an open list frame in a buffer, returned by [`list_begin`].
#[derive(Debug, Clone, Copy)]
pub struct ListMark(usize);

/// Starts a `Columns` (`rows == false`) or `Rows` frame in `buf`.
pub fn list_begin(buf: &mut BytesMut, rows: bool) -> ListMark {
    let at = buf.len();
    buf.put_u8(if rows { TAG_ROWS } else { TAG_COLUMNS });
    buf.put_u32_le(0);
    ListMark(at)
}

/// Starts one packet inside an open list; write the payload after it.
pub fn list_item_begin(buf: &mut BytesMut) -> ListMark {
    let at = buf.len();
    buf.put_u32_le(0);
    ListMark(at)
}

/// Closes a packet started with [`list_item_begin`].
pub fn list_item_finish(buf: &mut BytesMut, mark: ListMark) {
    patch_len(buf, mark.0, buf.len() - mark.0 - 4);
}

/// Closes a list frame started with [`list_begin`].
pub fn list_finish(buf: &mut BytesMut, mark: ListMark) {
    patch_len(buf, mark.0 + 1, buf.len() - mark.0 - HEADER_LEN);
}

fn patch_len(buf: &mut BytesMut, at: usize, len: usize) {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

fn header(buf: &mut BytesMut, tag: u8, len: usize) {
    buf.put_u8(tag);
    buf.put_u32_le(u32::try_from(len).unwrap_or(u32::MAX));
}

/// Appends an `End` frame.
pub fn encode_end(buf: &mut BytesMut, status: u16, warnings: u16) {
    header(buf, TAG_END, 4);
    buf.put_u16_le(status);
    buf.put_u16_le(warnings);
}

/// Appends an `Ok` frame.
pub fn encode_ok(buf: &mut BytesMut, ok: &OkInfo) {
    header(buf, TAG_OK, 20 + ok.info.len());
    buf.put_u64_le(ok.affected_rows);
    buf.put_u64_le(ok.last_insert_id);
    buf.put_u16_le(ok.status);
    buf.put_u16_le(ok.warnings);
    buf.put_slice(&ok.info);
}

/// Appends an `Err` frame.
pub fn encode_err(buf: &mut BytesMut, code: u16, sqlstate: &[u8; 5], message: &[u8]) {
    header(buf, TAG_ERR, 7 + message.len());
    buf.put_u16_le(code);
    buf.put_slice(sqlstate);
    buf.put_slice(message);
}

/// Appends a `Prepared` frame.
pub fn encode_prepared(
    buf: &mut BytesMut,
    statement_id: u32,
    columns: u16,
    params: u16,
    warnings: u16,
) {
    header(buf, TAG_PREPARED, 10);
    buf.put_u32_le(statement_id);
    buf.put_u16_le(columns);
    buf.put_u16_le(params);
    buf.put_u16_le(warnings);
}

/// Appends a `Heartbeat` frame.
pub fn encode_heartbeat(buf: &mut BytesMut) {
    header(buf, TAG_HEARTBEAT, 0);
}

/// Appends an infile request frame naming the file the upstream asks for.
pub fn encode_infile(buf: &mut BytesMut, file_name: &[u8]) {
    header(buf, TAG_INFILE, file_name.len());
    buf.put_slice(file_name);
}

/// Appends a `Packets` frame holding `packets` (raw MySQL packets).
pub fn encode_packets(buf: &mut BytesMut, packets: &[u8]) {
    header(buf, TAG_PACKETS, packets.len());
    buf.put_slice(packets);
}

/// Appends a `Turn` frame.
pub fn encode_turn(buf: &mut BytesMut, end: TurnEnd) {
    header(buf, TAG_TURN, 1);
    buf.put_u8(end.code());
}

/// Incremental decoder: feed body chunks with [`FrameDecoder::extend`], take frames with
/// [`FrameDecoder::next_frame`].
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max_frame: usize,
}

impl FrameDecoder {
    /// A decoder refusing frames whose payload exceeds `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        Self { buf: BytesMut::new(), max_frame }
    }

    /// Appends received bytes.
    pub fn extend(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// True when no partial frame is buffered.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Decodes the next complete frame, if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, Error> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let tag = self.buf[0];
        let len = (&self.buf[1..HEADER_LEN]).get_u32_le() as usize;
        if len > self.max_frame {
            return Err(Error::FrameTooLarge { size: len, limit: self.max_frame });
        }
        if self.buf.len() < HEADER_LEN + len {
            self.buf.reserve(HEADER_LEN + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(HEADER_LEN);
        let mut payload = self.buf.split_to(len).freeze();
        let frame = match tag {
            TAG_COLUMNS => Frame::Columns(payload),
            TAG_ROWS => Frame::Rows(payload),
            TAG_END if len == 4 => {
                Frame::End { status: payload.get_u16_le(), warnings: payload.get_u16_le() }
            }
            TAG_OK if len >= 20 => Frame::Ok(OkInfo {
                affected_rows: payload.get_u64_le(),
                last_insert_id: payload.get_u64_le(),
                status: payload.get_u16_le(),
                warnings: payload.get_u16_le(),
                info: payload,
            }),
            TAG_ERR if len >= 7 => {
                let code = payload.get_u16_le();
                let mut sqlstate = [0u8; 5];
                payload.copy_to_slice(&mut sqlstate);
                Frame::Err { code, sqlstate, message: payload }
            }
            TAG_HEARTBEAT if len == 0 => Frame::Heartbeat,
            TAG_INFILE => Frame::Infile(payload),
            TAG_PACKETS => Frame::Packets(payload),
            TAG_TURN if len == 1 => match TurnEnd::from_code(payload[0]) {
                Some(end) => Frame::Turn(end),
                None => return Err(Error::Wire("unknown turn end")),
            },
            TAG_PREPARED if len == 10 => Frame::Prepared {
                statement_id: payload.get_u32_le(),
                columns: payload.get_u16_le(),
                params: payload.get_u16_le(),
                warnings: payload.get_u16_le(),
            },
            TAG_END | TAG_OK | TAG_ERR | TAG_HEARTBEAT | TAG_PREPARED | TAG_TURN => {
                return Err(Error::Wire("frame payload has the wrong length for its tag"));
            }
            _ => return Err(Error::Wire("unknown frame tag")),
        };
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn list(rows: bool, items: &[&[u8]]) -> BytesMut {
        let mut buf = BytesMut::new();
        let mark = list_begin(&mut buf, rows);
        for item in items {
            let m = list_item_begin(&mut buf);
            buf.put_slice(item);
            list_item_finish(&mut buf, m);
        }
        list_finish(&mut buf, mark);
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
        let mut buf = list(false, &[b"coldef1", b""]);
        buf.extend_from_slice(&list(true, &[b"\x00\xfb", b"row2"]));
        encode_end(&mut buf, 0x0022, 3);
        let ok = OkInfo {
            affected_rows: 5,
            last_insert_id: u64::MAX,
            status: 2,
            warnings: 1,
            info: Bytes::from_static(b"Rows matched: 5"),
        };
        encode_ok(&mut buf, &ok);
        encode_err(&mut buf, 1146, b"42S02", b"Table 't' doesn't exist");
        encode_heartbeat(&mut buf);
        encode_prepared(&mut buf, 7, 2, 3, 1);
        encode_infile(&mut buf, b"/tmp/data.csv");
        let frames = decode_all(&buf);
        assert_eq!(frames.len(), 8);
        assert_eq!(frames[7], Frame::Infile(Bytes::from_static(b"/tmp/data.csv")));
        assert_eq!(
            frames[6],
            Frame::Prepared { statement_id: 7, columns: 2, params: 3, warnings: 1 }
        );
        let Frame::Columns(cols) = &frames[0] else { panic!("columns expected") };
        let cols: Vec<_> = PacketList::new(cols.clone()).map(|r| r.ok()).collect();
        assert_eq!(cols, vec![Some(Bytes::from_static(b"coldef1")), Some(Bytes::new())]);
        let Frame::Rows(rows) = &frames[1] else { panic!("rows expected") };
        assert_eq!(PacketList::new(rows.clone()).count(), 2);
        assert_eq!(frames[2], Frame::End { status: 0x22, warnings: 3 });
        assert_eq!(frames[3], Frame::Ok(ok));
        assert_eq!(
            frames[4],
            Frame::Err {
                code: 1146,
                sqlstate: *b"42S02",
                message: Bytes::from_static(b"Table 't' doesn't exist")
            }
        );
        assert_eq!(frames[5], Frame::Heartbeat);
    }

    #[test]
    fn round_trips_relayed_packets_and_turns() {
        let mut buf = BytesMut::new();
        encode_packets(&mut buf, b"\x01\x00\x00\x01\x00");
        for end in TurnEnd::ALL {
            encode_turn(&mut buf, end);
        }
        let frames = decode_all(&buf);
        assert_eq!(frames[0], Frame::Packets(Bytes::from_static(b"\x01\x00\x00\x01\x00")));
        let turns: Vec<_> = frames[1..].to_vec();
        assert_eq!(turns, TurnEnd::ALL.map(Frame::Turn).to_vec());
        let mut bad = FrameDecoder::new(DEFAULT_MAX_FRAME);
        bad.extend(&[TAG_TURN, 1, 0, 0, 0, 9]);
        assert!(bad.next_frame().is_err());
    }

    #[test]
    fn refuses_bad_frames() {
        let mut dec = FrameDecoder::new(16);
        dec.extend(&[TAG_ROWS, 17, 0, 0, 0]);
        assert!(matches!(dec.next_frame(), Err(Error::FrameTooLarge { size: 17, .. })));
        let mut dec = FrameDecoder::new(16);
        dec.extend(&[99, 0, 0, 0, 0]);
        assert!(dec.next_frame().is_err());
        let mut dec = FrameDecoder::new(16);
        dec.extend(&[TAG_END, 1, 0, 0, 0, 7]);
        assert!(dec.next_frame().is_err());
        let bad_list = Bytes::from_static(&[9, 0, 0, 0, 1]);
        assert!(PacketList::new(bad_list).next().is_some_and(|r| r.is_err()));
    }

    proptest! {
        #[test]
        fn any_split_of_the_stream_decodes_the_same(
            items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20),
            cut in 0usize..400,
        ) {
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let mut buf = list(true, &refs);
            encode_end(&mut buf, 1, 2);
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
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut dec = FrameDecoder::new(1024);
            dec.extend(&bytes);
            while let Ok(Some(frame)) = dec.next_frame() {
                if let Frame::Rows(p) | Frame::Columns(p) = frame {
                    for _ in PacketList::new(p) {}
                }
            }
        }
    }
}
