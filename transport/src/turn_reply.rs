//! A session step's answer: its turn, whole when it ends within its first chunk (one write
//! with a Content-Length), else streamed; or a `Turn` frame alone.

use bytes::{Bytes, BytesMut};
use common::wire::{TurnEnd, encode_turn, session_label};
use http::{HeaderValue, StatusCode};

use crate::body::{ResponseBody, StreamedTurn};
use crate::command_log;
use crate::relay::turn::{LinkGuard, OnEnd};
use crate::relay::{Framing, Turn};
use crate::reply::{Reply, frames};
use crate::session::Session;
use crate::state::AppState;

/// Answers with the turn: inline when it completes within the first chunk (one write with a
/// Content-Length), streamed otherwise.
pub(crate) async fn turn(
    state: &AppState,
    guard: LinkGuard,
    framing: Framing,
    session: &Session,
    step: Option<u64>,
) -> Reply {
    let label = session_label(&session.id).to_string();
    let on_end: OnEnd = Box::new(move |report| {
        command_log::log_broken_turn(&label, "login or file", &report.outcome)
    });
    turn_with(state, guard, framing, session, [on_end], step).await
}

/// Answers with a turn of step `step` (resumable when given): whole when it ends within its
/// first chunk, else streamed. `on_end` has one hook per answer the turn carries.
pub(crate) async fn turn_with(
    state: &AppState,
    guard: LinkGuard,
    framing: Framing,
    session: &Session,
    on_end: impl IntoIterator<Item = OnEnd>,
    step: Option<u64>,
) -> Reply {
    let heartbeat = state.config().heartbeat_interval;
    let mut turn = Box::new(Turn::new(guard, framing, heartbeat, session.cut.clone()));
    for hook in on_end {
        turn.on_end(hook);
    }
    // Resumable from here: dropped (the request went away), the turn is parked.
    let resumable = step.is_some() && session.resume.is_on();
    let mut streamed = StreamedTurn::new(turn, resumable.then(|| session.resume.clone()));
    let first = streamed.next_chunk().await;
    let body = match first {
        Some(chunk) if streamed.is_finished() => ResponseBody::from(chunk),
        None => ResponseBody::from(Bytes::new()),
        Some(chunk) => {
            streamed.put_back(chunk);
            streamed.into_body()
        }
    };
    let mut response = frames(StatusCode::OK, body, None);
    if matches!(response.body(), ResponseBody::Turn(..)) {
        // Frames the sidecar must act on at once (heartbeats, a file request) pass unbuffered.
        response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    }
    response
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
