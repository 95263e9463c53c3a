//! The raw client in the compressed protocol (CLIENT_COMPRESS): a command sent and its answer
//! read as compressed packets, each one's uncompressed length recorded, to compare how a server
//! and the sidecar frame the same answer.

use bytes::BytesMut;
use common::mysql::compressed;
use common::mysql::packets::{PacketHead, lenenc_int, ok_status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{CAPS, MORE_RESULTS, RawClient};

/// CLIENT_COMPRESS.
const COMPRESS: u32 = 0x0000_0020;

/// A logged-in connection speaking the compressed protocol.
pub struct CompressedClient {
    stream: TcpStream,
    zin: BytesMut,
}

/// An answer as compressed packets carried it.
#[derive(Debug, Default)]
pub struct Framed {
    /// The packets, as the compressed packets carried them joined.
    pub bytes: Vec<u8>,
    /// Each compressed packet's uncompressed length, in order.
    pub lengths: Vec<usize>,
    /// Each compressed packet's sequence id, in order.
    pub seqs: Vec<u8>,
}

impl CompressedClient {
    /// Connects and logs in asking for compression (no CLIENT_DEPRECATE_EOF).
    pub async fn login(port: u16, user: &str, password: &str, db: &str) -> CompressedClient {
        let c = RawClient::login_with_caps(port, user, password, db, CAPS | COMPRESS).await;
        CompressedClient { stream: c.stream, zin: BytesMut::new() }
    }

    /// Sends `sql` as a COM_QUERY and reads its whole answer, every result set.
    pub async fn query(&mut self, sql: &str) -> Framed {
        let mut wire = BytesMut::new();
        compressed::encode(&com_query(sql), 0, &mut wire);
        self.send(&wire).await;
        self.answer().await
    }

    /// Sends bytes as they are: compressed packets made by the caller.
    pub async fn send(&mut self, wire: &[u8]) {
        self.stream.write_all(wire).await.expect("write a compressed command");
    }

    /// Reads one whole answer, every result set.
    pub async fn answer(&mut self) -> Framed {
        self.answer_or_end().await.expect("the server hung up before answering")
    }

    /// [`Self::answer`], or `None` when the peer hangs up before any of it.
    pub async fn answer_or_end(&mut self) -> Option<Framed> {
        let (mut bytes, mut framed, mut end) =
            (BytesMut::new(), Framed::default(), AnswerEnd::default());
        loop {
            let before = bytes.len();
            match compressed::decode(&mut self.zin, &mut bytes, 1 << 25).expect("inflate") {
                Some(seq) => {
                    framed.lengths.push(bytes.len() - before);
                    framed.seqs.push(seq);
                    if end.reached(&bytes) {
                        assert!(self.zin.is_empty(), "nothing after the answer");
                        framed.bytes = bytes.to_vec();
                        return Some(framed);
                    }
                }
                None => {
                    let n = self.stream.read_buf(&mut self.zin).await.unwrap_or(0);
                    if n == 0 && bytes.is_empty() && self.zin.is_empty() {
                        return None;
                    }
                    assert!(n > 0, "the server hung up mid-answer");
                }
            }
        }
    }
}

/// A COM_QUERY packet of `sql`, sequence id 0.
pub fn com_query(sql: &str) -> Vec<u8> {
    let mut packet = Vec::new();
    PacketHead::write(&mut packet, 1 + sql.len(), 0);
    packet.push(0x03);
    packet.extend_from_slice(sql.as_bytes());
    packet
}

/// Where an answer ends (without CLIENT_DEPRECATE_EOF): an OK or ERR, or result sets each up to
/// the EOF after its rows, the last without SERVER_MORE_RESULTS_EXISTS. Followed packet by
/// packet as the bytes arrive.
#[derive(Debug, Default)]
struct AnswerEnd {
    /// Where the next logical packet starts.
    at: usize,
    /// What comes next.
    expect: Expect,
}

#[derive(Debug, Default, Clone, Copy)]
enum Expect {
    /// An answer's first packet: OK, ERR or a column count.
    #[default]
    First,
    /// Column definitions and their EOF, this many packets.
    Definitions(u64),
    /// Rows, until an EOF or ERR.
    Rows,
}

impl AnswerEnd {
    /// True once `bytes` hold the whole answer.
    fn reached(&mut self, bytes: &[u8]) -> bool {
        while let Some((len, payload)) = logical_at(bytes, self.at) {
            self.at += len;
            let (first, short) = (payload.first().copied(), payload.len() < 9);
            let more = || ok_status(payload).is_some_and(|s| s & MORE_RESULTS != 0);
            let eof_more = || payload.len() >= 5 && payload[3] & MORE_RESULTS as u8 != 0;
            self.expect = match (self.expect, first) {
                (Expect::First | Expect::Rows, Some(0xff)) => return true,
                (Expect::First, Some(0x00)) if more() => Expect::First,
                (Expect::First, Some(0x00)) => return true,
                (Expect::First, _) => {
                    let columns = lenenc_int(payload).map_or(0, |(n, _)| n);
                    Expect::Definitions(columns + 1)
                }
                (Expect::Definitions(1), _) => Expect::Rows,
                (Expect::Definitions(n), _) => Expect::Definitions(n - 1),
                (Expect::Rows, Some(0xfe)) if short && eof_more() => Expect::First,
                (Expect::Rows, Some(0xfe)) if short => return true,
                (Expect::Rows, _) => Expect::Rows,
            };
        }
        false
    }
}

/// The logical packet at `at` when it is whole: its length with headers, and its first piece's
/// payload (enough to tell OK, ERR and EOF apart: a longer packet is a row).
fn logical_at(bytes: &[u8], at: usize) -> Option<(usize, &[u8])> {
    let first = PacketHead::parse(bytes.get(at..)?)?;
    let mut end = at;
    loop {
        let head = PacketHead::parse(bytes.get(end..)?)?;
        end += PacketHead::LEN + head.len;
        if end > bytes.len() {
            return None;
        }
        if head.len < 0xff_ffff {
            let payload = &bytes[at + PacketHead::LEN..at + PacketHead::LEN + first.len];
            return Some((end - at, payload));
        }
    }
}
