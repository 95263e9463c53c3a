//! The stream carrier's transport half (`common::wire` describes it): the WebSocket upgrade of
//! `GET …/v1/stream` (authenticated as any request: the stream holds its caller), then each
//! message read as a step (`common::wire::StepHead` and the body after it), run as its caller,
//! and its answer written back as messages.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::rare::RareWait;
use common::websocket::{MessageSocket, Payload, Role, accept_key};
use common::wire::{LANE_HEADER, MAX_HEAD_BYTES, STREAM_PROTOCOL, StepHead};
use futures_util::FutureExt;
use http::header::SEC_WEBSOCKET_VERSION;
use http::header::{CONNECTION, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL};
use http::header::{SEC_WEBSOCKET_ACCEPT, UPGRADE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Body;
use hyper::upgrade::OnUpgrade;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::Error;
use crate::identity::HeldCaller;
use crate::reply::ResponseBody;
use crate::reply::{Reply, Then};
use crate::request_body::RequestBody;
use crate::shares::Taken;
use crate::steps::{self, Step};

/// Most bytes of an answer's body in one message.
const MAX_MESSAGE_DATA: usize = 4 * 1024;

/// Bytes of answer messages queued before they are written: several pieces of a large answer
/// go in one write.
const WRITE_ROOM: usize = 32 * 1024;

/// An accepted upgrade, riding in the `101` answer's extensions to the connection's task,
/// which carries the stream once hyper hands the socket over.
#[derive(Debug, Clone)]
pub struct Upgrading {
    /// Who opened the stream: its steps run as this caller while the token holds.
    pub caller: Arc<std::sync::Mutex<HeldCaller>>,
    /// Resolves to the socket once the `101` is written.
    pub on_upgrade: OnUpgrade,
    /// The sidecar thread's lane key ([`LANE_HEADER`]), when it sent a valid one.
    pub lane: Option<u64>,
    /// The stream's place in its identity's `max_streams_per_token`, held while it is open.
    pub share: Arc<Taken>,
}

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
/// [`Upgrading`]. A request that is not an upgrade (a proxy dropped its `Upgrade` header),
/// offers another stream version, or whose connection cannot be upgraded is refused with `426`.
pub fn accept(
    mut req: Request<RequestBody>,
    share: Taken,
    caller: HeldCaller,
) -> Result<Response<ResponseBody>, Error> {
    let headers = req.headers();
    if !lists(headers, &UPGRADE, "websocket") || !lists(headers, &CONNECTION, "upgrade") {
        return Err(Error::UpgradeRequired("the request lost its Upgrade header on the way"));
    }
    if headers.get(SEC_WEBSOCKET_VERSION).is_none_or(|v| v != "13") {
        return Err(Error::UpgradeRequired("only WebSocket version 13 is spoken"));
    }
    if !lists(headers, &SEC_WEBSOCKET_PROTOCOL, STREAM_PROTOCOL) {
        return Err(Error::StreamVersion);
    }
    let key = headers
        .get(SEC_WEBSOCKET_KEY)
        .ok_or(Error::UpgradeRequired("Sec-WebSocket-Key is missing"))?;
    let accept = accept_key(key.as_bytes());
    let upgrading = req
        .extensions_mut()
        .remove::<OnUpgrade>()
        .ok_or(Error::UpgradeRequired("this connection cannot be upgraded to a stream"))?;
    let mut response = Response::new(ResponseBody::from(Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(STREAM_PROTOCOL));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        h.insert(SEC_WEBSOCKET_ACCEPT, accept);
    }
    let lane = lane_key(req.headers());
    response.extensions_mut().insert(Upgrading {
        caller: Arc::new(std::sync::Mutex::new(caller)),
        on_upgrade: upgrading,
        lane,
        share: Arc::new(share),
    });
    Ok(response)
}

/// The lane key of an upgrade: 16 hex digits, or none.
fn lane_key(headers: &HeaderMap) -> Option<u64> {
    let value = headers.get(LANE_HEADER)?.as_bytes();
    let hex = (value.len() == 16 && value.iter().all(u8::is_ascii_hexdigit)).then_some(value)?;
    u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

/// True when header `name` lists `token` (comma separated, any case).
fn lists(headers: &HeaderMap, name: &http::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// Carries a stream until the sidecar closes it, it idles for `limits.idle`, it breaks, or
/// `closing` (the end of a shutdown, once the drain is over) finds it between steps: each
/// message is read as a step and answered by `answer`, in order. A message that is no step is
/// answered `400`; an answer that says [`Then::Close`] ends the stream.
pub async fn serve<IO, F, Fut>(
    io: IO,
    limits: StreamLimits,
    closing: CancellationToken,
    mut answer: F,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
    F: FnMut(Step) -> Fut,
    Fut: Future<Output = Reply>,
{
    let largest = limits.max_body.saturating_add(MAX_HEAD_BYTES);
    let mut ws = MessageSocket::new(io, Role::Server, largest, WRITE_ROOM);
    // One timer and one wait for the shutdown for the whole stream, not one each message:
    // the timer, once due, is put off to `idle` after the wait began, unless that has passed.
    // The wait is polled only when woken.
    let mut closed = RareWait::new(closing.cancelled());
    let mut idle = std::pin::pin!(tokio::time::sleep(limits.idle));
    loop {
        let waiting_since = Instant::now();
        // The read lives across the timer's resets: a read given up half-way loses its frame.
        let next = {
            let mut read = std::pin::pin!(ws.next());
            loop {
                tokio::select! {
                    biased;
                    next = &mut read => break Some(next),
                    () = &mut closed => break None,
                    () = &mut idle => {
                        let due = waiting_since + limits.idle;
                        if Instant::now() >= due {
                            debug!("a stream idle for idle_timeout: closed");
                            break None;
                        }
                        idle.as_mut().reset(due);
                    }
                }
            }
        };
        let data = match next {
            Some(Ok(Some(data))) => data,
            Some(Ok(None)) => break,
            Some(Err(e)) => return debug!(error = %e, "a stream broke"),
            None => break,
        };
        let response = match read_step(data) {
            Ok(step) => {
                let answering = std::pin::pin!(answer(step));
                match unless_gone(&mut ws, answering).await {
                    Ok(response) => response,
                    Err(e) => return debug!(error = %e, "a stream ended before its answer"),
                }
            }
            Err(e) => crate::reply::error_response(&e),
        };
        let then = response.then;
        if then == Then::HangUp {
            // The step's session moved: the stream ends unanswered, and the sidecar sends it
            // again on a new connection (messages answer in order: none other is pending).
            return debug!("a stream's step was for a session that moved: hung up");
        }
        if let Err(e) = write_response(&mut ws, response, limits.idle).await {
            return debug!(error = %e, "a stream broke mid-answer");
        }
        if then == Then::Close {
            // (The stream's token no longer holds: the sidecar opens another with its current one.)
            debug!("a stream answered its last step: closed");
            break;
        }
    }
    close(ws).await;
}

/// Sends the closing handshake (or answers the sidecar's), bounded.
async fn close<S>(mut ws: MessageSocket<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    drop(tokio::time::timeout(Duration::from_secs(1), ws.close()).await);
}

/// A message read as a step: its head, then its body (the rest, without a copy).
fn read_step(data: Bytes) -> Result<Step, Error> {
    let (head, at) = StepHead::decode(&data)
        .map_err(|e| Error::BadRequest(format!("a stream message is not a step ({e})")))?;
    Ok(Step { head, body: steps::Body::Whole(data.slice(at..)) })
}

/// Writes an answer: its head with as much of its body as is ready and fits in a message
/// (the whole answer, when small), then, when more follows, a message per piece of the
/// body (several sent in one write when they are ready together) and the empty message that
/// ends it. A sidecar that takes nothing for `idle` is given up, and one whose connection ends
/// while the body waits, at once.
async fn write_response<S>(
    ws: &mut MessageSocket<S>,
    mut response: Reply,
    idle: Duration,
) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut body = std::mem::replace(&mut response.body, ResponseBody::Whole(None));
    let mut data = match body.frame().now_or_never() {
        Some(Some(Ok(frame))) => frame.into_data().unwrap_or_default(),
        // Not ready yet, or no body: the head goes first, saying more follows unless ended.
        _ => Bytes::new(),
    };
    let whole = body.is_end_stream() && data.len() <= MAX_MESSAGE_DATA;
    let first = data.split_to(data.len().min(MAX_MESSAGE_DATA));
    let head = &mut response.head;
    head.more = !whole;
    let mut message = Vec::with_capacity(32 + first.len());
    head.encode(&mut message);
    message.extend_from_slice(&first);
    feed(ws, Payload::Owned(message), idle).await?;
    if whole {
        return flush(ws, idle).await;
    }
    loop {
        // A message arrives whole or not at all: pieces of at most MAX_MESSAGE_DATA let an
        // answer progress over connections that break often (and resume from there).
        while !data.is_empty() {
            let piece = data.split_to(data.len().min(MAX_MESSAGE_DATA));
            feed(ws, Payload::Borrowed(&piece), idle).await?;
        }
        let frame = match body.frame().now_or_never() {
            Some(frame) => frame,
            None => {
                flush(ws, idle).await?;
                unless_gone(ws, std::pin::pin!(body.frame())).await?
            }
        };
        let Some(Ok(frame)) = frame else { break };
        data = frame.into_data().unwrap_or_default();
    }
    feed(ws, Payload::Borrowed(&[]), idle).await?;
    flush(ws, idle).await
}

/// `work` (an answer, or its body's next frame), while the sidecar's end of the stream is
/// watched: a connection that ends meanwhile drops `work` at once, as hyper drops an HTTP
/// request's answer, so a turn waiting for the upstream (a statement that runs) is parked for
/// a resume then, and its session can expire, not at its next heartbeat's write. A peer that
/// sends more than it may mid-answer is no longer watched; what it sent is read next. (`work`
/// comes pinned where it was made, as in [`within`].)
async fn unless_gone<S, T>(
    ws: &mut MessageSocket<S>,
    mut work: Pin<&mut impl Future<Output = T>>,
) -> std::io::Result<T>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    tokio::select! {
        biased;
        done = &mut work => return Ok(done),
        end = ws.watch_end() => end?,
    }
    Ok(work.await)
}

/// Queues a message; waits (at most `idle`) only when the socket takes nothing.
async fn feed<S>(
    ws: &mut MessageSocket<S>,
    message: Payload<'_>,
    idle: Duration,
) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    within(idle, std::pin::pin!(ws.feed(message))).await
}

/// Sends what is queued; waits (at most `idle`) only when the socket takes nothing.
async fn flush<S>(ws: &mut MessageSocket<S>, idle: Duration) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    within(idle, std::pin::pin!(ws.flush())).await
}

/// `op`, given up after `idle`; no timer is set when it completes at once. (`op` comes pinned
/// where it was made: a future passed by value would be moved into this one's state.)
async fn within<T>(
    idle: Duration,
    mut op: Pin<&mut impl Future<Output = std::io::Result<T>>>,
) -> std::io::Result<T> {
    if let Some(done) = op.as_mut().now_or_never() {
        return done;
    }
    tokio::time::timeout(idle, op)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
