//! The idle watcher: between turns, one small task per session listens on its upstream
//! connection. A server speaks unasked only to end the connection (`KILL`, `wait_timeout`,
//! shutdown), so anything it reads there (the end of the stream, an error, bytes) closes the
//! session at once, and the sidecar, long-polling its keep-alive, closes the client's
//! connection as a direct server would have. It gives the link up whenever a turn wants it.
//!
//! It takes the link only once no turn has begun for [`QUIET`]: a session that sends command
//! after command costs no hand-over of the link each command, and one that goes quiet is
//! watched within `QUIET` (a hang-up meanwhile is read then, from the socket's buffer).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::wire::session_label;
use futures_util::FutureExt;
use tokio::io::AsyncReadExt;
use tracing::info;

use crate::session::Session;
use crate::state::AppState;

/// How long a link goes without a new turn before the watcher takes it.
pub const QUIET: Duration = Duration::from_millis(100);

/// Watches `session` until it is closed.
pub async fn watch(state: Arc<AppState>, session: Arc<Session>) {
    loop {
        let turns = quiet(&session).await;
        // A turn that began since is the link's: the watcher waits for the next quiet time.
        let Ok(mut guard) = session.link.clone().try_lock_owned() else { continue };
        let Some(link) = guard.as_mut() else { return };
        // Past turns each asked for the link, which the watcher did not hold then: that call
        // is dropped. A turn that asks from here on is seen below.
        session.link_use.wanted.notified().now_or_never();
        if session.link_use.turns.load(Ordering::Acquire) != turns {
            continue;
        }
        let heard = tokio::select! {
            biased;
            () = session.link_use.wanted.notified() => None,
            read = link.stream.read_buf(&mut link.rbuf) => Some(read),
        };
        let Some(read) = heard else { continue };
        let said = link.rbuf.len();
        *guard = None;
        drop(guard);
        if state.sessions.remove(&session.id).is_some() {
            state.metrics.sessions_ended_by_upstream.inc();
            let reset = matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset);
            let how = match read {
                Ok(0) => "closed".to_owned(),
                Ok(_) => format!("sent {said} bytes unasked and was closed"),
                Err(e) => format!("failed ({e})"),
            };
            info!(session = %session_label(&session.id), "the upstream connection {how} while idle; session ended");
            state.session_ended(&session.id, &session.owner.id, reset);
        }
        return;
    }
}

/// Returns once no turn holds the link and none has begun for [`QUIET`], with the count of
/// turns begun then.
async fn quiet(session: &Session) -> u64 {
    let link_use = &session.link_use;
    loop {
        let turns = link_use.turns.load(Ordering::Acquire);
        tokio::time::sleep(QUIET).await;
        if link_use.in_turn.load(Ordering::Acquire) {
            link_use.released.notified().await;
        } else if link_use.turns.load(Ordering::Acquire) == turns {
            return turns;
        }
    }
}
