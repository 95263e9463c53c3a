//! The reaper: one task owning the timing wheel, sleeping until its next deadline. It expires
//! silent sessions. A session's timer is due `session_timeout` after it was last heard from;
//! requests only store a timestamp, and a timer that comes due for a session heard from since
//! (or running a turn) is simply filed again, like a keep-alive pool's lazy refresh.

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::wheel::{Clock, Wheel};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::session::Session;
use crate::state::{AppState, Metrics};

/// Tick of the reaper's wheel.
const TICK: Duration = Duration::from_millis(10);

/// Runs until `shutdown`; sessions to watch arrive on `new_sessions`.
pub async fn run(
    state: Arc<AppState>,
    mut new_sessions: mpsc::UnboundedReceiver<Arc<Session>>,
    shutdown: CancellationToken,
) {
    let timeout = state.config.session_timeout;
    let clock = Clock::new(Instant::now(), TICK);
    let mut wheel: Wheel<Arc<Session>> = Wheel::new();
    let mut due = Vec::new();
    loop {
        let wake = wheel.next_deadline().map(|t| tokio::time::Instant::from_std(clock.instant(t)));
        tokio::select! {
            session = new_sessions.recv() => match session {
                Some(s) => {
                    wheel.insert(clock.deadline_tick(s.last_seen() + timeout), s);
                    continue;
                }
                None => return,
            },
            _ = sleep_until(wake) => {}
            _ = shutdown.cancelled() => return,
        }
        let now = Instant::now();
        wheel.poll_into(clock.now_tick(now), &mut due);
        for session in due.drain(..) {
            if !state.sessions.contains(&session.id) {
                continue;
            }
            let quiet_until = session.last_seen() + timeout;
            if quiet_until > now || session.is_busy() {
                let next = if session.is_busy() { now + timeout } else { quiet_until };
                wheel.insert(clock.deadline_tick(next), session);
            } else {
                expire(&state, session);
            }
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Removes a silent session; its upstream connection is closed, so the server rolls back what
/// was left open.
fn expire(state: &AppState, session: Arc<Session>) {
    state.sessions.remove(&session.id);
    Metrics::bump(&state.metrics.sessions_expired);
    info!(session = %session.id, "session expired: its sidecar went silent");
    tokio::spawn(async move {
        if let Some(link) = session.link.lock().await.take() {
            link.quit().await;
        }
    });
}
