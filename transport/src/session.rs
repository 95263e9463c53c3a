//! Sessions: one relayed upstream connection per client session, in a table keyed by an
//! unguessable id. Hearing from a session is one atomic store; the reaper reads it when the
//! session's timer comes due (see `reaper.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use common::wire::LoginAs;
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::id_hash::IdHashing;
use crate::identity::{Caller, IdentityId};
use crate::relay::RelayLink;
use crate::relay::turn::{LinkGuard, LinkUse};
use crate::resume::Resumable;

/// One client session and its upstream connection.
#[derive(Debug)]
pub struct Session {
    /// The session id (hex of 128 random bits).
    pub id: String,
    /// The identity that opened it: only it may use the session.
    pub owner: Arc<Caller>,
    /// The upstream connection; `None` once closed. Held for the whole of a turn, and by the
    /// idle watcher between turns.
    pub link: Arc<AsyncMutex<Option<RelayLink>>>,
    /// Who uses the link.
    pub link_use: Arc<LinkUse>,
    /// The upstream's name.
    pub upstream: String,
    /// The upstream's id of the connection (its thread id, for `KILL QUERY`).
    pub connection_id: u32,
    /// Cancelled to cut the running turn short (its client gets error 1053). Shared with
    /// each turn by an `Arc` (a token's own clone takes its lock).
    pub cut: Arc<CancellationToken>,
    /// The credentials of a `users` entry's login: they can end the session's own statements.
    pub logged_in_as: Mutex<Option<LoginAs>>,
    /// Who logged in and the database in use, as far as the relay saw (for the audit log).
    pub who: Mutex<Who>,
    /// The text of each prepared statement by id (for the audit log; bounded).
    pub statements: Mutex<HashMap<u32, Arc<str>>>,
    /// The last step and its answer, for a resume after a broken connection.
    pub resume: Arc<Resumable>,
    /// What arrived of the body of a step that has not run yet (a resumable upload).
    pub upload: crate::upload_held::Held,
    /// When it was opened (a session not logged in has `connect_timeout` to).
    pub opened: Instant,
    /// Its sidecar went silent with no transaction open: kept for `park_timeout`.
    parked: AtomicBool,
    /// Handed over to a new process (a take-over): a step that reaches this one is sent again.
    moved: AtomicBool,
    origin: Instant,
    last_seen_ms: AtomicU64,
    /// The span its requests run in, made once (see [`Session::span`]).
    span: OnceLock<tracing::Span>,
    /// Its owner's counts of shares, found at its first body (see [`Session::owner_counts`]).
    owner_counts: OnceLock<Arc<crate::shares::IdentityCounts>>,
}

impl Session {
    /// Its owner's counts of shares: found once, then at hand for each step's body.
    pub fn owner_counts(
        &self,
        shares: &crate::shares::Shares,
    ) -> &Arc<crate::shares::IdentityCounts> {
        self.owner_counts.get_or_init(|| shares.counts(&self.owner.id))
    }

    /// The span a request of the session runs in when debug lines are on, so that every
    /// line logged about it names the session and its identity. Lines at info and above name
    /// the session in their own fields: entering and leaving a span at each poll cost about
    /// 1,500 instructions per command (callgrind), at the default level. Made at the first
    /// request that needs it, and kept: a span made each request cost about 5,000, most of
    /// them formatting its fields again.
    pub fn span(&self) -> tracing::Span {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return tracing::Span::none();
        }
        let make = || {
            let id = common::wire::session_label(&self.id);
            tracing::info_span!("session", id = %id, identity = %self.owner.name)
        };
        self.span.get_or_init(make).clone()
    }

    /// Marks the session as heard from at `now`, unless later already (a parked one is back).
    pub fn touch(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.origin).as_millis() as u64;
        self.last_seen_ms.fetch_max(ms, Ordering::Relaxed);
        if self.parked.swap(false, Ordering::AcqRel) {
            tracing::info!(session = %common::wire::session_label(&self.id), "a parked session's sidecar is back");
        }
    }

    /// Parks the session (its sidecar went silent with no transaction open).
    pub fn park(&self) {
        self.parked.store(true, Ordering::Release);
        self.upload.forget();
    }

    /// True while the session is parked.
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Acquire)
    }

    /// Marks the session handed over (its link's lock held: no turn runs).
    pub fn mark_moved(&self, moved: bool) {
        self.moved.store(moved, Ordering::Release);
    }

    /// True once the session was handed over to a new process.
    pub fn is_moved(&self) -> bool {
        self.moved.load(Ordering::Acquire)
    }

    /// True once a client logged in on it.
    pub fn is_logged_in(&self) -> bool {
        self.link_use.logged_in.load(Ordering::Acquire)
    }

    /// True while the server waits for the client mid-exchange (a file, an auth step).
    pub fn awaits_client(&self) -> bool {
        self.link_use.awaiting_client.load(Ordering::Acquire)
    }

    /// True when the last answer left a transaction open.
    pub fn in_transaction(&self) -> bool {
        self.link_use.in_transaction.load(Ordering::Acquire)
    }

    /// When the session was last heard from.
    pub fn last_seen(&self) -> Instant {
        self.origin + Duration::from_millis(self.last_seen_ms.load(Ordering::Relaxed))
    }

    /// True while a turn runs on it. A turn parked for a resume does not count: a session
    /// whose sidecar never comes back expires.
    pub fn is_busy(&self) -> bool {
        self.link_use.in_turn.load(Ordering::Acquire) && !self.resume.is_parked()
    }

    /// True while a turn holds the link, running or waiting for a resume.
    pub fn has_turn(&self) -> bool {
        self.link_use.in_turn.load(Ordering::Acquire)
    }

    /// The link for one turn; [`Error::SessionBusy`] while another turn holds it. (The idle
    /// watcher holds it only for a read that does not wait.)
    pub async fn lease(&self) -> Result<LinkGuard, Error> {
        // A new step while one is parked: the sidecar gave the old one up; so is its link.
        self.resume.abandon();
        if self.is_busy() {
            return Err(Error::SessionBusy);
        }
        // Most often free (the idle watcher holds it only for a read that does not wait).
        let mut guard = match self.link.clone().try_lock_owned() {
            Ok(guard) => guard,
            Err(_) => self.link.clone().lock_owned().await,
        };
        if self.is_moved() {
            return Err(Error::SessionMoved);
        }
        if let Some(link) = guard.as_mut() {
            link.follow_thread();
        }
        self.link_use.in_turn.store(true, Ordering::Release);
        Ok(LinkGuard::new(guard, self.link_use.clone()))
    }

    /// Takes the link out to close it (quit, expiry, shutdown), after any turn on it.
    pub async fn take_link(&self) -> Option<RelayLink> {
        // A turn parked for a resume holds the link: it ends here, and the answer kept for a
        // resume goes with it.
        self.resume.release();
        let link = self.link.lock().await.take();
        // The idle watcher finds it closed and ends (it used to wait for good, holding the
        // session).
        if let Some(watcher) = self.link_use.watcher.get() {
            watcher.wake_by_ref();
        }
        link
    }
}

/// Who a session logged in as, and the database in use.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Who {
    /// The user name of the login (or of the last COM_CHANGE_USER by a `users` entry).
    pub user: Option<String>,
    /// The database named at login or by the last COM_INIT_DB.
    pub database: Option<String>,
    /// The user a COM_CHANGE_USER asked for while its authentication goes on (an auth
    /// switch): `user` once the server says OK.
    pub changing_to: Option<String>,
}

/// Session limits checked when a session is registered.
#[derive(Debug, Clone)]
pub struct SessionLimits {
    /// Most sessions in all.
    pub total: usize,
    /// Most sessions per identity (`max_sessions_per_token`).
    pub per_token: usize,
    /// The identity opening this one.
    pub owner: Arc<Caller>,
}

/// The table of open sessions.
#[derive(Debug)]
pub struct SessionTable {
    /// By id: ids are random, made here, so they are hashed cheaply ([`IdHashing`]).
    sessions: Mutex<HashMap<String, Arc<Session>, IdHashing>>,
    origin: Instant,
}

impl Default for SessionTable {
    fn default() -> Self {
        Self { sessions: Mutex::new(HashMap::default()), origin: Instant::now() }
    }
}

impl SessionTable {
    /// Registers a new session for `link` to the upstream named `upstream`, unless the limits
    /// are reached.
    pub fn insert(
        &self,
        link: RelayLink,
        upstream: &str,
        limits: SessionLimits,
    ) -> Result<Arc<Session>, Error> {
        let id = crate::id_hash::new_session_id()?;
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= limits.total {
            return Err(Error::TooManySessions(limits.total));
        }
        if sessions.values().filter(|s| s.owner.id == limits.owner.id).count() >= limits.per_token {
            let identity = limits.owner.name.to_string();
            return Err(Error::IdentityLimit { identity, limit: "max_sessions_per_token" });
        }
        let now = Instant::now();
        let session = Arc::new(self.make(id.clone(), limits.owner, upstream, link, now));
        session.touch(now);
        sessions.insert(id, session.clone());
        Ok(session)
    }

    /// Registers a session moved here from another process (a take-over), opened `opened`;
    /// the limits do not apply: it is not a new one.
    pub fn adopt(
        &self,
        id: String,
        owner: Arc<Caller>,
        upstream: &str,
        link: RelayLink,
        opened: Instant,
    ) -> Arc<Session> {
        let session = Arc::new(self.make(id.clone(), owner, upstream, link, opened));
        session.touch(Instant::now());
        lock(&self.sessions).insert(id, session.clone());
        session
    }

    fn make(
        &self,
        id: String,
        owner: Arc<Caller>,
        upstream: &str,
        mut link: RelayLink,
        opened: Instant,
    ) -> Session {
        link.session = common::wire::session_label(&id).into();
        Session {
            id,
            owner,
            upstream: upstream.to_owned(),
            connection_id: link.connection_id,
            cut: Arc::new(CancellationToken::new()),
            logged_in_as: Mutex::new(None),
            who: Mutex::default(),
            statements: Mutex::default(),
            resume: Arc::default(),
            upload: crate::upload_held::Held::default(),
            link: Arc::new(AsyncMutex::new(Some(link))),
            link_use: Arc::default(),
            parked: AtomicBool::new(false),
            moved: AtomicBool::new(false),
            opened,
            origin: self.origin,
            last_seen_ms: AtomicU64::new(0),
            span: OnceLock::new(),
            owner_counts: OnceLock::new(),
        }
    }

    /// The session with this id, if the identity `owner` opened it, marked as heard from at
    /// `now`. Another identity's session is as unknown as an id never issued.
    pub fn get(&self, id: &str, owner: &IdentityId, now: Instant) -> Result<Arc<Session>, Error> {
        let found = lock(&self.sessions).get(id).filter(|s| s.owner.id == *owner).cloned();
        let Some(session) = found else { return Err(Error::SessionNotFound) };
        session.touch(now);
        Ok(session)
    }

    /// The span of session `id` if the identity `owner` opened it (else none).
    pub fn span_of(&self, id: &str, owner: &IdentityId) -> tracing::Span {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return tracing::Span::none();
        }
        let session = lock(&self.sessions).get(id).filter(|s| s.owner.id == *owner).cloned();
        session.map_or_else(tracing::Span::none, |session| session.span())
    }

    /// Sessions parked: in all, and of the identity `owner`.
    pub fn parked(&self, owner: &IdentityId) -> (usize, usize) {
        let sessions = lock(&self.sessions);
        let parked = sessions.values().filter(|s| s.is_parked());
        parked.fold((0, 0), |(all, own), s| (all + 1, own + usize::from(s.owner.id == *owner)))
    }

    /// Sessions parked now.
    pub fn parked_count(&self) -> usize {
        lock(&self.sessions).values().filter(|s| s.is_parked()).count()
    }

    /// Sessions opened by the identity `owner`: in all, and those not logged in yet.
    pub fn count_for(&self, owner: &IdentityId) -> (usize, usize) {
        let sessions = lock(&self.sessions);
        let own = sessions.values().filter(|s| s.owner.id == *owner);
        own.fold((0, 0), |(all, out), s| (all + 1, out + usize::from(!s.is_logged_in())))
    }

    /// Every open session (a reload checks each one's access again).
    pub fn all(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions).values().cloned().collect()
    }

    /// The session `id`, whoever opened it (for the reaper and shutdown, never for a request).
    pub fn lookup(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// True when the session is still in the table.
    pub fn contains(&self, id: &str) -> bool {
        lock(&self.sessions).contains_key(id)
    }

    /// Puts a session back in the table (a take-over that failed before it moved).
    pub fn put_back(&self, session: Arc<Session>) {
        lock(&self.sessions).insert(session.id.clone(), session);
    }

    /// Removes a session from the table and returns it.
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).remove(id)
    }

    /// Removes a session from the table and returns it, if the identity `owner` opened it.
    pub fn remove_owned(&self, id: &str, owner: &IdentityId) -> Option<Arc<Session>> {
        let mut sessions = lock(&self.sessions);
        if sessions.get(id)?.owner.id != *owner {
            return None;
        }
        sessions.remove(id)
    }

    /// Number of open sessions.
    pub fn len(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// True when no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes and returns every session (shutdown).
    pub fn drain(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions).drain().map(|(_, s)| s).collect()
    }

    /// Removes and returns the sessions no turn runs on.
    pub fn remove_idle(&self) -> Vec<Arc<Session>> {
        let mut sessions = lock(&self.sessions);
        let idle: Vec<String> =
            sessions.iter().filter(|(_, s)| !s.is_busy()).map(|(id, _)| id.clone()).collect();
        idle.iter().filter_map(|id| sessions.remove(id)).collect()
    }
}

/// Locks a std mutex, recovering from poisoning (the data stays consistent: plain maps).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
