//! A session step's answer: its packets written upstream, then its turn, whole when it ends
//! within its first chunk (one write with a Content-Length), else streamed; or a `Turn` frame
//! alone.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::wire::{TurnEnd, encode_turn, session_label};
use http::StatusCode;
use tracing::debug;

use crate::Error;
use crate::command_log;
use crate::relay::turn::{LinkGuard, OnEnd};
use crate::relay::{Framing, RelayLink, Turn};
use crate::reply::{Reply, frames};
use crate::reply::{ResponseBody, StreamedTurn};
use crate::request_body::Room;
use crate::session::Session;
use crate::state::AppState;
use crate::steps::remember;

/// What answers a step once its packets are written upstream.
pub(crate) enum Then {
    /// A turn of the upstream's packets, with one hook per answer it carries.
    Turn(Framing, Vec<OnEnd>),
    /// This reply: the upstream sends nothing now.
    Reply(Reply),
}

/// Writes step `step`'s packets upstream and answers with what `then` says follows (made once
/// they are out: off the path from the client's packets to the upstream). From the first byte
/// written to the turn's start it runs to its end even when the request goes away meanwhile,
/// so a resume finds the step's answer: at once when the socket takes the packets without
/// waiting (most steps), else in [`uncancelled`] work. The packets, and their `room` in the
/// byte budget, are let go once they are written, not held while the statement runs.
pub(crate) async fn send_step<F>(
    state: &Arc<AppState>,
    mut guard: LinkGuard,
    session: &Arc<Session>,
    step: Option<u64>,
    (body, room): (Bytes, Option<Room>),
    then: F,
) -> Result<Reply, Error>
where
    F: FnOnce(&mut RelayLink, &AppState, &Arc<Session>, &Bytes) -> Then + Send + 'static,
{
    let started = match guard.as_mut().map(|link| link.write_now(&body)) {
        Some(Ok((taken, true))) if taken == body.len() => {
            let started = after_write(guard, then, (state, session, step), &body);
            drop((body, room));
            started
        }
        Some(Ok((taken, _))) => {
            let (state, held) = (state.clone(), session.clone());
            uncancelled(async move {
                let written = match guard.as_mut() {
                    Some(link) => link.write_raw(&body[taken..]).await,
                    None => Err(std::io::ErrorKind::NotConnected.into()),
                };
                drop(room);
                match written {
                    Ok(()) => after_write(guard, then, (&state, &held, step), &body),
                    Err(e) => Err(lost(guard, &held, step, &e)),
                }
            })
            .await?
        }
        Some(Err(e)) => Err(lost(guard, session, step, &e)),
        None => Err(remember(session, step, upstream_gone())),
    };
    match started {
        Ok(turn) => Ok(remember(session, step, first_answer(turn).await)),
        Err(answered) => Ok(answered),
    }
}

/// What follows step `step`'s packets `body`, all written: its turn started, or a reply (kept
/// for a resume).
fn after_write<F>(
    mut guard: LinkGuard,
    then: F,
    (state, session, step): (&AppState, &Arc<Session>, Option<u64>),
    body: &Bytes,
) -> Result<StreamedTurn, Reply>
where
    F: FnOnce(&mut RelayLink, &AppState, &Arc<Session>, &Bytes) -> Then,
{
    let Some(link) = guard.as_mut() else { return Err(remember(session, step, upstream_gone())) };
    match then(link, state, session, body) {
        Then::Reply(reply) => Err(remember(session, step, reply)),
        Then::Turn(framing, on_end) => {
            let heartbeat = state.config().heartbeat_interval;
            Ok(start_turn(heartbeat, guard, framing, session, on_end, step))
        }
    }
}

/// The upstream connection broke while a step was written: it is closed, and the step's answer
/// is the hang-up.
fn lost(mut guard: LinkGuard, session: &Session, step: Option<u64>, e: &std::io::Error) -> Reply {
    debug!(session = %session_label(&session.id), error = %e, "upstream lost");
    *guard = None;
    remember(session, step, upstream_gone())
}

/// Runs `work` to its end even if the request that asked for it goes away meanwhile (a carrier
/// drops a step's future when its connection ends). Between a step's begin and its turn's
/// start, an interruption would leave a packet half written upstream and the step with no
/// answer to resume. The work runs here, and moves to a task of its own only if it must wait.
pub(crate) async fn uncancelled<T: Send + 'static>(
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T, Error> {
    let mut work = Box::pin(work);
    if let Poll::Ready(done) = poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await {
        return Ok(done);
    }
    match tokio::spawn(work).await {
        Ok(done) => Ok(done),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime shutting down cancels it.
        Err(_) => Err(Error::ShuttingDown),
    }
}

/// Answers with the turn: inline when it completes within the first chunk (one write with a
/// Content-Length), streamed otherwise.
pub(crate) async fn turn(
    state: &AppState,
    guard: LinkGuard,
    framing: Framing,
    session: &Arc<Session>,
    step: Option<u64>,
) -> Reply {
    let heartbeat = state.config().heartbeat_interval;
    let hooks = vec![command_log::on_login_round(session)];
    first_answer(start_turn(heartbeat, guard, framing, session, hooks, step)).await
}

/// The hook of a turn that carries no client command: it logs a turn that broke.
pub(crate) fn broken_turn_hook(session: &Session, what: &'static str) -> OnEnd {
    let label = session_label(&session.id).to_string();
    Box::new(move |report| command_log::log_broken_turn(&label, what, &report.outcome))
}

/// Starts a turn of step `step` (resumable when given): from here, a turn dropped before its
/// end waits for a resume. `on_end` has one hook per answer the turn carries.
fn start_turn(
    heartbeat: Duration,
    guard: LinkGuard,
    framing: Framing,
    session: &Session,
    on_end: Vec<OnEnd>,
    step: Option<u64>,
) -> StreamedTurn {
    let mut turn = Box::new(Turn::new(guard, framing, heartbeat, session.cut.clone()));
    turn.on_end(on_end);
    let resumable = step.is_some() && session.resume.is_on();
    StreamedTurn::new(turn, resumable.then(|| session.resume.clone()))
}

/// A started turn's answer: whole when it ends within its first chunk, else streamed.
async fn first_answer(mut streamed: StreamedTurn) -> Reply {
    let first = streamed.next_chunk().await;
    let body = match first {
        Some(chunk) if streamed.is_finished() => ResponseBody::from(chunk),
        None => ResponseBody::from(Bytes::new()),
        Some(chunk) => {
            streamed.put_back(chunk);
            streamed.into_body()
        }
    };
    frames(StatusCode::OK, body, None)
}

/// A turn with no answer to pass on: its `Turn` frame alone.
pub(crate) fn turn_without_answer(end: TurnEnd) -> Reply {
    let mut out = BytesMut::new();
    encode_turn(&mut out, end);
    frames(StatusCode::OK, ResponseBody::from(out.freeze()), None)
}

/// The upstream connection is gone: the client's connection ends as a direct one would.
pub(crate) fn upstream_gone() -> Reply {
    turn_without_answer(TurnEnd::Closed)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test]
    async fn uncancelled_work_ends_even_when_its_request_goes_away() {
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        let request = tokio::spawn(uncancelled(async move {
            drop(wait.await);
            flag.store(true, Ordering::Release);
        }));
        tokio::task::yield_now().await;
        request.abort();
        assert!(request.await.unwrap_err().is_cancelled());
        go.send(()).unwrap();
        for _ in 0..100 {
            if ended.load(Ordering::Acquire) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the work stopped with the request that asked for it");
    }

    #[tokio::test]
    async fn uncancelled_work_that_need_not_wait_runs_in_its_requests_task() {
        let tasks = tokio::spawn(async {
            let ran_in = uncancelled(async { tokio::task::id() }).await.unwrap();
            (tokio::task::id(), ran_in)
        });
        let (request, work) = tasks.await.unwrap();
        assert_eq!(work, request);
        let waited = tokio::spawn(async {
            let ran_in = uncancelled(async {
                tokio::task::yield_now().await;
                tokio::task::id()
            });
            (tokio::task::id(), ran_in.await.unwrap())
        });
        let (request, work) = waited.await.unwrap();
        assert_ne!(work, request, "work that waits moves to a task of its own");
    }
}
