//! MySQL packet framing on the client socket: 3-byte length + sequence id, payloads of 16 MiB
//! and more split and joined, writes buffered and flushed in as few syscalls as possible.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::mysql::compressed;
pub use common::mysql::packets::MAX_PAYLOAD;
use common::mysql::packets::{Logical, PacketHead, logical_packet, split_packets};
use common::stream::{MaybeTls, Prefixed};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::Error;

/// The payloads of whole packets in `packets` (headers included; login packets, never 16 MiB
/// continuations); an error if one is cut short.
pub fn split_payloads(packets: &[u8]) -> Result<Vec<Bytes>, Error> {
    let split = split_packets(packets).ok_or(crate::error::Broken::CutPacket)?;
    Ok(split.into_iter().map(|(_, payload)| Bytes::copy_from_slice(payload)).collect())
}

/// Buffered output is written once it reaches this size.
const FLUSH_AT: usize = 64 * 1024;

/// The client socket `S`: plain, or TLS after an SSLRequest (over any bytes read ahead).
type ClientStream<S> = MaybeTls<S, tokio_rustls::server::TlsStream<Prefixed<S>>>;

/// Longest wait for room in the sidecar's `max_inflight_bytes`.
pub const BUDGET_WAIT: Duration = Duration::from_secs(30);

/// Room for `n` bytes in `budget`, waiting up to [`BUDGET_WAIT`].
async fn reserve(budget: &Arc<Semaphore>, n: usize) -> Result<OwnedSemaphorePermit, Error> {
    let n = u32::try_from(n).map_err(|_| Error::Busy)?;
    if let Ok(room) = budget.clone().try_acquire_many_owned(n) {
        return Ok(room);
    }
    match tokio::time::timeout(BUDGET_WAIT, budget.clone().acquire_many_owned(n)).await {
        Ok(Ok(room)) => Ok(room),
        _ => Err(Error::Busy),
    }
}

/// A client connection's packet reader and writer, over its socket `S` (a TCP socket; any
/// byte stream in tests).
#[derive(Debug)]
pub struct PacketIo<S = TcpStream> {
    stream: ClientStream<S>,
    peer: Option<std::net::SocketAddr>,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// Relayed bytes queued as they came, without a copy, while nothing else is queued (most
    /// answers are one piece); copied into `wbuf` once anything follows them.
    held: Bytes,
    seq: u8,
    max_packet: usize,
    /// Where the relayed packets queued begin and end.
    relayed: super::relayed::RelayedPackets,
    /// Times the write buffer was sent: a [`QueuedPacket`] from an earlier round is gone.
    flushes: u64,
    /// The compressed protocol, once the login asked for it and succeeded.
    compressed: Option<Compressed>,
}

/// The compressed protocol's state: bytes read and not yet inflated, the sequence id of the
/// next compressed packet (it starts again at 0 with each command), and where the answer's
/// next compressed packet ends.
#[derive(Debug, Default)]
struct Compressed {
    zin: BytesMut,
    zout: BytesMut,
    seq: u8,
    framing: super::compressed_framing::Framing,
}

/// A small packet still in the write buffer, which may be patched until the next flush.
#[derive(Debug, Clone, Copy)]
pub struct QueuedPacket {
    flushes: u64,
    at: usize,
    len: usize,
}

impl PacketIo {
    /// Wraps a client's TCP socket; logical packets over `max_packet` bytes are refused.
    pub fn new(stream: TcpStream, max_packet: usize) -> Self {
        let peer = stream.peer_addr().ok();
        Self::over(stream, peer, max_packet)
    }

    /// Makes the connection end with a reset (RST) when it is dropped, as a server's reset
    /// would have reached a direct client.
    pub fn reset(&mut self) {
        let tcp = match &self.stream {
            MaybeTls::Plain(tcp) => Some(tcp),
            MaybeTls::Tls(tls) => Some(tls.get_ref().0.inner()),
            MaybeTls::Gone => None,
        };
        if let Some(Err(e)) = tcp.map(TcpStream::set_zero_linger) {
            tracing::debug!(error = %e, "cannot reset the client connection");
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    /// Wraps a client's byte stream from `peer`; logical packets over `max_packet` bytes are
    /// refused.
    pub fn over(stream: S, peer: Option<std::net::SocketAddr>, max_packet: usize) -> Self {
        Self {
            peer,
            stream: MaybeTls::Plain(stream),
            rbuf: BytesMut::with_capacity(16 * 1024),
            wbuf: BytesMut::with_capacity(16 * 1024),
            held: Bytes::new(),
            seq: 0,
            relayed: super::relayed::RelayedPackets::default(),
            max_packet,
            flushes: 0,
            compressed: None,
        }
    }

    /// Switches to the compressed protocol (after a login that asked for it succeeded).
    pub fn start_compression(&mut self) {
        // What the client sent behind its login is compressed already.
        self.compressed = Some(Compressed { zin: self.rbuf.split(), ..Compressed::default() });
    }

    /// Switches the connection to TLS (after the client's SSLRequest). Bytes the client sent
    /// right behind its request, already buffered, are the start of its TLS handshake.
    pub async fn upgrade_tls(&mut self, acceptor: &TlsAcceptor) -> Result<(), Error> {
        let MaybeTls::Plain(tcp) = std::mem::replace(&mut self.stream, MaybeTls::Gone) else {
            return Err(Error::ClientProtocol("TLS requested twice"));
        };
        let ahead = self.rbuf.split().freeze();
        let tls = acceptor.accept(Prefixed::new(ahead, tcp)).await?;
        self.stream = MaybeTls::Tls(Box::new(tls));
        Ok(())
    }

    /// True once the connection runs over TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.stream, MaybeTls::Tls(_))
    }

    /// Changes the largest logical packet accepted (small during login, larger after).
    pub fn set_max_packet(&mut self, max_packet: usize) {
        self.max_packet = max_packet;
    }

    /// Starts a new command: the next packet read or written has sequence id 0 (and so has
    /// the next compressed packet).
    pub fn reset_seq(&mut self) {
        self.seq = 0;
        if let Some(compressed) = self.compressed.as_mut() {
            compressed.seq = 0;
        }
    }

    /// Reads one logical packet (joining 16 MiB continuations). `None` when the client hung up
    /// between packets.
    pub async fn read_packet(&mut self) -> Result<Option<Bytes>, Error> {
        let Some((len, payload)) = self.next_logical(None).await?.map(|(l, _)| l) else {
            return Ok(None);
        };
        let raw = self.rbuf.split_to(len);
        if len == PacketHead::LEN + payload {
            return Ok(Some(raw.freeze().slice(PacketHead::LEN..)));
        }
        let split = split_packets(&raw).unwrap_or_default();
        let mut joined = BytesMut::with_capacity(payload);
        for (_, part) in split {
            joined.extend_from_slice(part);
        }
        Ok(Some(joined.freeze()))
    }

    /// Waits until the next logical packet is whole in the buffer (within `max_packet`, room
    /// for it held in `budget` first); its length with headers and its payload length, and the
    /// room. `None` when the client hung up between packets.
    async fn next_logical(
        &mut self,
        budget: Option<&Arc<Semaphore>>,
    ) -> Result<Option<((usize, usize), Option<OwnedSemaphorePermit>)>, Error> {
        let mut room: Option<OwnedSemaphorePermit> = None;
        loop {
            let need = match logical_packet(&self.rbuf, self.max_packet) {
                Logical::TooLarge { seq } => {
                    // The error that answers it follows the packet that said so.
                    self.seq = seq.wrapping_add(1);
                    return Err(Error::PacketTooLarge { limit: self.max_packet });
                }
                Logical::Whole { len, payload, last_seq } => {
                    self.seq = last_seq.wrapping_add(1);
                    if let Some(room) = room.as_mut() {
                        drop(room.split(room.num_permits().saturating_sub(len)));
                    }
                    return Ok(Some(((len, payload), room)));
                }
                Logical::Need(need) => need,
            };
            if let (Some(budget), None, Some(first)) =
                (budget, &room, PacketHead::parse(&self.rbuf))
            {
                // Room for the whole of it before its payload is read: for one continued past
                // 16 MiB, for `max_packet` (the excess is given back).
                let n = if first.len == MAX_PAYLOAD { self.max_packet } else { first.len };
                room = Some(reserve(budget, n + PacketHead::LEN).await?);
            }
            if !self.fill(need).await? {
                return if self.rbuf.is_empty() {
                    Ok(None)
                } else {
                    Err(Error::ClientProtocol("connection closed mid-packet"))
                };
            }
        }
    }

    /// The sequence id the client's next packet must have (the one after the last packet read
    /// or relayed).
    pub fn next_seq(&self) -> u8 {
        self.seq
    }

    /// Reads one logical packet as the client sent it, headers (and 16 MiB continuations)
    /// included, for passing on unchanged. `None` when the client hung up between packets.
    pub async fn read_raw(&mut self) -> Result<Option<Bytes>, Error> {
        Ok(self.read_raw_within(None).await?.map(|(packet, _)| packet))
    }

    /// [`Self::read_raw`], holding room in `budget` for the packet before reading its payload
    /// (for a packet continued past 16 MiB, room for `max_packet`, the excess given back): room
    /// is never held in part, so clients waiting for it cannot block each other. Waits up to
    /// [`BUDGET_WAIT`] ([`Error::Busy`]).
    pub async fn read_raw_within(
        &mut self,
        budget: Option<&Arc<Semaphore>>,
    ) -> Result<Option<(Bytes, Option<OwnedSemaphorePermit>)>, Error> {
        let Some(((len, _), room)) = self.next_logical(budget).await? else { return Ok(None) };
        Ok(Some((self.rbuf.split_to(len).freeze(), room)))
    }

    /// The command byte and the size (headers included) of the next logical packet when it is
    /// already here whole: the client sent it without waiting for the last answer
    /// (pipelined). `None` otherwise, and for an empty packet.
    pub fn buffered_command(&self) -> Option<(u8, usize)> {
        match logical_packet(&self.rbuf, usize::MAX) {
            Logical::Whole { len, payload, .. } if payload > 0 => Some((self.rbuf[4], len)),
            _ => None,
        }
    }

    /// Reads the packet the protocol requires next; the client hanging up instead is an error
    /// that says `when`.
    pub async fn read_expected(&mut self, when: &'static str) -> Result<Bytes, Error> {
        match self.read_packet().await? {
            Some(packet) => Ok(packet),
            None => Err(Error::ClientProtocol(when)),
        }
    }

    /// Reads until `n` bytes are buffered; false on EOF first. In the compressed protocol,
    /// whole compressed packets are inflated into the buffer as they arrive.
    async fn fill(&mut self, n: usize) -> Result<bool, Error> {
        while self.rbuf.len() < n {
            if let Some(z) = self.compressed.as_mut() {
                let limit = self.max_packet + MAX_PAYLOAD;
                let next = z.zin.get(3).map(|seq| seq.wrapping_add(1));
                let inflated = compressed::decode(&mut z.zin, &mut self.rbuf, limit);
                let inflated = inflated.map_err(|_| {
                    // The error that answers it follows it, as a server's does (both ids
                    // the next of the compressed packet's, a server's `net_flush`).
                    let next = next.unwrap_or_default();
                    (self.seq, z.seq) = (next, next);
                    Error::UncompressFailed
                })?;
                if let Some(seq) = inflated {
                    z.seq = seq.wrapping_add(1);
                    continue;
                }
                if self.stream.read_buf(&mut z.zin).await? == 0 {
                    return Ok(false);
                }
                continue;
            }
            self.rbuf.reserve(n - self.rbuf.len());
            if self.stream.read_buf(&mut self.rbuf).await? == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Closes the write side so the client sees the connection end at once.
    pub async fn shutdown(&mut self) {
        drop(self.stream.shutdown().await);
    }

    /// The peer's address, for logs.
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.peer
    }
}

#[path = "packet_write.rs"]
mod write;

#[cfg(test)]
#[path = "packet_tls_tests.rs"]
mod tls_tests;

#[cfg(test)]
#[path = "packet_file_request_tests.rs"]
mod file_request_tests;

#[cfg(test)]
mod tests {
    use tokio::io::DuplexStream;

    use super::*;

    /// A reader and writer over an in-memory pipe, and the client's end of it.
    async fn pair() -> (PacketIo<DuplexStream>, DuplexStream) {
        let (server, client) = tokio::io::duplex(1 << 20);
        (PacketIo::over(server, None, 64 << 20), client)
    }

    #[tokio::test]
    async fn splits_and_joins_big_payloads_with_empty_trailer() {
        let (mut io, client) = pair().await;
        let exact = vec![7u8; MAX_PAYLOAD];
        io.queue_packet(&exact);
        // header + payload + empty trailer header
        assert_eq!(io.wbuf.len(), 4 + MAX_PAYLOAD + 4);
        assert_eq!(&io.wbuf[io.wbuf.len() - 4..], &[0, 0, 0, 1]);
        io.wbuf.clear();
        drop(client);

        let (mut io, mut client) = pair().await;
        let big = vec![9u8; MAX_PAYLOAD + 10];
        let mut wire = Vec::new();
        wire.extend_from_slice(&[0xff, 0xff, 0xff, 0]);
        wire.extend_from_slice(&big[..MAX_PAYLOAD]);
        wire.extend_from_slice(&[10, 0, 0, 1]);
        wire.extend_from_slice(&big[MAX_PAYLOAD..]);
        let writer = tokio::spawn(async move { client.write_all(&wire).await.map(|_| client) });
        let got = io.read_packet().await.expect("read").expect("packet");
        assert_eq!(got.len(), big.len());
        assert_eq!(io.seq, 2);
        drop(writer.await);
    }

    #[tokio::test]
    async fn queued_packets_can_be_patched_until_flushed() {
        let (mut io, mut client) = pair().await;
        let eof = io.queue_packet_marked(&[0xfe, 0, 0, 2, 0]);
        io.queue_packet(b"row");
        assert!(io.patch_queued(eof, 3, &[0x22, 0]));
        assert!(!io.patch_queued(eof, 4, &[1, 1]), "past the end");
        io.flush().await.expect("flush");
        assert!(!io.patch_queued(eof, 3, &[0, 0]), "already sent");
        let mut wire = [0u8; 16];
        client.read_exact(&mut wire).await.expect("read");
        assert_eq!(&wire[..9], &[5, 0, 0, 0, 0xfe, 0, 0, 0x22, 0]);
    }

    #[tokio::test]
    async fn refuses_oversized_and_truncated_packets() {
        let (mut io, mut client) = pair().await;
        io.max_packet = 100;
        client.write_all(&[200, 0, 0, 0]).await.expect("write");
        assert!(matches!(io.read_packet().await, Err(Error::PacketTooLarge { limit: 100 })));

        let (mut io, mut client) = pair().await;
        client.write_all(&[10, 0, 0, 0, 1, 2]).await.expect("write");
        drop(client);
        assert!(matches!(io.read_packet().await, Err(Error::ClientProtocol(_))));

        let (mut io, client) = pair().await;
        drop(client);
        assert!(matches!(io.read_packet().await, Ok(None)));
    }
}
