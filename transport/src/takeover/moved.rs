//! A session as it moves to another process in a take-over: its state, serialized (the
//! channel's messages carry a version), with its upstream socket beside it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::wire::LoginAs;
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::identity::Caller;
use crate::relay::RelayLink;
use crate::relay::link_state::LinkState;
use crate::resume::LastStep;
use crate::resume_room::ResumeRoom;
use crate::session::{Session, Who, lock};
use crate::state::AppState;

/// Everything of a session but its upstream socket.
#[derive(Serialize, Deserialize)]
pub struct MovedSession {
    /// The session id.
    pub id: String,
    /// The identity that opened it.
    pub owner: Caller,
    /// The upstream's name.
    pub upstream: String,
    /// The credentials of a `users` entry's login.
    pub logged_in_as: Option<LoginAs>,
    /// Who logged in and the database in use (for the audit log).
    pub who: Who,
    /// The text of each prepared statement by id (for the audit log).
    pub statements: Vec<(u32, String)>,
    /// The last step and where its kept answer stands (its bytes go beside the message).
    pub last: LastStep,
    /// Parked: its sidecar went silent.
    pub parked: bool,
    /// How long ago it was opened (milliseconds).
    pub age_ms: u64,
    /// A client logged in on it.
    pub logged_in: bool,
    /// The last answer left a transaction open.
    pub in_transaction: bool,
    /// The server waits for the client mid-exchange (a file, an auth step).
    pub awaiting_client: bool,
    /// Its upstream link, but the socket.
    pub link: LinkState,
}

impl MovedSession {
    /// What moves of `session`, whose link's state is `link` and last step `last` (its lock
    /// held: no turn runs).
    pub fn of(session: &Session, link: LinkState, last: LastStep) -> Self {
        let uses = &session.link_use;
        let statements = lock(&session.statements);
        Self {
            id: session.id.clone(),
            owner: (*session.owner).clone(),
            upstream: session.upstream.clone(),
            logged_in_as: lock(&session.logged_in_as).clone(),
            who: lock(&session.who).clone(),
            statements: statements.iter().map(|(id, text)| (*id, text.to_string())).collect(),
            last,
            parked: session.is_parked(),
            age_ms: session.opened.elapsed().as_millis() as u64,
            logged_in: uses.logged_in.load(Ordering::Acquire),
            in_transaction: uses.in_transaction.load(Ordering::Acquire),
            awaiting_client: uses.awaiting_client.load(Ordering::Acquire),
            link,
        }
    }

    /// Registers the session here, over `tcp`, its upstream socket, with `kept`, the bytes of
    /// its last answer kept for a resume: it goes on as it was, watched by the reaper and the
    /// idle watcher. A session whose identity may no longer reach its upstream here is ended
    /// as a reload would end it.
    pub fn adopt(
        self,
        tcp: std::net::TcpStream,
        kept: Vec<u8>,
        state: &Arc<AppState>,
    ) -> Result<(), Error> {
        let config = state.config();
        let upstream = config.upstream(&self.upstream).ok_or(Error::SessionNotFound)?;
        let link = RelayLink::from_state(tcp, self.link, state.upstream_tls(upstream)?)?;
        let opened = Instant::now().checked_sub(Duration::from_millis(self.age_ms));
        let owner = Arc::new(self.owner);
        let sessions = &state.sessions;
        let session = sessions.adopt(
            self.id,
            owner,
            &self.upstream,
            link,
            opened.unwrap_or_else(Instant::now),
        );
        *lock(&session.logged_in_as) = self.logged_in_as;
        *lock(&session.who) = self.who;
        let statements = self.statements.into_iter().map(|(id, text)| (id, Arc::from(text)));
        lock(&session.statements).extend(statements);
        let uses = &session.link_use;
        uses.logged_in.store(self.logged_in, Ordering::Release);
        uses.in_transaction.store(self.in_transaction, Ordering::Release);
        uses.awaiting_client.store(self.awaiting_client, Ordering::Release);
        session.resume.set_window(config.resume_window);
        let owner = session.owner_counts(&state.shares).clone();
        session.resume.set_budget(ResumeRoom::new(state.resume_budget.clone(), Some(owner)));
        session.resume.import(self.last, kept);
        if self.parked {
            session.park();
        }
        drop(state.reaper.send(session.clone()));
        tokio::spawn(crate::idle_watch::watch(state.clone(), session.clone()));
        if !state.identities().still_allows(&session.owner, &session.upstream) {
            let revoked = state.revoke(&session).into_iter().collect();
            crate::ending::end_revoked(state, revoked);
        }
        Ok(())
    }
}
