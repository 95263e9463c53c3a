//! What the end of a command reports: its latency and bytes to the metrics, one debug line,
//! a warning when its answer broke off, and, when the audit log is on, one audit line (with
//! what it learned kept for the next: a prepared statement's text, the database in use).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use common::mysql::command;
use common::wire::{TurnEnd, session_label};
use tracing::{debug, info, warn};

use crate::audit::{Entry, rfc3339};
use crate::relay::turn::{OnEnd, Outcome, TurnReport};
use crate::session::{Session, lock};
use crate::state::AppState;

/// Prepared statements remembered per session for the audit log, at most.
const MAX_STATEMENTS: usize = 4096;

/// What to do when the answer to `payload` (the command answered), sent at `started`, ends;
/// `room`: in the audit log's queue, for its line.
pub fn on_end(
    state: &AppState,
    session: &Arc<Session>,
    payload: &[u8],
    (started, room): (Instant, Option<crate::audit::Room>),
) -> OnEnd {
    let cmd = payload.first().copied().unwrap_or(0);
    let (total, bytes) =
        (state.metrics.command_seconds.clone(), state.metrics.answer_bytes.clone());
    let audit = state.audit.get().map(|log| (log.clone(), audit_entry(state, session, payload)));
    let init_db = (cmd == command::INIT_DB)
        .then(|| String::from_utf8_lossy(payload.get(1..).unwrap_or_default()).into_owned());
    // COM_CHANGE_USER names its user first, NUL-terminated (whatever the capabilities).
    let new_user = (cmd == command::CHANGE_USER)
        .then(|| payload.get(1..)?.split(|&b| b == 0).next().map(<[u8]>::to_vec))
        .flatten()
        .map(|user| String::from_utf8_lossy(&user).into_owned());
    let session = session.clone();
    Box::new(move |report: TurnReport| {
        let took = started.elapsed();
        total.observe(took.as_secs_f64());
        bytes.inc_by(report.bytes);
        // Nothing is formatted unless a line is written (the debug line is rarely on).
        let name = command::name(cmd);
        match &report.outcome {
            Outcome::Ended(end) => {
                let (session, ms) = (session_label(&session.id), took.as_secs_f64() * 1e3);
                let ms = format_args!("{ms:.3}");
                debug!(%session, command = %name, %ms, bytes = report.bytes, ?end, "command relayed");
            }
            other => log_broken_turn(session_label(&session.id), name, other),
        }
        let succeeded = matches!(report.outcome, Outcome::Ended(_)) && report.tally.error.is_none();
        if let (Some(db), true) = (init_db, succeeded) {
            lock(&session.who).database = Some(db);
        }
        // Later lines name the user it changed to once the server said OK: at once, or after
        // an auth switch, at the end of the authentication (`on_login_round`).
        if let Some(user) = &new_user {
            let mut who = lock(&session.who);
            who.changing_to = None;
            match &report.outcome {
                Outcome::Ended(TurnEnd::Done) if succeeded => who.user = Some(user.clone()),
                Outcome::Ended(TurnEnd::AwaitAuth) if succeeded => {
                    who.changing_to = Some(user.clone());
                }
                _ => {}
            }
        }
        let Some((log, mut entry)) = audit else { return };
        entry.changed_to = new_user;
        entry.duration_ms = (took.as_secs_f64() * 1e6).round() / 1e3;
        entry.rows = report.tally.rows;
        entry.affected_rows = report.tally.affected;
        entry.error = report.tally.error;
        entry.outcome = match &report.outcome {
            Outcome::Ended(end) => format!("{end:?}"),
            other => format!("{other:?}"),
        };
        if cmd == command::STMT_PREPARE && succeeded {
            entry.statement_id = report.tally.statement_id;
            if let (Some(id), Some(text)) = (report.tally.statement_id, &entry.statement) {
                let mut statements = lock(&session.statements);
                if statements.len() >= MAX_STATEMENTS {
                    statements.clear();
                }
                statements.insert(id, Arc::from(text.as_str()));
            }
        }
        log.write(&entry, room);
    })
}

/// The audit line of a command, as far as its request tells.
fn audit_entry(state: &AppState, session: &Session, payload: &[u8]) -> Entry {
    let cmd = payload.first().copied().unwrap_or(0);
    let who = lock(&session.who).clone();
    let mut entry = Entry {
        time: rfc3339(SystemTime::now()),
        session: session_label(&session.id).to_string(),
        identity: session.owner.name.to_string(),
        user: who.user,
        upstream: session.upstream.clone(),
        database: who.database,
        command: command::name(cmd),
        ..Entry::default()
    };
    let Some(log) = state.audit.get() else { return entry };
    let text = payload.get(1..).unwrap_or_default();
    match cmd {
        command::QUERY | command::STMT_PREPARE | command::INIT_DB => {
            (entry.statement, entry.truncated) = log.statement(text);
        }
        command::STMT_EXECUTE | command::STMT_FETCH | command::STMT_RESET => {
            let id = text.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            entry.statement_id = id;
            entry.statement =
                id.and_then(|id| lock(&session.statements).get(&id).map(|t| t.to_string()));
        }
        _ => {}
    }
    entry
}

/// The hook of a login round (an auth answer), of the login or of a COM_CHANGE_USER: logs a
/// turn that broke; an authentication that ends with OK makes the user a COM_CHANGE_USER asked
/// for the session's.
pub fn on_login_round(session: &Arc<Session>) -> OnEnd {
    let session = session.clone();
    Box::new(move |report: TurnReport| {
        log_broken_turn(session_label(&session.id), "login", &report.outcome);
        let mut who = lock(&session.who);
        if who.changing_to.is_none() {
            return;
        }
        let ok = report.tally.error.is_none();
        match &report.outcome {
            Outcome::Ended(TurnEnd::Done) if ok => who.user = who.changing_to.take(),
            Outcome::Ended(TurnEnd::AwaitAuth) if ok => {}
            _ => who.changing_to = None,
        }
    })
}

/// Logs a turn that did not end with its answer, naming the session.
pub fn log_broken_turn(session: &str, what: &str, outcome: &Outcome) {
    match outcome {
        Outcome::Ended(_) => {}
        Outcome::Abandoned => warn!(
            session,
            what, "answer abandoned mid-way (the sidecar went away); upstream connection closed"
        ),
        Outcome::NotUnderstood(e) => {
            warn!(session, what, error = %e, "upstream answer not understood; upstream connection closed")
        }
        Outcome::UpstreamLost(e) => {
            info!(session, what, error = %e, "upstream connection lost during an answer")
        }
        Outcome::Cut => info!(session, what, "answer cut short by the shutdown"),
    }
}
