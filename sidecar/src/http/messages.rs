//! The stream carrier's sidecar half (`common::wire` describes it): the WebSocket upgrade's
//! key and its check, and requests and answers as messages on the upgraded connection.

use std::io;

use base64::Engine;
use bytes::Bytes;
use common::wire::STREAM_PROTOCOL;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// Largest answer message taken: a resumed whole answer is at most the transport's resume
/// window (8 MiB by default), every other piece far less.
const MAX_MESSAGE: usize = 64 << 20;

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
        "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Protocol: {STREAM_PROTOCOL}\r\n"
    );
    (key, lines)
}

/// True when a `101` answer proves the transport took the upgrade asked with `key`.
pub fn upgrade_accepted(key: &str, accept: &str, protocol: &str) -> bool {
    accept == derive_accept_key(key.as_bytes()) && protocol == STREAM_PROTOCOL
}

/// The upgraded connection, with the bytes already read past the `101` head.
pub async fn upgraded<S>(stream: S, read_ahead: Vec<u8>) -> WebSocketStream<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    WebSocketStream::from_partially_read(stream, read_ahead, Role::Client, Some(config)).await
}

/// Sends a request: its head and body in one message.
pub async fn send<S>(ws: &mut WebSocketStream<S>, head: &[u8], body: &[u8]) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut message = Vec::with_capacity(head.len() + body.len());
    message.extend_from_slice(head);
    message.extend_from_slice(body);
    ws.send(Message::Binary(message.into())).await.map_err(into_io)
}

/// The next data message. A stream that ends or is closed is `ConnectionAborted` (a kept
/// stream the transport closed while idle: nothing came back, another may be tried).
pub async fn next<S>(ws: &mut WebSocketStream<S>) -> io::Result<Bytes>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        match ws.next().await {
            Some(Ok(Message::Binary(data))) => return Ok(data),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_))) | None => {
                return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the stream closed"));
            }
            Some(Ok(_)) => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a non-binary message"));
            }
            Some(Err(e)) => return Err(into_io(e)),
        }
    }
}

/// A WebSocket error as the I/O error the HTTP carrier would have met.
fn into_io(e: WsError) -> io::Error {
    match e {
        WsError::Io(e) => e,
        WsError::ConnectionClosed | WsError::AlreadyClosed => {
            io::Error::new(io::ErrorKind::ConnectionAborted, "the stream closed")
        }
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
            io::Error::new(io::ErrorKind::UnexpectedEof, "the stream broke")
        }
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
}
