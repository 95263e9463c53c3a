//! Sessions leaving the old process in a take-over, in batches: each one between turns is
//! taken apart under its link's lock (its socket, its state, its kept answer), the batch is
//! sent without waiting, then the new process's acknowledgements are read in order. A session
//! not sent goes back to the table whole, with its link; one sent is never used here again.

use std::os::fd::AsFd;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::OwnedMutexGuard;
use tracing::debug;

use super::channel::Channel;
use super::moved::MovedSession;
use super::{Message, next, unexpected};
use crate::identity::IdentityId;
use crate::relay::RelayLink;
use crate::relay::link::UpstreamTlsLink;
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
    tls: Option<UpstreamTlsLink>,
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
    let (tcp, link_state, tls) = match link.into_state() {
        Ok(parts) => parts,
        Err(link) => {
            debug!(session = %label, "moving: its link cannot move (TLS, or a broken socket)");
            *guard = Some(*link);
            return Leave::Stays;
        }
    };
    session.mark_moved(true);
    state.handover.mark_moved(&session.id, &session.owner.id);
    state.sessions.remove(&session.id);
    let moved = Box::new(MovedSession::of(session, link_state, last));
    let session = session.clone();
    Leave::Going(Box::new(Leaving { session, guard, tcp, moved, kept, tls }))
}

/// What a batch came to.
pub struct Sent {
    /// Sessions the new process took: id and owner.
    pub moved: Vec<(String, IdentityId)>,
    /// Sessions whose state was too large a message: back in the table, to stay.
    pub stayed: Vec<String>,
}

/// Why a batch stopped. Sessions not sent are back in the table; those sent and not
/// acknowledged are given up here (the new process may hold them): id and owner.
pub struct Broke {
    /// The cause.
    pub error: std::io::Error,
    /// Sent and not acknowledged.
    pub unacknowledged: Vec<(String, IdentityId)>,
}

/// Sends `batch` and reads its acknowledgements.
pub async fn send(
    channel: &mut Channel,
    state: &AppState,
    batch: Vec<Leaving>,
) -> Result<Sent, Broke> {
    let mut done = Sent { moved: Vec::new(), stayed: Vec::new() };
    let (mut sent, mut failed) = (Vec::with_capacity(batch.len()), None);
    for leaving in batch {
        if failed.is_some() {
            put_back(state, leaving);
            continue;
        }
        let Leaving { session, guard, tcp, moved, kept, tls } = leaving;
        let message = Message::Session(moved);
        let result = channel.send_with(&message, &kept, &[tcp.as_fd()]).await;
        let Message::Session(moved) = message else { unreachable!("built above") };
        let leaving = Leaving { session, guard, tcp, moved, kept, tls };
        match result {
            Ok(()) => sent.push(leaving),
            // Nothing of it was written: it stays, and the others go on.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                done.stayed.push(leaving.session.id.clone());
                put_back(state, leaving);
            }
            Err(e) => {
                failed = Some(e);
                sent.push(leaving);
            }
        }
    }
    let mut pending = sent.into_iter();
    while failed.is_none() {
        let Some(leaving) = pending.next() else { break };
        match next(channel).await {
            Ok(Message::Took { id }) if id == leaving.session.id => {
                let label = common::wire::session_label(&id);
                let kept = leaving.kept.iter().map(Bytes::len).sum::<usize>();
                debug!(session = %label, kept, "moved");
                done.moved.push((id, leaving.session.owner.id.clone()));
                give_up(leaving);
            }
            other => {
                let owner = leaving.session.owner.id.clone();
                failed = Some(other.err().unwrap_or_else(unexpected));
                let unacknowledged = vec![(leaving.session.id.clone(), owner)];
                give_up(leaving);
                let rest = pending.map(|l| {
                    let id = (l.session.id.clone(), l.session.owner.id.clone());
                    give_up(l);
                    id
                });
                let unacknowledged = unacknowledged.into_iter().chain(rest).collect();
                let error = failed.take().unwrap_or_else(unexpected);
                return Err(Broke { error, unacknowledged });
            }
        }
    }
    match failed {
        Some(error) => {
            let unacknowledged = pending
                .map(|l| {
                    let id = (l.session.id.clone(), l.session.owner.id.clone());
                    give_up(l);
                    id
                })
                .collect();
            Err(Broke { error, unacknowledged })
        }
        None => Ok(done),
    }
}

/// A session sent: this process lets its socket go without a word (the new process has its
/// own descriptor), and its idle watcher finds the link gone.
fn give_up(leaving: Leaving) {
    let Leaving { session, tcp, .. } = leaving;
    drop(tcp);
    if let Some(watcher) = session.link_use.watcher.get() {
        watcher.wake_by_ref();
    }
}

/// A session not sent goes back to the table whole, with its link, watched again.
fn put_back(state: &AppState, leaving: Leaving) {
    let Leaving { session, mut guard, tcp, moved, tls, .. } = leaving;
    match RelayLink::from_state(tcp, moved.link, tls) {
        Ok(link) => *guard = Some(link),
        Err(e) => debug!(error = %e, "a session not sent lost its socket: it ends"),
    }
    drop(guard);
    session.mark_moved(false);
    state.handover.unmark_moved(&session.id);
    state.sessions.put_back(session.clone());
    drop(state.reaper.send(session.clone()));
    if let Some(watcher) = session.link_use.watcher.get() {
        watcher.wake_by_ref();
    }
}
