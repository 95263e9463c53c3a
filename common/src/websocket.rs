//! The stream carrier's WebSocket messages (RFC 6455, framed by `fastwebsockets`) for both
//! halves: each binary message read whole, into a buffer that is never zeroed, and messages
//! queued and sent in one write; while an answer waits, the connection's end is watched for.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use base64::Engine;
use bytes::{Bytes, BytesMut};
use fastwebsockets::{Frame, OpCode, WebSocket, WebSocketError};
use sha1::{Digest, Sha1};
use tokio::io::{AsyncRead, AsyncWrite, BufWriter, ReadBuf};

pub use fastwebsockets::{Payload, Role};

/// Most bytes one read takes from the socket. The framer reads into all the room its buffer
/// has, and grows the buffer when what it read ahead leaves no room for the next frame.
/// Uncapped, that buffer grew with a long answer: a 100 MB result raised the sidecar's peak
/// memory by 60 MB (`tests/streaming.rs`); capped, by nothing measurable.
const MAX_READ: usize = 16 * 1024;

/// Most bytes a peer may send while its connection is watched ([`MessageSocket::watch_end`])
/// before the watch stops: they are kept for the next read either way.
const MAX_HELD: usize = 16 * 1024;

/// The GUID a `Sec-WebSocket-Accept` is derived with (RFC 6455 §1.3).
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` value that answers `Sec-WebSocket-Key: key` (RFC 6455 §4.2.2).
pub fn accept_key(key: &[u8]) -> String {
    let mut sha1 = Sha1::new();
    sha1.update(key);
    sha1.update(ACCEPT_GUID);
    base64::engine::general_purpose::STANDARD.encode(sha1.finalize())
}

/// One end of an upgraded connection, carrying whole binary messages.
///
/// Reading is not cancel-safe: a read given up half-way (a timeout) leaves the framing
/// unknown, and [`Self::is_intact`] then says the connection is not to be used again.
pub struct MessageSocket<S> {
    ws: WebSocket<BufWriter<CappedReads<S>>>,
    /// The fragments of a message that arrived in several frames, gathered until its last.
    gathering: Option<BytesMut>,
    /// Largest message taken.
    max_message: usize,
    /// True while a read is under way (or was given up half-way).
    reading: bool,
    /// Set while [`Self::watch_end`] waits: the socket's flush then reads what arrives.
    watching: Arc<AtomicBool>,
}

impl<S> std::fmt::Debug for MessageSocket<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageSocket").field("reading", &self.reading).finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> MessageSocket<S> {
    /// Carries messages of at most `max_message` bytes on `stream`, whose upgrade is done, as
    /// `role`. Queued messages are sent when `write_room` bytes are waiting, or at a flush.
    pub fn new(stream: S, role: Role, max_message: usize, write_room: usize) -> Self {
        let watching = Arc::new(AtomicBool::new(false));
        let reads = CappedReads {
            socket: stream,
            scratch: Vec::new(),
            held: BytesMut::new(),
            ended: None,
            watching: watching.clone(),
        };
        let stream = BufWriter::with_capacity(write_room, reads);
        let mut ws = WebSocket::after_handshake(stream, role);
        // Pings are answered here, with a flush; a peer's close is answered by the crate
        // and sent at the next flush.
        ws.set_auto_pong(false);
        ws.set_auto_close(true);
        // The crate refuses a frame of `max_message_size` bytes or more.
        ws.set_max_message_size(max_message.saturating_add(1));
        Self { ws, gathering: None, max_message, reading: false, watching }
    }

    /// False once a read was given up half-way: the next frame's start is unknown.
    pub fn is_intact(&self) -> bool {
        !self.reading
    }

    /// The next binary message; `None` when the peer closed the stream (its close is
    /// answered). A connection that ends without a close is `UnexpectedEof`; a text message,
    /// a broken frame or a message over the limit is `InvalidData`.
    pub async fn next(&mut self) -> io::Result<Option<Bytes>> {
        self.reading = true;
        loop {
            let frame = self.ws.read_frame().await.map_err(into_io)?;
            let data = match frame.opcode {
                OpCode::Binary if self.gathering.is_none() => {
                    let data = owned(frame.payload);
                    if !frame.fin {
                        self.gathering = Some(data);
                        continue;
                    }
                    data
                }
                OpCode::Continuation => {
                    let gathered = self.gathering.as_mut().ok_or_else(|| {
                        invalid("a continuation frame outside a message".to_string())
                    })?;
                    if gathered.len() + frame.payload.len() > self.max_message {
                        return Err(invalid(format!(
                            "a message over the limit of {} bytes",
                            self.max_message
                        )));
                    }
                    gathered.extend_from_slice(&frame.payload);
                    if !frame.fin {
                        continue;
                    }
                    self.gathering.take().unwrap_or_default()
                }
                OpCode::Binary => {
                    return Err(invalid("a message began inside another".to_string()));
                }
                OpCode::Text => {
                    return Err(invalid("a text message: only binary ones are spoken".to_string()));
                }
                OpCode::Ping => {
                    self.ws.write_frame(Frame::pong(frame.payload)).await.map_err(into_io)?;
                    self.flush().await?;
                    continue;
                }
                OpCode::Pong => continue,
                OpCode::Close => {
                    // The crate queued the answering close.
                    self.flush().await?;
                    self.reading = false;
                    return Ok(None);
                }
            };
            self.reading = false;
            return Ok(Some(data.freeze()));
        }
    }

    /// Queues a binary message, writing what is queued when the room is full.
    pub async fn feed(&mut self, message: Payload<'_>) -> io::Result<()> {
        self.ws.write_frame(Frame::binary(message)).await.map_err(into_io)
    }

    /// Sends what is queued.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.ws.flush().await.map_err(into_io)
    }

    /// Sends what is queued, then waits, reading no message, until the connection ends: an
    /// error, `UnexpectedEof` for an end without an error. Bytes the peer sends meanwhile are
    /// kept for the next read, whole or not, and the watch goes on; past [`MAX_HELD`] of them
    /// it stops, with `Ok`. Cancel-safe, unlike a read: the side that writes an answer uses it
    /// to learn at once that nobody will take it.
    pub async fn watch_end(&mut self) -> io::Result<()> {
        /// Ends the watch however the wait ends (done or dropped).
        struct Watch<'a>(&'a AtomicBool);
        impl Drop for Watch<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Relaxed);
            }
        }
        self.watching.store(true, Ordering::Relaxed);
        let _watch = Watch(&self.watching);
        self.ws.flush().await.map_err(into_io)
    }

    /// Sends a close (unless the peer's was answered already) and what is queued before it.
    pub async fn close(&mut self) -> io::Result<()> {
        match self.ws.write_frame(Frame::close(1000, b"")).await {
            Ok(()) | Err(WebSocketError::ConnectionClosed) => {}
            Err(e) => return Err(into_io(e)),
        }
        self.flush().await
    }
}

/// A socket whose reads take at most [`MAX_READ`] bytes each: a larger room is filled through
/// a scratch buffer (initialised once, so nothing is zeroed per read). While `watching`, a
/// flush, once done, waits for the connection's end, and keeps what arrives meanwhile
/// (`held`), which reads give out before the socket's bytes, and then the end it met.
struct CappedReads<S> {
    socket: S,
    scratch: Vec<u8>,
    /// Bytes that arrived during a watch, not read yet.
    held: BytesMut,
    /// How the connection ended during a watch (`UnexpectedEof`: it closed).
    ended: Option<io::ErrorKind>,
    /// Set by [`MessageSocket::watch_end`] while it waits.
    watching: Arc<AtomicBool>,
}

impl<S: AsyncRead + Unpin> CappedReads<S> {
    /// Reads what the peer sends into `held` until the connection ends (an error), or `held`
    /// is full (`Ok`).
    fn poll_watch(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if let Some(kind) = self.ended {
                return Poll::Ready(Err(ended(kind)));
            }
            if self.held.len() >= MAX_HELD {
                return Poll::Ready(Ok(()));
            }
            self.scratch.resize(MAX_READ, 0);
            let mut room = ReadBuf::new(&mut self.scratch);
            match ready!(Pin::new(&mut self.socket).poll_read(cx, &mut room)) {
                Ok(()) if room.filled().is_empty() => {
                    self.ended = Some(io::ErrorKind::UnexpectedEof);
                }
                Ok(()) => self.held.extend_from_slice(room.filled()),
                Err(e) => {
                    self.ended = Some(e.kind());
                    return Poll::Ready(Err(e));
                }
            }
        }
    }
}

/// The error of a connection that ended during a watch.
fn ended(kind: io::ErrorKind) -> io::Error {
    io::Error::new(kind, "the connection ended while an answer waited")
}

impl<S: AsyncRead + Unpin> AsyncRead for CappedReads<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.held.is_empty() {
            let n = this.held.len().min(buf.remaining());
            buf.put_slice(&this.held.split_to(n));
            return Poll::Ready(Ok(()));
        }
        match this.ended {
            // The end of the stream: nothing read.
            Some(io::ErrorKind::UnexpectedEof) => return Poll::Ready(Ok(())),
            Some(kind) => return Poll::Ready(Err(ended(kind))),
            None => {}
        }
        if buf.remaining() <= MAX_READ {
            return Pin::new(&mut this.socket).poll_read(cx, buf);
        }
        this.scratch.resize(MAX_READ, 0);
        let mut capped = ReadBuf::new(&mut this.scratch);
        let polled = Pin::new(&mut this.socket).poll_read(cx, &mut capped);
        buf.put_slice(capped.filled());
        polled
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for CappedReads<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.socket).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(Pin::new(&mut self.socket).poll_flush(cx))?;
        if !self.watching.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        self.poll_watch(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_shutdown(cx)
    }
}

/// A frame's payload as an owned buffer; a read frame's is one already, so nothing is copied.
fn owned(payload: Payload<'_>) -> BytesMut {
    match payload {
        Payload::Bytes(data) => data,
        other => BytesMut::from(&other[..]),
    }
}

/// An error of the stream's data.
fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// A WebSocket error as the I/O error an HTTP connection would have met: an end without a
/// close is `UnexpectedEof`, a write after a close `ConnectionAborted`.
fn into_io(e: WebSocketError) -> io::Error {
    match e {
        WebSocketError::IoError(e) => e,
        WebSocketError::UnexpectedEOF => {
            io::Error::new(io::ErrorKind::UnexpectedEof, "the stream broke")
        }
        WebSocketError::ConnectionClosed => {
            io::Error::new(io::ErrorKind::ConnectionAborted, "the stream closed")
        }
        other => invalid(format!("a broken WebSocket stream: {other}")),
    }
}

#[cfg(test)]
#[path = "websocket_tests.rs"]
mod tests;
