//! HTTP endpoints of relayed sessions. Each request hands client packets to the session's
//! upstream link and is answered by one turn: the upstream's packets as they come, then whose
//! turn it is. Open (the greeting), commands, LOAD DATA LOCAL pieces; login steps are
//! `session_login.rs`'s.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use common::mysql::command_policy::may_ask_for_a_file;
use common::mysql::packet;
use common::wire::{
    MAX_PIPELINED_COMMANDS, OpenRelay, StepKind, TurnEnd, UPLOAD_PART, encode_packets, encode_turn,
    session_label,
};
use http::StatusCode;
use tracing::info;

use crate::Error;
use crate::audit::{AuditLog, Room};
use crate::identity::Caller;
use crate::relay::handshake::ClientLeg;
use crate::relay::request::{check_file_piece, commands_asked, count_asked};
use crate::relay::{Framing, Phase, RelayLink};
use crate::reply::ResponseBody;
use crate::reply::{Reply, frames, no_content};
use crate::request_body::{MAX_CONTROL_BODY, read_body};
use crate::resume_room::ResumeRoom;
use crate::session::Session;
use crate::shares::Share;
use crate::state::AppState;
use crate::steps::{Step, StepRequest};
use crate::steps::{begin, resume, step_request};
use crate::turn_reply::{Then, broken_turn_hook, send_step, turn_without_answer, upstream_gone};
use crate::uploads::{self, StepBody, read_step_body};
use crate::{command_log, idle_watch, session_login};

/// `POST …/v1/relay`: connects to the upstream and answers its greeting.
pub async fn open(state: &Arc<AppState>, req: Step, caller: &Arc<Caller>) -> Result<Reply, Error> {
    state.refuse_if_draining()?;
    // One view of the configuration for the whole request (a reload may swap it).
    let config = state.config();
    let body = read_body(req, MAX_CONTROL_BODY, config.body_timeout).await?;
    let open: OpenRelay = serde_json::from_slice(&body)
        .map_err(|e| Error::BadRequest(format!("invalid relay request: {e}")))?;
    let upstream = config.upstream(&open.upstream);
    // An identity that may not reach a name learns nothing of whether it exists: an unknown
    // name and a forbidden one get the same refusal.
    let name = upstream.map_or(open.upstream.as_str(), |u| u.name.as_str());
    if !caller.access.allows(name) {
        let (upstream, identity) = (name.to_owned(), caller.name.to_string());
        info!(%identity, %upstream, "session refused: the identity may not reach the upstream");
        return Err(Error::UpstreamForbidden { upstream, identity });
    }
    let upstream = upstream.ok_or_else(|| Error::UnknownUpstream(open.upstream.clone()))?;
    let limits = state.session_limits_within(caller).await?;
    let opening = state.take_opening(caller).await?;
    let tls = state.upstream_tls(upstream)?;
    let timeout = config.connect_timeout;
    let started = Instant::now();
    let leg = ClientLeg { tls: open.client_tls, compression: open.client_compression };
    let dialed = RelayLink::dial(upstream, tls, leg, timeout).await;
    state.metrics.upstream_connect_seconds.observe(started.elapsed().as_secs_f64());
    let outcome = dialed.as_ref().map(drop).map_err(|e| e as &dyn std::error::Error);
    state.readiness.record(&upstream.name, outcome);
    drop(opening);
    let (link, greeting) = dialed?;
    let mut out = BytesMut::new();
    encode_packets(&mut out, &greeting);
    if greeting.get(4) == Some(&packet::ERR) {
        encode_turn(&mut out, TurnEnd::Closed);
        return Ok(frames(StatusCode::CREATED, ResponseBody::from(out.freeze()), None));
    }
    let connection_id = link.connection_id;
    // Shutdown may have begun while the upstream answered.
    state.refuse_if_draining()?;
    let session = state.sessions.insert(link, &upstream.name, limits)?;
    // A take-over began meanwhile, and the session did not move with it: it opens there.
    if state.handover.is_leaving() && state.sessions.remove(&session.id).is_some() {
        drop(session.take_link().await);
        return Err(Error::SessionMoved);
    }
    // A reload that ran while the upstream answered may have taken this upstream away.
    crate::ending::refuse_if_denied(state, caller, &session, true)?;
    session.resume.set_window(config.resume_window);
    let owner = session.owner_counts(&state.shares).clone();
    session.resume.set_budget(ResumeRoom::new(state.resume_budget.clone(), Some(owner)));
    state.metrics.session_opened(&caller.label);
    drop(state.reaper.send(session.clone()));
    tokio::spawn(idle_watch::watch(state.clone(), session.clone()));
    info!(session = %session_label(&session.id), identity = %caller.name, upstream = %upstream.name, connection_id, "relayed session opened");
    encode_turn(&mut out, TurnEnd::AwaitAuth);
    let mut response =
        frames(StatusCode::CREATED, ResponseBody::from(out.freeze()), Some(&session.id));
    let head = &mut response.head;
    head.session_timeout_ms = Some(millis(config.session_timeout));
    head.heartbeat_ms = Some(millis(config.heartbeat_interval));
    head.pipeline = Some(MAX_PIPELINED_COMMANDS as u64);
    head.upload_part = Some(UPLOAD_PART as u64);
    head.takes_zstd = config.compression;
    Ok(response)
}

/// A session's step (a login, a command, a file piece): the next one, or its last one sent
/// again after a broken connection, answered from what was kept.
pub async fn step(state: &Arc<AppState>, caller: &Caller, req: Step) -> Result<Reply, Error> {
    let started = Instant::now();
    let owner = &caller.id;
    let id = req.session();
    let session = match state.sessions.get(id, owner, started) {
        Ok(session) => Ok(session),
        Err(_) if state.handover.was_moved(id, owner) => return Err(Error::SessionMoved),
        // Taking over: a step may come before its session.
        Err(e) => state
            .handover
            .wait_for(|| state.sessions.get(id, owner, Instant::now()).ok())
            .await
            .ok_or(e),
    };
    let Ok(session) = session else {
        // Its server closed it while idle, and this step crossed the news: the client's
        // connection ends as the server ended it, not with a lost session's error.
        if state.closed_by_upstream(id, owner) {
            return Ok(upstream_gone());
        }
        return Err(state.session_gone(id, owner));
    };
    crate::ending::refuse_if_denied(state, caller, &session, false)?;
    let step = match step_request(&req, &session) {
        Some(StepRequest::Again { step, from }) => {
            return Box::pin(resume(&session, step, from)).await;
        }
        Some(StepRequest::Next(step)) => Some(step),
        None => None,
    };
    match req.head.kind {
        StepKind::Login | StepKind::LoginAs => {
            Box::pin(session_login::login(state, session, step, req)).await
        }
        StepKind::Command => command(state, caller, session, step, req, started).await,
        StepKind::FilePiece { last } => {
            Box::pin(infile(state, caller, session, step, req, last)).await
        }
        kind => Err(Error::BadRequest(format!("{kind:?} is not a step of a session"))),
    }
}

/// `POST …/v1/sessions/{id}/command` of a relayed session: the client's packets, one command
/// or several it pipelined (and commands without an answer), answered in one turn.
async fn command(
    state: &Arc<AppState>,
    caller: &Caller,
    session: Arc<Session>,
    step: Option<u64>,
    req: Step,
    started: Instant,
) -> Result<Reply, Error> {
    let mut guard = session.lease().await?;
    state.refuse_if_draining()?;
    // The phase is checked before the body is read: a session that is not logged in holds no
    // room for bodies.
    let ready = |link: &RelayLink| link.phase == Phase::Ready && link.pending.is_none();
    if guard.as_mut().is_some_and(|link| !ready(link)) {
        return Err(Error::BadRequest("the upstream waits for something else".into()));
    }
    let (body, room) = match read_step_body(state, caller, &session, step, req).await? {
        StepBody::Whole(body, room) => (body, room),
        StepBody::Unfinished(have) => return Ok(uploads::unfinished(have)),
    };
    state.metrics.request_bytes.inc_by(body.len() as u64);
    let asked = count_asked(&body).map_err(|e| Error::BadRequest(e.to_string()))?;
    if guard.is_none() {
        return Ok(upstream_gone());
    }
    // Room for each command's audit line, before any runs: none runs unaudited. (Boxed: the
    // audit log is off on the common path, and its wait would grow every step's future.)
    let mut lines = match state.audit.get() {
        Some(log) => Box::pin(audit_room(state, caller, log, asked)).await?,
        None => Vec::new(),
    };
    begin(&session, step)?;
    state.metrics.commands.inc_by(asked.max(1) as u64);
    state.metrics.pipelined.inc_by(asked.saturating_sub(1) as u64);
    // What answers them is made once they are upstream: the turn, each command's hook.
    let then =
        move |link: &mut RelayLink, state: &AppState, session: &Arc<Session>, body: &Bytes| {
            let asked = commands_asked(body).unwrap_or_default();
            match Framing::pipelined(asked.iter().map(|a| a.expect), link.shape) {
                Some(mut framing) => {
                    framing.allow_files(files_named(&asked));
                    let hooks = asked.iter().map(|a| {
                        command_log::on_end(state, session, a.payload, (started, lines.pop()))
                    });
                    Then::Turn(framing, hooks.collect())
                }
                None => Then::Reply(turn_without_answer(TurnEnd::Done)),
            }
        };
    let response = send_step(state, guard, &session, step, (body, room), then).await;
    state.metrics.upstream_first_byte_seconds.observe(started.elapsed().as_secs_f64());
    response
}

/// `POST …/v1/sessions/{id}/infile` of a relayed session: packets of the file a LOAD DATA
/// LOCAL asked for; the last piece ends with the empty packet and gets the rest of the answer.
async fn infile(
    state: &Arc<AppState>,
    caller: &Caller,
    session: Arc<Session>,
    step: Option<u64>,
    req: Step,
    last: bool,
) -> Result<Reply, Error> {
    let mut guard = session.lease().await?;
    state.refuse_if_draining()?;
    let awaits_file = |link: &RelayLink| {
        link.pending.as_ref().and_then(Framing::waiting_for) == Some(TurnEnd::AwaitFile)
    };
    if guard.as_mut().is_some_and(|link| !awaits_file(link)) {
        return Err(Error::BadRequest("no file is awaited".into()));
    }
    let (body, room) = match read_step_body(state, caller, &session, step, req).await? {
        StepBody::Whole(body, room) => (body, room),
        StepBody::Unfinished(have) => return Ok(uploads::unfinished(have)),
    };
    state.metrics.request_bytes.inc_by(body.len() as u64);
    let Some(link) = guard.as_mut() else { return Ok(upstream_gone()) };
    let Some(framing) = link.pending.as_mut() else {
        return Err(Error::BadRequest("no file is awaited".into()));
    };
    let last_seq = check_file_piece(&body, framing.last_seq(), last)
        .map_err(|e| Error::BadRequest(e.to_string()))?;
    begin(&session, step)?;
    framing.set_last_seq(last_seq);
    let hook = broken_turn_hook(&session, "login or file");
    // A piece before the last is answered at once; the last gets the rest of the turn.
    let then = move |link: &mut RelayLink, _: &AppState, _: &Arc<Session>, _: &Bytes| match link
        .pending
        .take_if(|_| last)
    {
        Some(mut framing) => {
            framing.resume();
            Then::Turn(framing, vec![hook])
        }
        None if last => Then::Reply(upstream_gone()),
        None => Then::Reply(no_content()),
    };
    send_step(state, guard, &session, step, (body, room), then).await
}

/// Room for the audit lines of `n` commands: within the caller's share (a quarter of
/// the queue: one identity's long commands cannot hold every place), then the places, all at
/// once; each waited for up to `body_timeout`, else [`Error::AuditBehind`].
async fn audit_room(
    state: &AppState,
    caller: &Caller,
    log: &AuditLog,
    n: usize,
) -> Result<Vec<Room>, Error> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let wait = state.config().body_timeout;
    let max = crate::audit::QUEUE / 4;
    let mut share = state.shares.take_within(&caller.id, Share::AuditLines, n, max, wait).await;
    let share = share.as_mut().ok_or(Error::AuditBehind)?;
    let mut places = log.room(n, wait).await.ok_or(Error::AuditBehind)?;
    let mut rooms = Vec::with_capacity(n);
    for _ in 0..n {
        let one = share.split_one().map(|s| Box::new(s) as Box<dyn Send + Sync>);
        rooms.extend(Room::split(&mut places, one));
    }
    Ok(rooms)
}

/// A duration in whole milliseconds, as an opened session's terms are told.
fn millis(d: std::time::Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

/// The files the statements of a request name for LOAD DATA LOCAL (a quick look for the word
/// first: most statements name none).
fn files_named(asked: &[crate::relay::request::Asked<'_>]) -> Vec<Vec<u8>> {
    let mut files = Vec::new();
    for query in asked.iter().filter(|a| may_ask_for_a_file(a.payload)) {
        files.extend(common::mysql::local_infile::named_files(&query.payload[1..]));
    }
    files
}
