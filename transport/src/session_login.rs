//! A session's login steps: the client's handshake response and auth packets relayed to the
//! upstream, or the transport's own login (and COM_CHANGE_USER) for a `users` entry.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use common::mysql::packet;
use common::wire::{LoginAs, StepKind, TurnEnd, encode_packets, encode_turn, session_label};
use http::StatusCode;
use tracing::{debug, info, warn};

use crate::Error;
use crate::relay::handshake::login_names;
use crate::relay::link::LinkError;
use crate::relay::turn::LinkGuard;
use crate::relay::{Expect, Framing, Phase};
use crate::reply::ResponseBody;
use crate::reply::{Reply, frames};
use crate::request_body::{MAX_CONTROL_BODY, read_body};
use crate::session::{Session, Who, lock};
use crate::state::AppState;
use crate::steps::Step;
use crate::steps::{begin, remember};
use crate::turn_reply::{turn, uncancelled, upstream_gone};

/// `POST …/v1/sessions/{id}/login`: the client's handshake response or its next auth packet
/// (at login or in COM_CHANGE_USER).
pub(crate) async fn login(
    state: &Arc<AppState>,
    session: Arc<Session>,
    step: Option<u64>,
    req: Step,
) -> Result<Reply, Error> {
    let guard = session.lease().await?;
    state.refuse_if_draining()?;
    let as_json = req.head.kind == StepKind::LoginAs;
    let body = read_body(req, MAX_CONTROL_BODY, state.config().body_timeout).await?;
    // Once a byte goes upstream the login runs to its end, even if this request goes away.
    uncancelled(login_steps(state.clone(), guard, session, step, body, as_json)).await?
}

/// The login step once its body is in: sent upstream, then answered with the upstream's turn.
async fn login_steps(
    state: Arc<AppState>,
    mut guard: LinkGuard,
    session: Arc<Session>,
    step: Option<u64>,
    body: Bytes,
    as_json: bool,
) -> Result<Reply, Error> {
    let (state, id) = (state.as_ref(), session.id.as_str());
    let Some(link) = guard.as_mut() else { return Ok(upstream_gone()) };
    if as_json {
        let login: LoginAs = serde_json::from_slice(&body)
            .map_err(|e| Error::BadRequest(format!("invalid login: {e}")))?;
        begin(&session, step)?;
        let response = login_as(state, guard, &login, &session).await;
        return Ok(remember(&session, step, response?));
    }
    let sent = match (&link.phase, link.pending.take()) {
        (Phase::Greeted, _) => {
            begin(&session, step)?;
            let (user, database) = login_names(&body);
            *lock(&session.who) = Who { user, database, changing_to: None };
            let caps = link.send_handshake_response(BytesMut::from(&body[..])).await;
            caps.map(|_| Framing::new(Expect::Login, link.shape))
        }
        (_, Some(mut framing)) if framing.waiting_for() == Some(TurnEnd::AwaitAuth) => {
            if let Err(e) = begin(&session, step) {
                link.pending = Some(framing);
                return Err(e);
            }
            framing.resume();
            let seq = link.last_seq.wrapping_add(1);
            link.write_packet(&body, seq).await.map(|()| framing).map_err(Into::into)
        }
        (_, pending) => {
            link.pending = pending;
            return Err(Error::BadRequest("no authentication step is awaited".into()));
        }
    };
    let response = match sent {
        Ok(framing) => turn(state, guard, framing, &session, step).await,
        Err(LinkError::BadLogin(why)) => return Err(Error::BadRequest(why.into())),
        Err(LinkError::Io(e)) => {
            debug!(session = %session_label(id), error = %e, "upstream lost during login");
            *guard = None;
            upstream_gone()
        }
    };
    Ok(remember(&session, step, response))
}

/// The transport logs in itself (or, on a logged-in connection, changes user), with a `users`
/// entry's upstream credentials; the client gets the server's final OK or ERR.
async fn login_as(
    state: &AppState,
    mut guard: LinkGuard,
    login: &LoginAs,
    session: &Session,
) -> Result<Reply, Error> {
    let id = session.id.as_str();
    let Some(link) = guard.as_mut() else { return Ok(upstream_gone()) };
    let change_user = match link.phase {
        Phase::Greeted => false,
        Phase::Ready if link.pending.is_none() => true,
        _ => return Err(Error::BadRequest("the login has already started".into())),
    };
    let timeout = state.config().connect_timeout;
    let steps = async {
        if change_user { link.change_user_as(login).await } else { link.login_as(login).await }
    };
    let outcome = match tokio::time::timeout(timeout, steps).await {
        Ok(outcome) => outcome,
        Err(_) => Err(LinkError::Io(std::io::ErrorKind::TimedOut.into())),
    };
    let mut out = BytesMut::new();
    let end = match outcome {
        Ok(last) => {
            encode_packets(&mut out, &last);
            if last.get(4) == Some(&packet::OK) {
                link.phase = Phase::Ready;
                guard.link_use().logged_in.store(true, std::sync::atomic::Ordering::Release);
                *lock(&session.logged_in_as) = Some(LoginAs { database: None, ..login.clone() });
                let who = Who {
                    user: Some(login.user.clone()),
                    database: login.database.clone(),
                    changing_to: None,
                };
                *lock(&session.who) = who;
                TurnEnd::Done
            } else if change_user {
                TurnEnd::Done
            } else {
                info!(session = %session_label(id), user = %login.user, "upstream refused a users entry's login");
                TurnEnd::Closed
            }
        }
        Err(LinkError::BadLogin(why)) => {
            warn!(session = %session_label(id), user = %login.user, reason = why, "cannot log in upstream");
            return Err(Error::UpstreamUnreachable { name: "upstream".into(), reason: why.into() });
        }
        Err(LinkError::Io(e)) => {
            debug!(session = %session_label(id), error = %e, "upstream lost during login");
            TurnEnd::Closed
        }
    };
    if end == TurnEnd::Closed {
        *guard = None;
    }
    encode_turn(&mut out, end);
    Ok(frames(StatusCode::OK, ResponseBody::from(out.freeze()), None))
}
