//! Sessions leaving the old process in a take-over, in batches: each one between turns is
//! taken apart under its link's lock (its socket, its state, its kept answer), the batch is
//! sent without waiting, then the new process's acknowledgements are read in order. A session
//! not acknowledged goes back to the table whole, with its link.

use std::os::fd::AsFd;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::OwnedMutexGuard;
use tracing::debug;

use super::channel::Channel;
use super::moved::MovedSession;
use super::{Message, next, unexpected};
use crate::relay::RelayLink;
use crate::session::Session;
use crate::state::AppState;

/// What became of a session asked to leave.
pub enum Leave {
    /// Taken apart, to send.
    Going(Box<Leaving>),
    /// It cannot move: over TLS to its upstream, or its link is closed.
    Stays,
    /// A turn runs on it: later.
    Busy,
}

/// A session taken apart and not acknowledged yet: what puts it back.
pub struct Leaving {
    session: Arc<Session>,
    guard: OwnedMutexGuard<Option<RelayLink>>,
    tcp: std::net::TcpStream,
    moved: Box<MovedSession>,
    kept: Vec<Bytes>,
}

/// Takes `session` apart if no turn runs on it (its link's lock is kept until it is
/// acknowledged or put back); it leaves the table, and a step that reaches it is hung up on.
pub fn take_apart(state: &AppState, session: &Arc<Session>) -> Leave {
    let label = common::wire::session_label(&session.id);
    let Ok(mut guard) = session.link.clone().try_lock_owned() else { return Leave::Busy };
    if session.has_turn() {
        return Leave::Busy;
    }
    let Some((last, kept)) = session.resume.export() else { return Leave::Busy };
    let Some(link) = guard.take() else {
        debug!(session = %label, "moving: its link is closed");
        return Leave::Stays;
    };
    let (tcp, link_state) = match link.into_state() {
        Ok(parts) => parts,
        Err(link) => {
            debug!(session = %label, "moving: its link cannot move (TLS, or a broken socket)");
            *guard = Some(*link);
            return Leave::Stays;
        }
    };
    session.mark_moved(true);
    state.handover.mark_moved(&session.id);
    state.sessions.remove(&session.id);
    let moved = Box::new(MovedSession::of(session, link_state, last));
    Leave::Going(Box::new(Leaving { session: session.clone(), guard, tcp, moved, kept }))
}

/// Sends `batch` and reads its acknowledgements; the number moved. On a failure, every
/// session not acknowledged is put back, and the error returned.
pub async fn send(
    channel: &mut Channel,
    state: &AppState,
    batch: Vec<Leaving>,
) -> std::io::Result<u64> {
    let mut sent = Vec::with_capacity(batch.len());
    let mut failed = None;
    for leaving in batch {
        if failed.is_some() {
            sent.push(leaving);
            continue;
        }
        let Leaving { session, guard, tcp, moved, kept } = leaving;
        let message = Message::Session(moved);
        let result = channel.send_with(&message, &kept, &[tcp.as_fd()]).await;
        let Message::Session(moved) = message else { return Err(unexpected()) };
        failed = result.err();
        sent.push(Leaving { session, guard, tcp, moved, kept });
    }
    let mut moved = 0;
    let mut pending = sent.into_iter();
    while failed.is_none() {
        let Some(leaving) = pending.next() else { break };
        match next(channel).await {
            Ok(Message::Took { id }) if id == leaving.session.id => {
                moved += 1;
                // The new process holds its own descriptor; this one closes without a word,
                // and the idle watcher finds the link gone.
                let Leaving { session, tcp, kept, .. } = leaving;
                drop(tcp);
                let label = common::wire::session_label(&session.id);
                debug!(session = %label, kept = kept.iter().map(Bytes::len).sum::<usize>(), "moved");
                if let Some(watcher) = session.link_use.watcher.get() {
                    watcher.wake_by_ref();
                }
            }
            other => {
                put_back(state, leaving)?;
                failed = Some(other.err().unwrap_or_else(unexpected));
            }
        }
    }
    for leaving in pending {
        put_back(state, leaving)?;
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(moved),
    }
}

/// A session that did not move goes back to the table, with its link.
fn put_back(state: &AppState, leaving: Leaving) -> std::io::Result<()> {
    let Leaving { session, mut guard, tcp, moved, .. } = leaving;
    let config = state.config();
    let tls = config.upstream(&session.upstream).and_then(|u| state.upstream_tls(u).ok());
    *guard = Some(RelayLink::from_state(tcp, moved.link, tls.flatten())?);
    session.mark_moved(false);
    state.handover.unmark_moved(&session.id);
    state.sessions.put_back(session);
    Ok(())
}
