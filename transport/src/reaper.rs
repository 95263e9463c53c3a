//! The reaper: one task owning the timing wheel, sleeping until its next deadline. It expires
//! silent sessions. A session's timer is due `session_timeout` after it was last heard from;
//! requests only store a timestamp, and a timer that comes due for a session heard from since
//! (or running a turn) is simply filed again, like a keep-alive pool's lazy refresh. So it
//! sees every session at least once a `session_timeout`, and then lets go of an upload the
//! session holds that arrives slower than a plain body may.
//!
//! A stall is never taken for silence. When the reaper wakes much later than it meant to (the
//! process was stopped, the host starved it), the heartbeats that arrived meanwhile still sit
//! unread in socket buffers, so every session due then gets a full `session_timeout` more.
//! And a session is expired only at a second look, a moment after the first, so requests
//! already queued are taken in first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::wheel::{Clock, Wheel};
use common::wire::session_label;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::request_body::MIN_BODY_RATE;
use crate::session::Session;
use crate::state::AppState;

/// Tick of the reaper's wheel.
const TICK: Duration = Duration::from_millis(10);

/// Waking this much later than planned means the process stalled.
const STALL: Duration = Duration::from_millis(500);

/// Between the first and the second look at a silent session.
const SECOND_LOOK: Duration = Duration::from_millis(250);

/// A session on the wheel, and whether it was found silent once already.
type Entry = (String, bool);

/// Runs until `shutdown`; sessions to watch arrive on `new_sessions`.
pub async fn run(
    state: Arc<AppState>,
    mut new_sessions: mpsc::UnboundedReceiver<Arc<Session>>,
    shutdown: CancellationToken,
) {
    let clock = Clock::new(Instant::now(), TICK);
    let mut wheel: Wheel<Entry> = Wheel::new();
    let mut due = Vec::new();
    loop {
        let timeout = state.config().session_timeout;
        let planned = wheel.next_deadline().map(|t| clock.instant(t));
        tokio::select! {
            session = new_sessions.recv() => match session {
                Some(s) => {
                    let login_by = s.opened + state.config().connect_timeout;
                    let deadline = clock.deadline_tick((s.last_seen() + timeout).min(login_by));
                    wheel.insert(deadline, (s.id.clone(), false));
                    continue;
                }
                None => return,
            },
            _ = sleep_until(planned) => {}
            _ = shutdown.cancelled() => return,
        }
        let now = Instant::now();
        let late = planned.map_or(Duration::ZERO, |p| now.saturating_duration_since(p));
        let stalled = late >= STALL;
        if stalled {
            state.metrics.stalls_forgiven.inc();
            warn!(
                late_ms = late.as_millis() as u64,
                "the transport stalled; silent sessions get another session_timeout"
            );
        }
        wheel.poll_into(clock.now_tick(now), &mut due);
        for (id, looked) in due.drain(..) {
            // A session that ended meanwhile is gone: the wheel holds its id, not the session.
            let Some(session) = state.sessions.lookup(&id) else { continue };
            // What an upload holds is room the others wait for: kept only while it arrives
            // as fast as a plain body must, whatever keeps its session alive.
            let stall = state.config().body_timeout;
            if session.upload.forget_if_slower_than(stall, MIN_BODY_RATE) {
                info!(session = %session_label(&session.id), "{}", crate::uploads::LET_GO);
            }
            let park_timeout = state.config().park_timeout;
            let quiet_for = if session.is_parked() { park_timeout } else { timeout };
            let quiet_until = session.last_seen() + quiet_for;
            // A session that never logged in has `connect_timeout` to, however often it is
            // touched: each holds an upstream connection the server counts as a handshake.
            let login_by =
                (!session.is_logged_in()).then(|| session.opened + state.config().connect_timeout);
            if !stalled && !session.is_busy() && login_by.is_some_and(|by| by <= now) {
                expire(&state, session, "session expired: no login within connect_timeout");
                continue;
            }
            let quiet_until = login_by.map_or(quiet_until, |by| quiet_until.min(by));
            if stalled || session.is_busy() {
                wheel.insert(clock.deadline_tick(now + timeout), (id, false));
            } else if quiet_until > now {
                wheel.insert(clock.deadline_tick(quiet_until), (id, false));
            } else if !looked {
                wheel.insert(clock.deadline_tick(now + SECOND_LOOK), (id, true));
            } else if !session.is_parked() && may_park(&state, &session) {
                park(&state, &session);
                let until = session.last_seen() + park_timeout;
                wheel.insert(clock.deadline_tick(until.max(now + SECOND_LOOK)), (id, false));
            } else {
                expire(&state, session, "session expired: its sidecar went silent");
            }
        }
    }
}

/// A silent session may be parked rather than closed: parking is on, a client logged in (a
/// session opened ahead has nothing to keep), no transaction is open (its locks would be held
/// all night), no turn waits for a resume, the server waits for nothing from the client (a
/// LOAD DATA LOCAL file, an auth step), and there is room.
fn may_park(state: &AppState, session: &Session) -> bool {
    let config = state.config();
    if config.park_timeout.is_zero()
        || !session.is_logged_in()
        || session.in_transaction()
        || session.has_turn()
        || session.awaits_client()
    {
        return false;
    }
    let (all, own) = state.sessions.parked(&session.owner.id);
    all < config.max_parked_sessions && own < config.max_parked_sessions_per_token
}

/// Parks a silent session: kept, its upstream connection open, until its sidecar is back or
/// `park_timeout` passes.
fn park(state: &AppState, session: &Session) {
    session.park();
    state.metrics.sessions_parked.inc();
    info!(
        session = %session_label(&session.id),
        park_timeout_s = state.config().park_timeout.as_secs(),
        "session parked: its sidecar went silent with no transaction open"
    );
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

/// Removes a silent session; its upstream connection is closed, so the server rolls back what
/// was left open.
fn expire(state: &Arc<AppState>, session: Arc<Session>, why: &'static str) {
    let state = state.clone();
    state.sessions.remove(&session.id);
    state.metrics.sessions_expired.inc();
    info!(session = %session_label(&session.id), "{why}");
    tokio::spawn(async move { crate::ending::end_expired(&state, &session).await });
}
