//! The stream carrier's WebSocket messages (RFC 6455, framed by `fastwebsockets`) for both
//! halves: each binary message read whole, into a buffer that is never zeroed, and messages
//! queued and sent in one write.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

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
        let stream = BufWriter::with_capacity(
            write_room,
            CappedReads { socket: stream, scratch: Vec::new() },
        );
        let mut ws = WebSocket::after_handshake(stream, role);
        // Pings are answered here, with a flush; a peer's close is answered by the crate
        // and sent at the next flush.
        ws.set_auto_pong(false);
        ws.set_auto_close(true);
        // The crate refuses a frame of `max_message_size` bytes or more.
        ws.set_max_message_size(max_message.saturating_add(1));
        Self { ws, gathering: None, max_message, reading: false }
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
/// a scratch buffer (initialised once, so nothing is zeroed per read).
struct CappedReads<S> {
    socket: S,
    scratch: Vec<u8>,
}

impl<S: AsyncRead + Unpin> AsyncRead for CappedReads<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
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

impl<S: AsyncWrite + Unpin> AsyncWrite for CappedReads<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.socket).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
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
