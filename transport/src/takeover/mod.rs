//! Take-over: a new transport process (`transport --take-over`) takes the running one's
//! listeners and sessions over a local Unix socket (`take_over_socket`), so that an upgrade
//! loses no session. The old process hands over its listening sockets, stops accepting, asks
//! its connections to close after their answer in progress, and moves each session between
//! turns: its state as a versioned message, its upstream socket as a file descriptor. A step
//! that reaches the new process before its session waits for it; one that reaches the old
//! process after its session left is hung up on, and the sidecar sends it again on a new
//! connection. Sessions over TLS to their upstream cannot move (their TLS state lives in the
//! process) and end as at a shutdown.
//!
//! What each side knows meanwhile is `crate::handover`'s. Layers, lowest first: `channel`
//! (messages with descriptors) and `moved` (a session's state) → `door` (where a new process
//! knocks) and `leaving` (sessions sent in batches) → `give` (the old process) and `take` (the
//! new one). Unix only.

pub mod channel;
pub mod door;
pub mod give;
pub mod leaving;
pub mod moved;
pub mod take;

use std::path::PathBuf;
use std::sync::Arc;

use crate::state::AppState;

/// The knocks at this process's door (`take_over_socket`); none without a socket
/// configured. Taking over (`taking`), the door replaces the old process's at once, and a
/// knock waits until this take-over is over.
pub fn door(
    path: Option<PathBuf>,
    taking: Option<take::Arrivals>,
    state: &Arc<AppState>,
) -> std::io::Result<tokio::sync::mpsc::Receiver<door::Knock>> {
    let Some(path) = path else { return Ok(tokio::sync::mpsc::channel(1).1) };
    let Some(taking) = taking else { return Ok(door::Door::open(&path, false)?.serve()) };
    let mut received = door::Door::open(&path, true)?.serve();
    let (forward, knocks) = tokio::sync::mpsc::channel(1);
    let receiving = taking.receive(state.clone());
    tokio::spawn(async move {
        receiving.await;
        while let Some(knock) = received.recv().await {
            if forward.send(knock).await.is_err() {
                return;
            }
        }
    });
    Ok(knocks)
}

/// The version of the take-over's messages. A process takes over from one of the same or an
/// older version; a new one that reads older messages keeps this number and says so here.
pub const VERSION: u32 = 1;

/// The messages of a take-over, in order: `Hello` (new → old), `Listeners` (old → new, with
/// the listening sockets), `Serving` (new → old: it accepts now), then each `Session` (old →
/// new, with its upstream socket) answered by `Took`, and `Done`. Either side may send
/// `Refused` and close.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Message {
    /// The new process and the version it speaks.
    Hello {
        /// Its [`VERSION`].
        version: u32,
    },
    /// The listening sockets: the API's, then the metrics' when `metrics` is set.
    Listeners {
        /// The old process's [`VERSION`]: the messages that follow are of it.
        version: u32,
        /// A second socket is the metrics listener.
        metrics: bool,
    },
    /// The new process accepts connections now.
    Serving,
    /// A session, its upstream socket beside it.
    Session(Box<moved::MovedSession>),
    /// The new process registered the session `id`.
    Took {
        /// The session.
        id: String,
    },
    /// Every session that could move has.
    Done {
        /// Sessions moved.
        moved: u64,
        /// Sessions that could not move (over TLS upstream, or a turn past the bound).
        stayed: u64,
    },
    /// The take-over cannot go on.
    Refused {
        /// Why.
        reason: String,
    },
}

/// Longest wait for the other process's next message.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The next message, within [`ANSWER_WAIT`].
async fn next(channel: &mut channel::Channel) -> std::io::Result<Message> {
    match tokio::time::timeout(ANSWER_WAIT, channel.recv()).await {
        Ok(Ok(Some((message, _, _)))) => Ok(message),
        Ok(Ok(None)) => Err(std::io::ErrorKind::UnexpectedEof.into()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

/// A message out of its place.
fn unexpected() -> std::io::Error {
    std::io::Error::other("an unexpected take-over message")
}
