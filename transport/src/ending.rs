//! Ending sessions cut short: at shutdown (idle sessions at once, running commands after the
//! grace) and when a sidecar that shuts down asks. A running statement is ended upstream with
//! `KILL QUERY`, so its client gets the server's own error; a turn still running after that is
//! cut, and its client gets error 1053. A session that expires with a statement still running
//! (its sidecar died mid-query) has it killed the same way. Every wait here is bounded.

use std::sync::Arc;
use std::time::Duration;

use common::wire::{LoginAs, session_label};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::identity::Caller;
use crate::relay::admin::{admin_login, kill_query};
use crate::session::{Session, lock};
use crate::state::AppState;

/// How long a killed statement's answer may take to come back.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long a cut turn may take to end.
const CUT_WAIT: Duration = Duration::from_secs(1);
/// Longest wait for a turn to let go of a link before closing it.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How often a wait for the end of a turn looks.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Ends the statement running on `session` and its turn, then closes its upstream connection.
pub async fn end_running(state: &AppState, session: &Session) {
    if session.is_busy() {
        if let Some(login) = killer(state, session) {
            kill(state, session, &login).await;
            wait_idle(session, KILL_WAIT).await;
        }
        if session.is_busy() {
            session.cut.cancel();
            wait_idle(session, CUT_WAIT).await;
        }
    }
    close_link(session).await;
}

/// A session expired (its sidecar went silent): a statement it left running is ended upstream
/// with `KILL QUERY` (the server would run it to its end, since nobody reads its answer), then
/// the upstream connection is dropped without COM_QUIT: to the server, an aborted client, as
/// a direct client that vanished would be.
pub async fn end_expired(state: &AppState, session: &Session) {
    if session.has_turn() {
        match killer(state, session) {
            Some(login) => kill(state, session, &login).await,
            None => warn!(
                session = %session_label(&session.id),
                thread = session.connection_id,
                "an expired session's statement may run on upstream: set the upstream's admin_user so it can be killed"
            ),
        }
    }
    drop(tokio::time::timeout(CLOSE_WAIT, session.take_link()).await);
}

/// Ends the sessions a reload revoked (their identity is gone, or may no longer reach their
/// upstream): a running statement is killed, the connection closed, and the sidecar told
/// (keep-alive news, then `access_revoked` on the session's next request).
pub fn end_revoked(state: &Arc<AppState>, sessions: Vec<Arc<Session>>) {
    for session in sessions {
        warn!(
            session = %session_label(&session.id),
            identity = %session.owner.name,
            upstream = %session.upstream,
            "session ended: its identity's access was revoked"
        );
        state.metrics.sessions_revoked.inc();
        let state = state.clone();
        tokio::spawn(async move {
            end_running(&state, &session).await;
            state.session_ended(&session.id, &session.owner.id, false);
        });
    }
}

/// [`crate::Error::AccessRevoked`], and the session ended, when `caller` may no longer reach
/// the session's upstream: access is checked on every request, not only at a reload (a person
/// an identity provider took out of a group). `caller` was authorised against the
/// configuration in force when its request came; `recheck` asks the one in force now, for a
/// request that waited (an open, while the upstream answered: a reload may have run).
pub fn refuse_if_denied(
    state: &Arc<AppState>,
    caller: &Caller,
    session: &Session,
    recheck: bool,
) -> Result<(), crate::Error> {
    let allowed = caller.access.allows(&session.upstream);
    if allowed && (!recheck || state.identities().still_allows(caller, &session.upstream)) {
        return Ok(());
    }
    end_revoked(state, state.revoke(session).into_iter().collect());
    Err(crate::Error::AccessRevoked(caller.name.to_string()))
}

/// Shutdown: no new work is taken; idle sessions end at once; running commands get `grace`
/// to finish, then are ended as [`end_running`] does.
pub async fn drain(state: &Arc<AppState>, grace: Duration) {
    state.draining.cancel();
    let deadline = Instant::now() + grace;
    let mut closing = JoinSet::new();
    loop {
        for session in state.sessions.remove_idle() {
            state.session_ended(&session.id, &session.owner.id, false);
            closing.spawn(async move { close_link(&session).await });
        }
        if state.sessions.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
    let running = state.sessions.drain();
    if !running.is_empty() {
        warn!(
            sessions = running.len(),
            "commands still running after the shutdown grace: ending them"
        );
    }
    for session in running {
        let state = state.clone();
        closing.spawn(async move {
            end_running(&state, &session).await;
            state.session_ended(&session.id, &session.owner.id, false);
        });
    }
    while closing.join_next().await.is_some() {}
}

/// Closes the session's upstream connection (COM_QUIT) once no turn holds it.
pub async fn close_link(session: &Session) {
    if let Ok(Some(link)) = tokio::time::timeout(CLOSE_WAIT, session.take_link()).await {
        link.quit().await;
    }
}

/// Who can end the session's statement: its `users` entry, else the upstream's `admin_user`.
fn killer(state: &AppState, session: &Session) -> Option<LoginAs> {
    if let Some(own) = lock(&session.logged_in_as).clone() {
        return Some(own);
    }
    state.config().upstream(&session.upstream).and_then(admin_login)
}

async fn kill(state: &AppState, session: &Session, login: &LoginAs) {
    let label = session_label(&session.id);
    let config = state.config();
    let Some(upstream) = config.upstream(&session.upstream) else { return };
    let tls = match state.upstream_tls(upstream) {
        Ok(tls) => tls,
        Err(e) => return warn!(session = %label, error = %e, "cannot end the running statement"),
    };
    let timeout = config.connect_timeout.min(KILL_WAIT * 2);
    match kill_query(upstream, tls, session.connection_id, login, timeout).await {
        Ok(()) => {
            info!(session = %label, thread = session.connection_id, "running statement killed upstream")
        }
        Err(e) => warn!(session = %label, user = %login.user, error = %e, "KILL QUERY failed"),
    }
}

/// Waits until no turn runs on `session`, at most `limit`.
async fn wait_idle(session: &Session, limit: Duration) {
    let deadline = Instant::now() + limit;
    while session.is_busy() && Instant::now() < deadline {
        tokio::time::sleep(LOOK_EVERY).await;
    }
}
