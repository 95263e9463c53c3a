//! HTTP endpoints: authentication, routing, and one handler per route.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use common::mysql::capability::LOCAL_FILES;
use common::wire::{
    CLOSE_STATEMENTS_HEADER, FRAMES_CONTENT_TYPE, INFILE_HEADER, JSON_CONTENT_TYPE, KeepAlive,
    KeepAliveAnswer, LONG_DATA_HEADER, OpenSession, Route, SESSION_HEADER, SINGLE_STATEMENT_HEADER,
    SessionOpened, UpstreamInfo, decode_long_data,
};
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde::Serialize;
use tracing::{Instrument, debug_span, info, warn};

use crate::body::ResponseBody;
use crate::pool::{PoolKey, Upstream};
use crate::reaper::Timer;
use crate::run::{CommandRun, Extras};
use crate::session::SessionLimits;
use crate::state::{AppState, Metrics};
use crate::{Error, relayed, upstream};

/// Largest control (JSON) body accepted.
pub(crate) const MAX_CONTROL_BODY: usize = 64 * 1024;
/// Largest keepalive body (about 100,000 session ids).
const MAX_KEEPALIVE_BODY: usize = 4 << 20;

/// Answers one request.
pub async fn handle(state: Arc<AppState>, req: Request<Incoming>) -> Response<ResponseBody> {
    let route = Route::parse(req.method().as_str(), req.uri().path());
    if route == Route::Health {
        return json(StatusCode::OK, &serde_json::json!({ "status": "ok" }));
    }
    let Some(token) = state.tokens.authorize(req.headers()) else {
        Metrics::bump(&state.metrics.unauthorized);
        return error_response(&Error::Unauthorized);
    };
    let result = match route {
        Route::Upstreams => Ok(upstreams(&state).await),
        Route::OpenSession => open_session(&state, req, token).await,
        Route::OpenRelay => relayed::open(&state, req, token).await,
        Route::Login(id) => relayed::login(&state, &id, req).await,
        Route::KeepAlive => keep_alive(&state, req).await,
        Route::Command(id) => command(&state, &id, req).await,
        Route::Infile(id) => infile(&state, &id, req).await,
        Route::CloseSession(id) => Ok(close_session(&state, &id).await),
        Route::Metrics => Ok(text(state.render_metrics())),
        Route::MethodNotAllowed => Err(Error::MethodNotAllowed),
        Route::Health | Route::NotFound => Err(Error::NotFound),
    };
    result.unwrap_or_else(|e| error_response(&e))
}

/// Reads a request body of at most `limit` bytes.
pub(crate) async fn read_body(req: Request<Incoming>, limit: usize) -> Result<Bytes, Error> {
    let declared =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(Error::TooLarge { limit });
    }
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Error::TooLarge { limit }),
        Err(e) => Err(Error::BadRequest(format!("cannot read body: {e}"))),
    }
}

async fn open_session(
    state: &AppState,
    req: Request<Incoming>,
    token: usize,
) -> Result<Response<ResponseBody>, Error> {
    let body = read_body(req, MAX_CONTROL_BODY).await?;
    let open: OpenSession = serde_json::from_slice(&body)
        .map_err(|e| Error::BadRequest(format!("invalid session request: {e}")))?;
    let upstream = state
        .config
        .upstream(&open.upstream)
        .ok_or_else(|| Error::UnknownUpstream(open.upstream.clone()))?;
    let limits = session_limits(state, token)?;
    let key = PoolKey::of(&open);
    let upstream_conn = match state.pool.take(&key).await {
        Some(pooled) => pooled,
        None => {
            state.pool.record_miss();
            let config = &state.config;
            upstream::connect(upstream, &open, config.connect_timeout, config.session_timeout)
                .await?
        }
    };
    upstream_conn.infile.set_client_allows(open.client_flags & LOCAL_FILES != 0);
    let connection_id = upstream_conn.conn.id();
    let status = upstream_conn.conn.last_ok_packet().map_or(0, |ok| ok.status_flags().bits());
    let server_version = state.server_version(upstream).await?;
    let session = match state.sessions.insert(key, upstream_conn, limits) {
        Ok(s) => s,
        Err((e, conn)) => {
            if let Some(conn) = conn {
                tokio::spawn(async move { drop(conn.disconnect().await) });
            }
            return Err(e);
        }
    };
    Metrics::bump(&state.metrics.sessions_opened);
    drop(state.reaper.send(Timer::Session(session.clone())));
    info!(session = %session.id, upstream = %upstream.name, user = %open.user, connection_id, "session opened");
    let opened =
        SessionOpened { session_id: session.id.clone(), server_version, connection_id, status };
    Ok(json(StatusCode::CREATED, &opened))
}

/// The limits a new session of `token` is checked against; an error when already reached.
pub(crate) fn session_limits(state: &AppState, token: usize) -> Result<SessionLimits, Error> {
    let max_sessions = state.config.pool.max_sessions;
    let limits = SessionLimits {
        total: max_sessions,
        per_token: state.config.pool.max_sessions_per_token,
        token,
    };
    if state.sessions.len() >= max_sessions
        || state.sessions.count_for_token(token) >= limits.per_token
    {
        return Err(Error::TooManySessions(max_sessions));
    }
    Ok(limits)
}

/// Statement ids listed in `X-Tunnel-Close-Statements` (COM_STMT_CLOSE rides on the next
/// command instead of costing a round trip of its own).
fn statements_to_close(headers: &http::HeaderMap) -> Result<Vec<u32>, Error> {
    let Some(value) = headers.get(CLOSE_STATEMENTS_HEADER) else { return Ok(Vec::new()) };
    let text = value.to_str().map_err(|_| Error::BadRequest("bad statement list".into()))?;
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().map_err(|_| Error::BadRequest(format!("bad statement id {s:?}"))))
        .collect()
}

/// A piece of the file a LOAD DATA LOCAL INFILE asked for (`X-Tunnel-Infile: more|end`),
/// handed to the waiting upstream connection; answered once the upstream has room for it.
async fn infile(
    state: &AppState,
    id: &str,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Error> {
    let session = state.sessions.get(id)?;
    session.touch();
    if session.is_relayed() {
        return relayed::infile(state, session, req).await;
    }
    let last = match req.headers().get(INFILE_HEADER).map(|v| v.as_bytes()) {
        Some(b"end") => true,
        Some(b"more") => false,
        _ => return Err(Error::BadRequest(format!("{INFILE_HEADER} must be `more` or `end`"))),
    };
    let piece = read_body(req, state.config.max_request_bytes).await?;
    session.infile.upload(piece, last).await?;
    Ok(no_content())
}

async fn command(
    state: &AppState,
    id: &str,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Error> {
    let session = state.sessions.get(id)?;
    if session.is_relayed() {
        return relayed::command(state, session, req).await;
    }
    let guard = session.conn.clone().try_lock_owned().map_err(|_| Error::SessionBusy)?;
    let closes = statements_to_close(req.headers())?;
    let with_long_data = req.headers().contains_key(LONG_DATA_HEADER);
    let single_statement = req.headers().contains_key(SINGLE_STATEMENT_HEADER);
    let mut payload = read_body(req, state.config.max_request_bytes).await?;
    let mut long_data = Vec::new();
    if with_long_data {
        (long_data, payload) =
            decode_long_data(payload).map_err(|e| Error::BadRequest(e.to_string()))?;
    }
    Metrics::bump(&state.metrics.commands);
    let mut run = CommandRun::start(
        guard,
        payload,
        Extras { closes, long_data, single_statement },
        state.config.heartbeat_interval,
        session,
    );
    // Run inline until the first chunk: a small answer is then complete and goes out whole.
    let first = std::future::poll_fn(|cx| run.poll_chunk(cx))
        .instrument(debug_span!("command", session = %id))
        .await;
    let body = match first {
        Some(chunk) if run.is_finished() => {
            let mut all = BytesMut::from(&chunk[..]);
            run.drain_into(&mut all);
            ResponseBody::from(all.freeze())
        }
        Some(chunk) => ResponseBody::Stream(Box::new(run), Some(chunk)),
        None => ResponseBody::from(Bytes::new()),
    };
    let streamed = matches!(body, ResponseBody::Stream(..));
    let mut response = Response::new(body);
    if streamed {
        // A streamed answer may carry a frame the sidecar must act on at once (an infile
        // request, heartbeats): proxies that buffer by default (nginx) pass it on unbuffered.
        response.headers_mut().insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    }
    response
        .headers_mut()
        .insert(CONTENT_TYPE, http::HeaderValue::from_static(FRAMES_CONTENT_TYPE));
    if let Ok(v) = http::HeaderValue::from_str(id) {
        response.headers_mut().insert(SESSION_HEADER, v);
    }
    Ok(response)
}

/// Marks every listed session as heard from and names those that are gone.
async fn keep_alive(
    state: &AppState,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Error> {
    let body = read_body(req, MAX_KEEPALIVE_BODY).await?;
    let list: KeepAlive = serde_json::from_slice(&body)
        .map_err(|e| Error::BadRequest(format!("invalid keepalive: {e}")))?;
    let gone = list.sessions.into_iter().filter(|id| state.sessions.get(id).is_err()).collect();
    Ok(json(StatusCode::OK, &KeepAliveAnswer { gone }))
}

async fn close_session(state: &Arc<AppState>, id: &str) -> Response<ResponseBody> {
    if let Some(session) = state.sessions.remove(id) {
        info!(session = %id, "session closed by client");
        let state = state.clone();
        tokio::spawn(async move {
            if let Some(link) = session.relay.lock().await.take() {
                link.quit().await;
            }
            let Some(conn) = session.conn.lock().await.take() else { return };
            let upstream = Upstream { conn, born: session.born, infile: session.infile.clone() };
            if let Some(ticket) = state.pool.park(session.key.clone(), upstream).await {
                drop(state.reaper.send(Timer::Idle(ticket)));
            }
        });
    }
    no_content()
}

pub(crate) fn no_content() -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::from(Bytes::new()));
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
}

async fn upstreams(state: &AppState) -> Response<ResponseBody> {
    let mut list = Vec::new();
    for u in &state.config.upstreams {
        let server_version = match state.server_version(u).await {
            Ok(v) => Some(v),
            Err(e) => {
                warn!(upstream = %u.name, error = %e, "cannot read upstream version");
                None
            }
        };
        list.push(UpstreamInfo { name: u.name.clone(), server_version });
    }
    json(StatusCode::OK, &list)
}

pub(crate) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<ResponseBody> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Response::new(ResponseBody::from(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static(JSON_CONTENT_TYPE));
    response
}

fn text(body: String) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::from(Bytes::from(body)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, http::HeaderValue::from_static("text/plain; version=0.0.4"));
    response
}

/// The one place transport errors become HTTP answers.
fn error_response(err: &Error) -> Response<ResponseBody> {
    let (status, body) = err.to_api();
    if status.is_server_error() {
        warn!(error = %err, "request failed");
    }
    json(status, &body)
}
