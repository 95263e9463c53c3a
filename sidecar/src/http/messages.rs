//! The stream carrier's sidecar half (`common::wire` describes it): the WebSocket upgrade of an
//! [`HttpConn`], and steps and their answers as messages on the [`StreamConn`] it becomes.

use std::io;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use common::stream::Prefixed;
use common::websocket::{MessageSocket, Payload, Role, accept_key};
use common::wire::{AnswerHead, LANE_HEADER, MAX_HEAD_BYTES, STREAM_PROTOCOL};

use super::AnswerBody;
use super::conn::{HttpConn, ResponseHead, Stream};
use super::silence::Silence;

/// Largest message taken from the transport: a response head, or a piece of a body (the
/// transport sends pieces of at most 4 KiB).
const MAX_MESSAGE: usize = MAX_HEAD_BYTES + 64 * 1024;

/// Largest error body read from an answer to the upgrade.
const MAX_REFUSAL_BODY: usize = 64 * 1024;

/// The `Authorization` a stream was opened with (its `Debug` never shows it).
#[derive(Clone)]
pub struct OpenedAs(pub Arc<str>);

impl std::fmt::Debug for OpenedAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpenedAs(…)")
    }
}

/// A connection upgraded to a WebSocket stream: steps and answers travel as messages.
#[derive(Debug)]
pub struct StreamConn {
    ws: Box<MessageSocket<Prefixed<Stream>>>,
    /// The answer's body has messages still to come.
    message_body: bool,
    /// The part of the answer's body its head message carried, not yet read.
    first_piece: Option<Bytes>,
    keep_alive: bool,
    /// The silence limit, and its timer.
    silence: Silence,
    /// The thread that made it: its socket's readiness is seen there (its shard).
    pub home: std::thread::ThreadId,
    /// The `Authorization` its upgrade carried, which its steps run as.
    pub opened_as: OpenedAs,
}

/// What an upgrade came to.
#[derive(Debug)]
pub enum Upgrade {
    /// A stream: steps now travel as messages.
    Stream(StreamConn),
    /// An answer other than `101` (a proxy that does not pass the upgrade, or an error), its
    /// body, and the connection, which goes on with HTTP when it may.
    Refused(HttpConn, Box<ResponseHead>, Bytes),
}

/// A fresh `Sec-WebSocket-Key` and the header lines that ask for the upgrade with it.
pub fn upgrade_request() -> (String, String) {
    let mut nonce = [0u8; 16];
    // A key need not be secret, only fresh: a clock-derived one does if randomness fails.
    if getrandom::fill(&mut nonce).is_err() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        nonce = now.unwrap_or_default().as_nanos().to_le_bytes();
    }
    let key = base64::engine::general_purpose::STANDARD.encode(nonce);
    let lines = format!(
        "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Protocol: {STREAM_PROTOCOL}\r\n{LANE_HEADER}: {lane:016x}\r\n",
        lane = common::shards::lane_key(),
    );
    (key, lines)
}

impl HttpConn {
    /// Asks for the upgrade to a stream with `head` (a `GET …/v1/stream` head with
    /// [`upgrade_request`]'s lines, made with `key`), whose steps run as `opened_as`. An
    /// answer that says `101` without proving it is the upgrade asked for is `InvalidData`.
    pub async fn upgrade(
        mut self,
        head: &[u8],
        key: &str,
        opened_as: OpenedAs,
    ) -> io::Result<Upgrade> {
        let answer = self.request(head, b"").await?;
        if answer.status != 101 {
            let body = self.body_to_end(MAX_REFUSAL_BODY).await?;
            return Ok(Upgrade::Refused(self, answer, body));
        }
        let (accept, protocol) = &answer.upgrade;
        if *accept != accept_key(key.as_bytes()) || protocol != STREAM_PROTOCOL {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "a bad WebSocket upgrade"));
        }
        let HttpConn { stream, mut buf, silence, home, .. } = self;
        // A request is one message, sent at once: the room only gathers its frame's head and
        // body.
        let upgraded = Prefixed::new(buf.split().freeze(), stream);
        let ws = MessageSocket::new(upgraded, Role::Client, MAX_MESSAGE, 8 * 1024);
        Ok(Upgrade::Stream(StreamConn {
            ws: Box::new(ws),
            message_body: false,
            first_piece: None,
            keep_alive: true,
            silence,
            home,
            opened_as,
        }))
    }
}

impl StreamConn {
    /// True when the last answer was read to its end and the stream may carry another step.
    pub fn reusable(&self) -> bool {
        self.keep_alive && !self.message_body && self.ws.is_intact()
    }

    /// Sets the longest silence tolerated from the transport.
    pub fn set_silence_limit(&mut self, limit: std::time::Duration) {
        self.silence.set_limit(limit);
    }

    /// Sends a step as one message and reads the message holding the answer's head and the
    /// start of its body (the whole answer, when small; the rest follows in messages,
    /// [`AnswerBody::body_chunk`]). A stream that ends before anything came back is
    /// `ConnectionAborted`, as over HTTP (a kept stream the transport or a proxy closed while
    /// idle: another may be tried).
    pub async fn message_exchange(&mut self, message: Vec<u8>) -> io::Result<Box<ResponseHead>> {
        self.keep_alive = false;
        self.send_message(message, true).await?;
        self.read_answer_head().await
    }

    /// Sends the parts of an upload (`common::wire::UploadRange`), each a request message, one
    /// after the other without waiting, then reads their answers in order. Each but the last
    /// is a `202` without a body; the first answer that is not ends the exchange (the answers
    /// after it are not read: the stream is not used again), and is answered, as is the last.
    pub async fn send_parts(
        &mut self,
        messages: impl ExactSizeIterator<Item = Vec<u8>>,
    ) -> io::Result<Box<ResponseHead>> {
        self.keep_alive = false;
        let count = messages.len();
        for (i, message) in messages.enumerate() {
            self.send_message(message, i + 1 == count).await?;
        }
        for left in (0..count).rev() {
            let head = self.read_answer_head().await?;
            if left == 0 {
                return Ok(head);
            }
            if head.status != 202 || self.message_body || self.first_piece.is_some() {
                self.keep_alive = false;
                return Ok(head);
            }
        }
        Err(io::Error::other("an upload of no parts"))
    }

    /// Queues a request message, and sends what is queued when `flush`.
    async fn send_message(&mut self, message: Vec<u8>, flush: bool) -> io::Result<()> {
        let sending = std::pin::pin!(send(&mut self.ws, message, flush));
        match self.silence.within_ready_first(sending).await {
            Err(e) if e.kind() == io::ErrorKind::TimedOut => Err(e),
            sent => sent.map_err(|e| io::Error::new(io::ErrorKind::ConnectionAborted, e)),
        }
    }

    /// Reads the message holding an answer's head and the start of its body.
    async fn read_answer_head(&mut self) -> io::Result<Box<ResponseHead>> {
        self.keep_alive = false;
        let message =
            self.silence.within(std::pin::pin!(next(&mut self.ws))).await.map_err(|e| {
                match e.kind() {
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                        io::Error::new(io::ErrorKind::ConnectionAborted, e)
                    }
                    _ => e,
                }
            })?;
        let (answer, body_at) = AnswerHead::decode(&message).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a stream answer without a head: {e}"),
            )
        })?;
        let head = ResponseHead::from_answer(&answer);
        self.message_body = answer.more;
        self.first_piece = Some(message.slice(body_at..)).filter(|piece| !piece.is_empty());
        self.keep_alive = true;
        Ok(head)
    }
}

impl AnswerBody for StreamConn {
    fn has_ended(&self) -> bool {
        self.first_piece.is_none() && !self.message_body
    }

    /// The next piece of the answer's body; `None` at its end (the empty message). A stream
    /// that ends mid-answer broke (`UnexpectedEof`: resumed).
    async fn body_chunk(&mut self) -> io::Result<Option<Bytes>> {
        if let Some(piece) = self.first_piece.take() {
            return Ok(Some(piece));
        }
        if !self.message_body {
            return Ok(None);
        }
        let data = self.silence.within(std::pin::pin!(next(&mut self.ws))).await.map_err(|e| {
            match e.kind() {
                io::ErrorKind::ConnectionAborted => {
                    io::Error::new(io::ErrorKind::UnexpectedEof, e.to_string())
                }
                _ => e,
            }
        })?;
        self.message_body = !data.is_empty();
        Ok(self.message_body.then_some(data))
    }
}

/// Queues a request message, and sends what is queued when `flush`.
async fn send(
    ws: &mut MessageSocket<Prefixed<Stream>>,
    message: Vec<u8>,
    flush: bool,
) -> io::Result<()> {
    ws.feed(Payload::Owned(message)).await?;
    if flush { ws.flush().await } else { Ok(()) }
}

/// The next data message. A stream that is closed is `ConnectionAborted`; one that ends
/// without a close is `UnexpectedEof`.
async fn next(ws: &mut MessageSocket<Prefixed<Stream>>) -> io::Result<Bytes> {
    ws.next()
        .await?
        .ok_or_else(|| io::Error::new(io::ErrorKind::ConnectionAborted, "the stream closed"))
}
