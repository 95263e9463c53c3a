//! HTTP endpoints: authentication, routing, and the control endpoints (health, keep-alive,
//! closing a session, metrics). A session's own requests are served by [`crate::session_endpoints`].

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::wire::{
    FRAMES_CONTENT_TYPE, KeepAlive, KeepAliveAnswer, Route, SessionEnd, ZSTD, session_label,
};
use http::{HeaderValue, Request, Response, StatusCode};
use tracing::{Instrument, info};

use crate::Error;
use crate::body::ResponseBody;
use crate::client_addr::client_ip;
use crate::identity::{Caller, IdentityId, LastCaller, Refusal};
use crate::incoming::{self, Incoming};
use crate::refusals::Answer;
use crate::reply::{Reply, error_response, json, no_content, text};
use crate::request_body::{RequestBody, read_body};
use crate::session_endpoints::StepKind;
use crate::shares::Share;
use crate::state::AppState;
use crate::{ending, session_endpoints, stream};

/// Largest keepalive body (about 7,000 session ids).
const MAX_KEEPALIVE_BODY: usize = 256 << 10;
/// Session ids looked up between two yields to the other tasks of the thread.
const KEEPALIVE_BATCH: usize = 256;

/// Answers one HTTP request of a connection whose last accepted token is in `last`.
pub async fn handle(
    state: Arc<AppState>,
    peer: SocketAddr,
    req: Request<RequestBody>,
    last: &LastCaller,
) -> Response<ResponseBody> {
    let req = Incoming::from_http(req);
    let route = Route::parse(req.method(), req.path());
    *handle_routed(state, peer, route, req, last).await
}

/// [`handle`] for a request already routed (`route` is what `Route::parse` makes of it).
pub async fn handle_routed(
    state: Arc<AppState>,
    peer: SocketAddr,
    route: Route,
    req: Incoming,
    last: &LastCaller,
) -> Reply {
    let zstd = state.config().compression && accepts_zstd(&req);
    let authorization = req.header(&incoming::AUTHORIZATION);
    match route {
        Route::Health => return json(StatusCode::OK, &serde_json::json!({ "status": "ok" })),
        // Without a token, only the status; a token presented is checked as on any route.
        Route::Ready if authorization.is_none() => return ready(&state, None),
        _ => {}
    }
    let caller = match state.identities().authorize_on(authorization, last).await {
        Ok(caller) => caller,
        Err(refusal) => return refused(&state, peer, &req, refusal).await,
    };
    if route == Route::Ready {
        return ready(&state, Some(&caller));
    }
    if let Some(version) = req.http_version() {
        state.churn.note(version, req.http_headers(), &state.metrics.requests_closing);
    }
    // Every line logged about a session's request names the session: lines at info and above
    // in their own fields; with debug lines on, every line, through the session's span.
    let span = match &route {
        Route::Login(id) | Route::Command(id) | Route::Infile(id) | Route::CloseSession(id) => {
            state.sessions.span_of(id, &caller.id)
        }
        _ => tracing::Span::none(),
    };
    // No span (debug lines off): no wrapper entering it at each poll. Each branch makes its
    // future where it is awaited: one made before would be moved there (3.5 KB, each request).
    let result = if span.is_none() {
        dispatch(&state, req, route, &caller).await
    } else {
        dispatch(&state, req, route, &caller).instrument(span).await
    };
    let response = answer_of(&state, result);
    if zstd { compress(response) } else { response }
}

/// The answer to a request whose token was refused: counted, logged per client, and slowed
/// down for a client that keeps guessing, within bounds that keep the door open (see
/// [`crate::refusals`]); its connection is closed.
async fn refused(state: &AppState, peer: SocketAddr, req: &Incoming, refusal: Refusal) -> Reply {
    state.metrics.unauthorized.inc();
    let mut error = Error::Unauthorized(refusal);
    if refusal.is_suspicious() {
        let trusted = &state.config().trusted_proxies;
        let client = client_ip(peer.ip(), req.http_headers(), trusted);
        match state.refusals.refuse(client) {
            Answer::Now => {}
            Answer::At(at, held) => {
                tokio::time::sleep_until(at.into()).await;
                drop(held);
            }
            Answer::Throttled => {
                state.metrics.refusals_throttled.inc();
                error = Error::Throttled;
            }
        }
    }
    let mut response = error_response(&error);
    response.headers_mut().insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// True when the request asks for zstd answers.
fn accepts_zstd(req: &Incoming) -> bool {
    req.headers(&incoming::ACCEPT_ENCODING).any(|v| {
        std::str::from_utf8(v)
            .is_ok_and(|v| v.split(',').any(|c| c.trim().split(';').next() == Some(ZSTD)))
    })
}

/// A frames answer compressed (zstd), when it is worth it.
fn compress(mut response: Reply) -> Reply {
    let frames = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == FRAMES_CONTENT_TYPE.as_bytes());
    if !frames {
        return response;
    }
    let body = std::mem::replace(response.body_mut(), ResponseBody::Whole(None));
    *response.body_mut() = match body.compressed() {
        Ok(body) => {
            let zstd = http::HeaderValue::from_static(ZSTD);
            response.headers_mut().insert(http::header::CONTENT_ENCODING, zstd);
            body
        }
        Err(body) => body,
    };
    response
}

/// The answer to a request whose token was accepted, or to its error.
fn answer_of(state: &AppState, result: Result<Reply, Error>) -> Reply {
    match result {
        Ok(response) => response,
        // A session ended by the drain is gone because of the shutdown: say so.
        Err(Error::SessionNotFound) if state.draining.is_cancelled() => {
            error_response(&state.refuse_if_draining().err().unwrap_or(Error::ShuttingDown))
        }
        Err(e) => {
            state.metrics.error(e.kind_label());
            error_response(&e)
        }
    }
}

/// Runs an authorized request. A body larger than any the transport reads is refused at
/// once, before it is sent (a client that asked `Expect: 100-continue` never sends it).
async fn dispatch(
    state: &Arc<AppState>,
    req: Incoming,
    route: Route,
    caller: &Arc<Caller>,
) -> Result<Reply, Error> {
    let limit = state.config().max_request_bytes;
    let declared = req.header(&incoming::CONTENT_LENGTH);
    let declared = declared.and_then(incoming::number);
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Error::TooLarge { limit });
    }
    match route {
        Route::OpenRelay => Box::pin(session_endpoints::open(state, req, caller)).await,
        Route::Stream => {
            state.refuse_if_draining()?;
            let inside = Error::UpgradeRequired("a stream cannot be opened inside a stream");
            let share = state.take_share(caller, Share::Streams, 1)?;
            stream::accept(req.into_http().ok_or(inside)?, share)
        }
        Route::Login(id) => session_endpoints::step(state, StepKind::Login, &id, caller, req).await,
        Route::Command(id) => {
            session_endpoints::step(state, StepKind::Command, &id, caller, req).await
        }
        Route::Infile(id) => {
            session_endpoints::step(state, StepKind::Infile, &id, caller, req).await
        }
        Route::KeepAlive => Box::pin(keep_alive(state, req, caller)).await,
        Route::CloseSession(id) => {
            let end = SessionEnd::from_query(req.query());
            Ok(close_session(state, &id, &caller.id, end).await)
        }
        Route::Metrics => Ok(metrics(state)),
        Route::MethodNotAllowed => Err(Error::MethodNotAllowed),
        Route::Health | Route::Ready | Route::NotFound => Err(Error::NotFound),
    }
}

/// The metrics exposition (also served on `metrics_listen`, without a token).
pub fn metrics(state: &AppState) -> Reply {
    let (_, upstreams) = state.readiness.report(&state.config().upstreams);
    let sessions = (state.sessions.len(), state.sessions.parked_count());
    let body = state.metrics.render(sessions, state.resume_budget.used(), &upstreams);
    text(body, crate::metrics::CONTENT_TYPE)
}

/// Readiness: 200 when every upstream can be reached (as last probed or dialed), else 503;
/// 503 too once shutdown has begun. Without a token only the status is said: the upstreams'
/// names and errors are for a caller with a token (or `metrics_listen`), who sees those it may
/// reach, and who the transport took it for.
fn ready(state: &AppState, caller: Option<&Caller>) -> Reply {
    let (mut all, mut upstreams) = state.readiness.report(&state.config().upstreams);
    if let Some(caller) = caller {
        upstreams.retain(|u| caller.access.allows(&u.name));
        all = upstreams.iter().all(|u| u.ready);
    }
    let draining = state.draining.is_cancelled();
    let (status, word) = match (all, draining) {
        (_, true) => (StatusCode::SERVICE_UNAVAILABLE, "shutting down"),
        (true, false) => (StatusCode::OK, "ready"),
        (false, false) => (StatusCode::SERVICE_UNAVAILABLE, "not ready"),
    };
    let Some(caller) = caller else {
        return json(status, &serde_json::json!({ "status": word }));
    };
    let parked = state.sessions.parked_count();
    let body = serde_json::json!({
        "status": word,
        "identity": &*caller.name,
        "upstreams": upstreams,
        "parked_sessions": parked,
    });
    json(status, &body)
}

/// Marks every listed session of the caller's token as heard from and names those that are
/// gone (another token's sessions are gone, to this caller).
async fn keep_alive(state: &Arc<AppState>, req: Incoming, caller: &Caller) -> Result<Reply, Error> {
    let owner = &caller.id;
    let config = state.config();
    let body = read_body(req, MAX_KEEPALIVE_BODY, config.body_timeout).await?;
    let list: KeepAlive = serde_json::from_slice(&body)
        .map_err(|e| Error::BadRequest(format!("invalid keepalive: {e}")))?;
    // No more ids than the caller may have sessions (twice, for those ending meanwhile).
    let most = config.max_sessions_per_token.saturating_mul(2);
    if list.sessions.len() > most {
        return Err(Error::BadRequest(format!("a keepalive lists at most {most} sessions")));
    }
    // A long poll: answered at once when a session is gone, else when one ends or at `wait`
    // (at most a heartbeat interval, so the sidecar never takes the wait for silence).
    let wait = Duration::from_millis(list.wait_ms).min(config.heartbeat_interval);
    let deadline = tokio::time::Instant::now() + wait;
    // Sessions opened after the list was made count too: any of this token's the upstream
    // ends meanwhile.
    // A session the caller may no longer reach ends now, and is reported revoked below.
    for (i, id) in list.sessions.iter().enumerate() {
        if let Ok(session) = state.sessions.get(id, owner) {
            drop(ending::refuse_if_denied(state, caller, &session, false));
        }
        if i % KEEPALIVE_BATCH == KEEPALIVE_BATCH - 1 {
            tokio::task::yield_now().await;
        }
    }
    let mut news = state.ended_news();
    let since = *news.borrow_and_update();
    loop {
        news.mark_unchanged();
        let ended = state.ended_since(since, owner);
        let reset: Vec<String> = ended.iter().filter(|e| e.1).map(|e| e.0.clone()).collect();
        let mut gone: Vec<String> = ended.into_iter().map(|e| e.0).collect();
        let mut seen: HashSet<&str> = gone.iter().map(String::as_str).collect();
        let mut missing = Vec::new();
        for (i, id) in list.sessions.iter().enumerate() {
            let held =
                || state.sessions.get(id, owner).is_ok() || state.handover.may_hold(id, owner);
            if !held() && seen.insert(id) {
                missing.push(id.clone());
            }
            if i % KEEPALIVE_BATCH == KEEPALIVE_BATCH - 1 {
                tokio::task::yield_now().await;
            }
        }
        gone.extend(missing);
        if !gone.is_empty() || tokio::time::timeout_at(deadline, news.changed()).await.is_err() {
            let revoked = gone
                .iter()
                .filter(|id| matches!(state.session_gone(id, owner), Error::AccessRevoked(_)))
                .cloned()
                .collect();
            return Ok(json(StatusCode::OK, &KeepAliveAnswer { gone, reset, revoked }));
        }
    }
}

/// The session ends and its upstream connection is closed, without making the client wait:
/// with COM_QUIT for a client that quit, without for one that hung up (the server counts an
/// aborted client, as it would directly); for a sidecar shutting down, a statement still
/// running is ended upstream first. Only the token that opened a session can close it. During
/// a take-over, the close of a session that moved goes after it (a hang-up: sent again), and
/// one of a session still arriving waits for it, as steps do.
async fn close_session(
    state: &Arc<AppState>,
    id: &str,
    owner: &IdentityId,
    end: SessionEnd,
) -> Reply {
    if state.handover.was_moved(id, owner) {
        return crate::reply::hang_up();
    }
    let removed = state.handover.wait_for(|| state.sessions.remove_owned(id, owner)).await;
    if let Some(session) = removed {
        info!(session = %session_label(id), ?end, "session closed by client");
        let state = state.clone();
        tokio::spawn(async move {
            match end {
                SessionEnd::KillQuery => ending::end_running(&state, &session).await,
                SessionEnd::HangUp => drop(session.take_link().await),
                SessionEnd::Quit => {
                    if let Some(link) = session.take_link().await {
                        link.quit().await;
                    }
                }
            }
        });
    }
    no_content()
}
