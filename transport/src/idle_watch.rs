//! The idle watcher: between turns, one small task per session listens on its upstream
//! connection. A server speaks unasked only to end the connection (`KILL`, `wait_timeout`,
//! shutdown), so anything it reads there (the end of the stream, an error, bytes) closes the
//! session at once, and the sidecar, long-polling its keep-alive, closes the client's
//! connection as a direct server would have.
//!
//! It holds nothing while it waits, so a turn never waits for it: the end of each turn
//! registers the watcher's wake-up with the link's socket (`LinkGuard`'s drop), which wakes it
//! only when the upstream speaks before the next turn. A busy session wakes no task and hands
//! no lock over per command, and a hang-up right after a turn is heard at once. Woken, the
//! watcher takes the link's lock for one read that does not wait, and lets it go.

use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use common::wire::session_label;
use tracing::info;

use crate::session::Session;
use crate::state::AppState;

/// Watches `session` until its link is closed.
pub async fn watch(state: Arc<AppState>, session: Arc<Session>) {
    let (read, said) = loop {
        // A turn holds the lock until it ends (then the watcher reads what it left unread);
        // anyone else only for a moment.
        let mut guard = session.link.clone().lock_owned().await;
        let Some(link) = guard.as_mut() else { return };
        let heard = std::future::poll_fn(|cx| {
            session.link_use.watcher.get_or_init(|| cx.waker().clone());
            let read =
                tokio_util::io::poll_read_buf(Pin::new(&mut link.stream), cx, &mut link.rbuf);
            Poll::Ready(read)
        })
        .await;
        if let Poll::Ready(read) = heard {
            let said = link.rbuf.len();
            *guard = None;
            break (read, said);
        }
        drop(guard);
        woken().await;
    };
    if state.sessions.remove(&session.id).is_some() {
        state.metrics.sessions_ended_by_upstream.inc();
        let reset = matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset);
        let how = match read {
            Ok(0) => "closed".to_owned(),
            Ok(_) => format!("sent {said} bytes unasked and was closed"),
            Err(e) => format!("failed ({e})"),
        };
        info!(session = %session_label(&session.id), "the upstream connection {how} while idle; session ended");
        state.session_closed_by_upstream(&session.id, &session.owner.id, reset);
    }
}

/// Returns the second time it is polled: once something woke this task (the socket, a turn's
/// end that found the upstream had spoken, or the link taken).
async fn woken() {
    let mut polled = false;
    std::future::poll_fn(|_| {
        if std::mem::replace(&mut polled, true) { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
}
