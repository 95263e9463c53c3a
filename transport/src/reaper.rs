//! The reaper: one task owning the timing wheel, sleeping until its next deadline. It expires
//! silent sessions and closes idle pooled connections. A session's timer is due
//! `session_timeout` after it was last heard from; requests only store a timestamp, and a
//! timer that comes due for a session heard from since (or running a command) is simply filed
//! again, like a keep-alive pool's lazy refresh.

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::wheel::{Clock, Wheel};
use mysql_async::prelude::Queryable;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::pool::IdleTicket;
use crate::session::Session;
use crate::state::{AppState, Metrics};

/// What the reaper watches.
#[derive(Debug)]
pub enum Timer {
    /// A session, expired when silent for `session_timeout`.
    Session(Arc<Session>),
    /// A parked connection, closed after `pool.idle_timeout`.
    Idle(IdleTicket),
}

/// Tick of the reaper's wheel.
const TICK: Duration = Duration::from_millis(10);

/// Runs until `shutdown`; sessions to watch arrive on `new_sessions`.
pub async fn run(
    state: Arc<AppState>,
    mut new_timers: mpsc::UnboundedReceiver<Timer>,
    shutdown: CancellationToken,
) {
    let timeout = state.config.session_timeout;
    let idle_timeout = state.config.pool.idle_timeout;
    let clock = Clock::new(Instant::now(), TICK);
    let mut wheel: Wheel<Timer> = Wheel::new();
    let mut due = Vec::new();
    loop {
        let wake = wheel.next_deadline().map(|t| tokio::time::Instant::from_std(clock.instant(t)));
        tokio::select! {
            timer = new_timers.recv() => match timer {
                Some(Timer::Session(s)) => {
                    wheel.insert(clock.deadline_tick(s.last_seen() + timeout), Timer::Session(s));
                    continue;
                }
                Some(idle @ Timer::Idle(_)) => {
                    wheel.insert(clock.deadline_tick(Instant::now() + idle_timeout), idle);
                    continue;
                }
                None => return,
            },
            _ = sleep_until(wake) => {}
            _ = shutdown.cancelled() => return,
        }
        let now = Instant::now();
        wheel.poll_into(clock.now_tick(now), &mut due);
        for timer in due.drain(..) {
            let session = match timer {
                Timer::Session(session) => session,
                Timer::Idle(ticket) => {
                    if let Some(conn) = state.pool.reap(&ticket) {
                        tokio::spawn(async move { drop(conn.disconnect().await) });
                    }
                    continue;
                }
            };
            if !state.sessions.contains(&session.id) {
                continue;
            }
            let quiet_until = session.last_seen() + timeout;
            if quiet_until > now || session.is_busy() {
                let next = if session.is_busy() { now + timeout } else { quiet_until };
                wheel.insert(clock.deadline_tick(next), Timer::Session(session));
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

/// Removes a silent session; its upstream connection is rolled back and closed, never reused.
fn expire(state: &AppState, session: Arc<Session>) {
    state.sessions.remove(&session.id);
    Metrics::bump(&state.metrics.sessions_expired);
    info!(session = %session.id, "session expired: its sidecar went silent");
    tokio::spawn(async move {
        // A relayed connection is closed: the server rolls back what was left open.
        drop(session.relay.lock().await.take());
        if let Some(mut conn) = session.conn.lock().await.take() {
            drop(conn.query_drop("ROLLBACK").await);
            drop(conn.disconnect().await);
        }
    });
}
