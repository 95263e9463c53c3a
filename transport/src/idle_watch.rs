//! The idle watcher: between turns, one small task per session listens on its upstream
//! connection. A server speaks unasked only to end the connection (`KILL`, `wait_timeout`,
//! shutdown), so anything it reads there (the end of the stream, an error, bytes) closes the
//! session at once, and the sidecar, long-polling its keep-alive, closes the client's
//! connection as a direct server would have. It gives the link up whenever a turn wants it.

use std::sync::Arc;

use common::wire::session_label;
use tokio::io::AsyncReadExt;
use tracing::info;

use crate::session::Session;
use crate::state::AppState;

/// Watches `session` until it is closed.
pub async fn watch(state: Arc<AppState>, session: Arc<Session>) {
    loop {
        let mut guard = session.link.clone().lock_owned().await;
        let Some(link) = guard.as_mut() else { return };
        let heard = tokio::select! {
            biased;
            () = session.link_use.wanted.notified() => None,
            read = link.stream.read_buf(&mut link.rbuf) => Some(read),
        };
        let Some(read) = heard else {
            drop(guard);
            session.link_use.released.notified().await;
            continue;
        };
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
