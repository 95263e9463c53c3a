//! A step's one entry point, whichever carrier brought it (`api` for HTTP, `stream` for a
//! stream's messages), its caller already known: the step runs in its session's log span, by
//! its kind (open a session, a session's own step, close one, keep sessions alive), and its
//! result becomes the answer, compressed when the sidecar takes zstd.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::wire::{Content, KeepAlive, KeepAliveAnswer, SessionEnd, StepKind, session_label};
use http::StatusCode;
use tracing::{Instrument, info};

use crate::Error;
use crate::ending;
use crate::identity::{Caller, IdentityId};
use crate::reply::ResponseBody;
use crate::reply::{Reply, error_response, json, no_content};
use crate::request_body::read_body;
use crate::session_endpoints;
use crate::state::AppState;
use crate::steps::Step;

/// Largest keepalive body (about 7,000 session ids).
const MAX_KEEPALIVE_BODY: usize = 256 << 10;
/// Session ids looked up between two yields to the other tasks of the thread.
const KEEPALIVE_BATCH: usize = 256;

/// Runs `step` of `caller` and answers it.
pub async fn run(state: &Arc<AppState>, caller: &Arc<Caller>, step: Step) -> Reply {
    let zstd = state.config().compression && step.head.accept_zstd;
    // Every line logged about a session's step names the session: lines at info and above
    // in their own fields; with debug lines on, every line, through the session's span.
    let span = match &step.head.session {
        Some(id) => state.sessions.span_of(id, &caller.id),
        None => tracing::Span::none(),
    };
    // No span (debug lines off): no wrapper entering it at each poll. Each branch makes its
    // future where it is awaited: one made before would be moved there (3.5 KB, each step).
    let result = if span.is_none() {
        dispatch(state, caller, step).await
    } else {
        dispatch(state, caller, step).instrument(span).await
    };
    let response = answer_of(state, result);
    if zstd { compress(response) } else { response }
}

/// Runs a step by its kind.
async fn dispatch(state: &Arc<AppState>, caller: &Arc<Caller>, step: Step) -> Result<Reply, Error> {
    match step.head.kind {
        StepKind::Open => Box::pin(session_endpoints::open(state, step, caller)).await,
        StepKind::KeepAlive => Box::pin(keep_alive(state, step, caller)).await,
        StepKind::Close(end) => Ok(close_session(state, step.session(), &caller.id, end).await),
        StepKind::Login | StepKind::LoginAs | StepKind::Command | StepKind::FilePiece { .. } => {
            session_endpoints::step(state, caller, step).await
        }
    }
}

/// A frames answer compressed (zstd), when it is worth it.
fn compress(mut response: Reply) -> Reply {
    if response.head.content != Content::Frames {
        return response;
    }
    let body = std::mem::replace(&mut response.body, ResponseBody::Whole(None));
    response.body = match body.compressed() {
        Ok(body) => {
            response.head.zstd = true;
            body
        }
        Err(body) => body,
    };
    response
}

/// The answer to a request whose token was accepted, or to its error.
pub fn answer_of(state: &AppState, result: Result<Reply, Error>) -> Reply {
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

/// Marks every listed session of the caller's token as heard from and names those that are
/// gone (another token's sessions are gone, to this caller).
async fn keep_alive(state: &Arc<AppState>, req: Step, caller: &Caller) -> Result<Reply, Error> {
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
    let now = std::time::Instant::now();
    for (i, id) in list.sessions.iter().enumerate() {
        if let Ok(session) = state.sessions.get(id, owner, now) {
            drop(ending::refuse_if_denied(state, caller, &session, false));
        }
        if i % KEEPALIVE_BATCH == KEEPALIVE_BATCH - 1 {
            tokio::task::yield_now().await;
        }
    }
    // News of the caller's own sessions only: sessions of others ending never wake it.
    let (mut news, mut since) = state.ended.news(owner);
    // The list is looked through once, then again only when a session of the caller's ended.
    let mut look = true;
    loop {
        let latest = *news.borrow_and_update();
        let ended = state.ended.since(since, owner);
        if !look && ended.is_empty() {
            since = since.max(latest);
            if !news_before(&mut news, deadline).await {
                return Ok(json(StatusCode::OK, &KeepAliveAnswer::default()));
            }
            continue;
        }
        look = false;
        let reset: Vec<String> = ended.iter().filter(|e| e.1).map(|e| e.0.clone()).collect();
        let mut gone: Vec<String> = ended.into_iter().map(|e| e.0).collect();
        let mut seen: HashSet<&str> = gone.iter().map(String::as_str).collect();
        let (mut missing, now) = (Vec::new(), std::time::Instant::now());
        for (i, id) in list.sessions.iter().enumerate() {
            let held =
                || state.sessions.get(id, owner, now).is_ok() || state.handover.may_hold(id, owner);
            if !held() && seen.insert(id) {
                missing.push(id.clone());
            }
            if i % KEEPALIVE_BATCH == KEEPALIVE_BATCH - 1 {
                tokio::task::yield_now().await;
            }
        }
        gone.extend(missing);
        if !gone.is_empty() || !news_before(&mut news, deadline).await {
            let revoked = gone
                .iter()
                .filter(|id| matches!(state.session_gone(id, owner), Error::AccessRevoked(_)))
                .cloned()
                .collect();
            return Ok(json(StatusCode::OK, &KeepAliveAnswer { gone, reset, revoked }));
        }
    }
}

/// True when news came before `deadline`; false at the deadline (or should the news ever
/// close: the answer is then that none ended, never a loop).
async fn news_before(
    news: &mut tokio::sync::watch::Receiver<u64>,
    deadline: tokio::time::Instant,
) -> bool {
    matches!(tokio::time::timeout_at(deadline, news.changed()).await, Ok(Ok(())))
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
