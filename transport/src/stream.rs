//! The stream carrier's transport half (`common::wire` describes it): the WebSocket upgrade of
//! `GET …/v1/stream`, then each message taken as a request, answered by the same endpoints as
//! HTTP, and the answer written back as messages.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use common::wire::{MAX_HEAD_BYTES, STREAM_PROTOCOL};
use futures_util::{FutureExt, SinkExt, StreamExt};
use http::header::{CONNECTION, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL, SEC_WEBSOCKET_VERSION};
use http::header::{SEC_WEBSOCKET_ACCEPT, UPGRADE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::Error;
use crate::body::ResponseBody;
use crate::http::RequestBody;

/// Most bytes of an answer's body in one message.
const MAX_MESSAGE_DATA: usize = 4 * 1024;

/// Most headers a request message may carry.
const MAX_HEADERS: usize = 32;

/// An accepted upgrade, riding in the `101` answer's extensions to the connection's task,
/// which carries the stream once hyper hands the socket over.
#[derive(Debug, Clone)]
pub struct Upgrading(pub OnUpgrade);

/// The bounds of one stream.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// Largest request body in a message (`max_request_bytes`, at most
    /// `common::wire::MAX_STREAM_BODY`); a message is at most this and its head.
    pub max_body: usize,
    /// Longest wait for the next request, or for the sidecar to take an answer's bytes.
    pub idle: Duration,
}

/// Accepts `GET …/v1/stream` as a WebSocket upgrade: `101 Switching Protocols`, carrying
/// [`Upgrading`]. A request that is not an upgrade (a proxy dropped its `Upgrade` header) or
/// one that arrived over a stream already is refused with `426`.
pub fn accept(mut req: Request<RequestBody>) -> Result<Response<ResponseBody>, Error> {
    let headers = req.headers();
    if !lists(headers, &UPGRADE, "websocket") || !lists(headers, &CONNECTION, "upgrade") {
        return Err(Error::UpgradeRequired("the request lost its Upgrade header on the way"));
    }
    if headers.get(SEC_WEBSOCKET_VERSION).is_none_or(|v| v != "13") {
        return Err(Error::UpgradeRequired("only WebSocket version 13 is spoken"));
    }
    if !lists(headers, &SEC_WEBSOCKET_PROTOCOL, STREAM_PROTOCOL) {
        return Err(Error::UpgradeRequired("the subprotocol must be sqltunnel.v1"));
    }
    let key = headers
        .get(SEC_WEBSOCKET_KEY)
        .ok_or(Error::UpgradeRequired("Sec-WebSocket-Key is missing"))?;
    let accept = derive_accept_key(key.as_bytes());
    let upgrading = req
        .extensions_mut()
        .remove::<OnUpgrade>()
        .ok_or(Error::UpgradeRequired("a stream cannot be opened inside a stream"))?;
    let mut response = Response::new(ResponseBody::from(Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(STREAM_PROTOCOL));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        h.insert(SEC_WEBSOCKET_ACCEPT, accept);
    }
    response.extensions_mut().insert(Upgrading(upgrading));
    Ok(response)
}

/// True when header `name` lists `token` (comma separated, any case).
fn lists(headers: &HeaderMap, name: &http::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// Carries a stream until the sidecar closes it, it idles for `limits.idle`, it breaks, or
/// `closing` (the end of a shutdown, once the drain is over) finds it between requests: each
/// request message is answered by `answer`, in order.
pub async fn serve<F, Fut>(
    upgraded: Upgraded,
    limits: StreamLimits,
    closing: CancellationToken,
    mut answer: F,
) where
    F: FnMut(Request<RequestBody>) -> Fut,
    Fut: Future<Output = Response<ResponseBody>>,
{
    let largest = limits.max_body.saturating_add(MAX_HEAD_BYTES);
    // Reads of 16 KiB (not 128): an idle stream, kept by a sidecar for its next session,
    // costs little.
    let config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .max_message_size(Some(largest))
        .max_frame_size(Some(largest));
    let io = TokioIo::new(upgraded);
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(limits.idle, ws.next()) => next,
            () = closing.cancelled() => break,
        };
        let data = match next {
            Ok(Some(Ok(Message::Binary(data)))) => data,
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) => break,
            Ok(Some(Ok(Message::Text(_) | Message::Frame(_)))) => {
                return debug!("a stream sent a message that is not binary: closed");
            }
            Ok(Some(Err(e))) => return debug!(error = %e, "a stream broke"),
            Err(_) => {
                debug!("a stream idle for idle_timeout: closed");
                break;
            }
        };
        let response = match parse_request(data) {
            Ok(req) => answer(req).await,
            Err(e) => crate::http::error_response(&e),
        };
        if let Err(e) = write_response(&mut ws, response, limits.idle).await {
            return debug!(error = %e, "a stream broke mid-answer");
        }
    }
    // Sends the closing handshake (or answers the sidecar's), bounded.
    drop(tokio::time::timeout(Duration::from_secs(1), SinkExt::close(&mut ws)).await);
}

/// A request message: its head, parsed as HTTP/1.1, and its body (the rest).
fn parse_request(data: Bytes) -> Result<Request<RequestBody>, Error> {
    let bad = |what: &str| Error::BadRequest(format!("a stream message {what}"));
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    let head_len = match parsed.parse(&data) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD_BYTES => n,
        Ok(_) => return Err(bad("has no whole request head")),
        Err(e) => return Err(bad(&format!("is not a request ({e})"))),
    };
    let mut builder = Request::builder()
        .method(parsed.method.unwrap_or_default())
        .uri(parsed.path.unwrap_or_default());
    for header in parsed.headers.iter() {
        builder = builder.header(header.name, header.value);
    }
    let body = data.slice(head_len..);
    let declared = parsed.headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-length"));
    if declared.is_some_and(|h| h.value != body.len().to_string().as_bytes()) {
        return Err(bad("has a body of another length than its Content-Length"));
    }
    let body = Full::new(body).map_err(|never| match never {}).boxed();
    builder.body(body).map_err(|e| bad(&format!("has a bad head ({e})")))
}

/// Writes an answer: its head, a message per piece of its body (several sent in one write
/// when they are ready together), and the empty message that ends it. A sidecar that takes
/// nothing for `idle` is given up.
async fn write_response<S>(
    ws: &mut WebSocketStream<S>,
    response: Response<ResponseBody>,
    idle: Duration,
) -> Result<(), WsError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (parts, mut body) = response.into_parts();
    let mut head = Vec::with_capacity(256);
    let reason = parts.status.canonical_reason().unwrap_or("");
    head.extend_from_slice(format!("HTTP/1.1 {} {reason}\r\n", parts.status.as_u16()).as_bytes());
    for (name, value) in &parts.headers {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    within(idle, ws.feed(Message::Binary(head.into()))).await?;
    loop {
        let frame = match body.frame().now_or_never() {
            Some(frame) => frame,
            None => {
                within(idle, ws.flush()).await?;
                body.frame().await
            }
        };
        let Some(Ok(frame)) = frame else { break };
        let Ok(mut data) = frame.into_data() else { continue };
        // A message arrives whole or not at all: pieces of at most MAX_MESSAGE_DATA let an
        // answer progress over connections that break often (and resume from there).
        while !data.is_empty() {
            let piece = data.split_to(data.len().min(MAX_MESSAGE_DATA));
            within(idle, ws.feed(Message::Binary(piece))).await?;
        }
    }
    within(idle, ws.feed(Message::Binary(Bytes::new()))).await?;
    within(idle, ws.flush()).await
}

/// `op`, given up after `idle`.
async fn within<T>(
    idle: Duration,
    op: impl Future<Output = Result<T, WsError>>,
) -> Result<T, WsError> {
    tokio::time::timeout(idle, op)
        .await
        .unwrap_or_else(|_| Err(WsError::Io(std::io::ErrorKind::TimedOut.into())))
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
