//! Shared state of a running transport: config, tokens, sessions, TLS settings of upstream
//! links, and counters.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::config::{TransportConfig, UpstreamConfig};
use crate::identity::{Caller, Identities, IdentityId};
use crate::refusals::Refusals;
use crate::relay::link::UpstreamTlsLink;
use crate::session::{Session, SessionLimits, SessionTable, lock};

/// The share of sessions not logged in yet, as its config key names it.
const LOGGING_IN: &str = "max_sessions_logging_in_per_token";

/// Most sessions revoked by a reload remembered (to tell their next request why).
const MAX_REVOKED: usize = 4096;

/// Everything request handlers share.
#[derive(Debug)]
pub struct AppState {
    /// The configuration, replaced whole by a reload.
    config: RwLock<Arc<TransportConfig>>,
    /// Who may come in, replaced by a reload.
    identities: RwLock<Arc<Identities>>,
    /// Sessions ended because their identity lost its access, with it (bounded).
    revoked: std::sync::Mutex<std::collections::VecDeque<(String, Arc<Caller>)>>,
    /// Open sessions.
    pub sessions: SessionTable,
    /// Metrics.
    pub metrics: crate::metrics::Metrics,
    /// Peers that sent wrong tokens.
    pub refusals: Refusals,
    /// Room for command and file bodies held at once (`max_inflight_bytes`), a permit a byte.
    pub inflight: Arc<tokio::sync::Semaphore>,
    /// What each identity holds of its shares (streams, connects, body bytes).
    pub shares: Arc<crate::shares::Shares>,
    /// Room for answers kept for resumes, all sessions together (`max_resume_bytes`).
    pub resume_budget: Arc<crate::resume_room::ResumeBudget>,
    /// Sessions that ended lately, and each identity's news of them for its keep-alives.
    pub ended: crate::ended::EndedSessions,
    /// New sessions for the reaper to watch.
    pub reaper: mpsc::UnboundedSender<Arc<Session>>,
    /// TLS settings of upstream links, built once per upstream.
    upstream_tls: std::sync::Mutex<HashMap<String, Option<UpstreamTlsLink>>>,
    /// Cancelled when shutdown begins: no new session, command or login is taken.
    pub draining: tokio_util::sync::CancellationToken,
    /// Whether each upstream can be reached, as last seen.
    pub readiness: crate::readiness::Readiness,
    /// Requests that asked to close their connection (a proxy without keep-alive).
    pub churn: crate::churn::Churn,
    /// A take-over in progress: sessions arriving here, or handed over from here.
    pub handover: crate::handover::Handover,
    /// The audit log, when `audit` is configured (set once at start).
    pub audit: std::sync::OnceLock<Arc<crate::audit::AuditLog>>,
}

impl AppState {
    /// State for `config`; new sessions are announced on `reaper`.
    pub fn new(
        config: TransportConfig,
        reaper: mpsc::UnboundedSender<Arc<Session>>,
    ) -> Result<Self, crate::Error> {
        let identities = identities_of(&config)?;
        Ok(Self {
            reaper,
            inflight: Arc::new(tokio::sync::Semaphore::new(config.max_inflight_bytes)),
            resume_budget: Arc::new(crate::resume_room::ResumeBudget::new(
                config.max_resume_bytes,
                config.max_resume_bytes_per_token,
            )),
            identities: RwLock::new(Arc::new(identities)),
            revoked: std::sync::Mutex::default(),
            config: RwLock::new(Arc::new(config)),
            sessions: SessionTable::default(),
            metrics: crate::metrics::Metrics::new(),
            refusals: Refusals::default(),
            shares: Arc::default(),
            draining: tokio_util::sync::CancellationToken::new(),
            readiness: crate::readiness::Readiness::default(),
            audit: std::sync::OnceLock::new(),
            churn: crate::churn::Churn::default(),
            handover: crate::handover::Handover::default(),
            ended: crate::ended::EndedSessions::default(),
            upstream_tls: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<TransportConfig> {
        read(&self.config).clone()
    }

    /// The identities accepted now.
    pub fn identities(&self) -> Arc<Identities> {
        read(&self.identities).clone()
    }

    /// Applies a reloaded configuration (SIGHUP): tokens, limits, the other timeouts and
    /// upstreams take effect for what comes next; what is set up once at start (`listen`,
    /// `tls`, `worker_threads`, `max_connections`, `max_inflight_bytes`, `idle_timeout`,
    /// `audit`, `metrics_listen`, the log format) keeps its value and is named in a warning.
    /// The audit file is opened again (a log rotation moved it). Returns the sessions whose
    /// identity is gone or may no longer reach their upstream, taken out of the table: the
    /// caller ends them ([`crate::revoke`]).
    pub fn reload(&self, mut new: TransportConfig) -> Vec<Arc<Session>> {
        let identities = Identities::new(
            &new.tokens,
            &new.identities,
            new.oidc.as_ref(),
            Some(&self.identities()),
        );
        let identities = match identities {
            Ok(identities) => identities,
            Err(e) => {
                warn!(error = %e, "reload refused; the running configuration stays");
                return Vec::new();
            }
        };
        let old = self.config();
        let fixed = [
            ("listen", old.listen != new.listen),
            ("tls", old.tls != new.tls),
            ("worker_threads", old.worker_threads != new.worker_threads),
            ("max_connections", old.max_connections != new.max_connections),
            ("max_inflight_bytes", old.max_inflight_bytes != new.max_inflight_bytes),
            ("log.format", old.log.format != new.log.format),
            ("log.file", old.log.file != new.log.file),
            ("idle_timeout", old.idle_timeout != new.idle_timeout),
            ("audit", old.audit != new.audit),
            ("metrics_listen", old.metrics_listen != new.metrics_listen),
            ("take_over_socket", old.take_over_socket != new.take_over_socket),
        ];
        for (key, _) in fixed.iter().filter(|(_, changed)| *changed) {
            warn!(key, "this setting cannot change in a running transport: restart to apply it");
        }
        (new.listen, new.tls, new.worker_threads) =
            (old.listen, old.tls.clone(), old.worker_threads);
        (new.max_connections, new.log.format) = (old.max_connections, old.log.format);
        new.log.file = old.log.file.clone();
        new.max_inflight_bytes = old.max_inflight_bytes;
        (new.idle_timeout, new.metrics_listen) = (old.idle_timeout, old.metrics_listen);
        new.audit = old.audit.clone();
        new.take_over_socket = old.take_over_socket.clone();
        if let Some(audit) = self.audit.get() {
            audit.reopen();
        }
        self.resume_budget.set_limits(new.max_resume_bytes, new.max_resume_bytes_per_token);
        let count = identities.count();
        *write(&self.identities) = Arc::new(identities);
        lock(&self.upstream_tls).clear();
        info!(identities = count, upstreams = new.upstreams.len(), "configuration reloaded");
        *write(&self.config) = Arc::new(new);
        let identities = self.identities();
        let sessions = self.sessions.all().into_iter();
        sessions
            .filter(|s| !identities.still_allows(&s.owner, &s.upstream))
            .filter_map(|s| self.revoke(&s))
            .collect()
    }

    /// Takes `session` out of the table because its identity may no longer have it, and
    /// remembers why for its next request; `None` when it was gone already. The caller ends it.
    pub fn revoke(&self, session: &Session) -> Option<Arc<Session>> {
        let session = self.sessions.remove(&session.id)?;
        let mut list = lock(&self.revoked);
        if list.len() >= MAX_REVOKED {
            list.pop_front();
        }
        list.push_back((session.id.clone(), session.owner.clone()));
        Some(session)
    }

    /// [`crate::Error::AccessRevoked`] when a reload revoked session `id` of `owner`, else
    /// [`crate::Error::SessionNotFound`].
    pub fn session_gone(&self, id: &str, owner: &IdentityId) -> crate::Error {
        let revoked = lock(&self.revoked);
        match revoked.iter().find(|(s, caller)| s == id && caller.id == *owner) {
            Some((_, caller)) => crate::Error::AccessRevoked(caller.name.to_string()),
            None => crate::Error::SessionNotFound,
        }
    }

    /// The limits a new session of `owner` is checked against; an error when already reached.
    pub fn session_limits(&self, owner: &Arc<Caller>) -> Result<SessionLimits, crate::Error> {
        let config = self.config();
        let max_sessions = config.max_sessions;
        let per_token = config.max_sessions_per_token;
        let limits = SessionLimits { total: max_sessions, per_token, owner: owner.clone() };
        if self.sessions.len() >= max_sessions {
            return Err(crate::Error::TooManySessions(max_sessions));
        }
        let (own, logging_in) = self.sessions.count_for(&owner.id);
        if own >= per_token {
            let identity = owner.name.to_string();
            return Err(crate::Error::IdentityLimit { identity, limit: "max_sessions_per_token" });
        }
        if logging_in >= config.max_sessions_logging_in_per_token {
            return Err(crate::Error::IdentityLimit {
                identity: owner.name.to_string(),
                limit: LOGGING_IN,
            });
        }
        Ok(limits)
    }

    /// [`Self::session_limits`], waiting up to `connect_timeout` while the only limit reached
    /// is the identity's sessions not logged in yet (a burst of logins of one pool: each
    /// takes a round trip, and the next may go).
    pub async fn session_limits_within(
        &self,
        owner: &Arc<Caller>,
    ) -> Result<SessionLimits, crate::Error> {
        let deadline = tokio::time::Instant::now() + self.config().connect_timeout;
        loop {
            match self.session_limits(owner) {
                Err(crate::Error::IdentityLimit { limit: LOGGING_IN, .. })
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(crate::Error::IdentityLimit { limit, .. }) => {
                    return Err(self.identity_limit(owner, limit));
                }
                other => return other,
            }
        }
    }

    /// The error for a request of `caller` beyond its share `limit` (a config key), counted.
    pub fn identity_limit(&self, caller: &Caller, limit: &'static str) -> crate::Error {
        self.metrics.identity_limited(&caller.label, limit);
        crate::Error::IdentityLimit { identity: caller.name.to_string(), limit }
    }

    /// A place among `caller`'s upstream connects in flight, waiting up to `connect_timeout`
    /// for one of its own to end (others' never wait for it).
    pub async fn take_opening(
        &self,
        caller: &Caller,
    ) -> Result<crate::shares::Taken, crate::Error> {
        let config = self.config();
        let (max, wait) = (config.max_opening_per_token, config.connect_timeout);
        let share = crate::shares::Share::Opening;
        let taken = self.shares.take_within(&caller.id, share, 1, max, wait).await;
        taken.ok_or_else(|| self.identity_limit(caller, share.key()))
    }

    /// Takes `amount` of `caller`'s `share`, or says which share it reached.
    pub fn take_share(
        &self,
        caller: &Caller,
        share: crate::shares::Share,
        amount: usize,
    ) -> Result<crate::shares::Taken, crate::Error> {
        self.take_share_of(caller, &self.shares.counts(&caller.id), share, amount)
    }

    /// [`Self::take_share`] with the caller's `counts` at hand (a session keeps them).
    pub fn take_share_of(
        &self,
        caller: &Caller,
        counts: &Arc<crate::shares::IdentityCounts>,
        share: crate::shares::Share,
        amount: usize,
    ) -> Result<crate::shares::Taken, crate::Error> {
        let config = self.config();
        let max = match share {
            crate::shares::Share::Streams => config.max_streams_per_token,
            crate::shares::Share::Opening => config.max_opening_per_token,
            crate::shares::Share::InflightBytes => config.max_inflight_bytes_per_token,
            crate::shares::Share::ResumeBytes => {
                usize::try_from(config.max_resume_bytes_per_token).unwrap_or(usize::MAX)
            }
            crate::shares::Share::Connections => config.max_connections_per_token,
            crate::shares::Share::AuditLines => crate::audit::QUEUE / 4,
        };
        self.shares
            .take_of(counts, share, amount, max)
            .ok_or_else(|| self.identity_limit(caller, share.key()))
    }

    /// [`crate::Error::ShuttingDown`] once shutdown has begun; [`crate::Error::SessionMoved`]
    /// while a new process takes this one over, and after (the sidecar sends it again there).
    pub fn refuse_if_draining(&self) -> Result<(), crate::Error> {
        if self.handover.is_leaving() {
            return Err(crate::Error::SessionMoved);
        }
        if self.draining.is_cancelled() { Err(crate::Error::ShuttingDown) } else { Ok(()) }
    }

    /// Records that session `id` of `owner` ended (the transport ended it), and wakes the
    /// keep-alives waiting for news.
    pub fn session_ended(&self, id: &str, owner: &IdentityId, reset: bool) {
        self.ended.record(id, owner, reset, false);
    }

    /// [`Self::session_ended`] for a session whose upstream closed its connection (`reset`:
    /// with a reset) while it was idle.
    pub fn session_closed_by_upstream(&self, id: &str, owner: &IdentityId, reset: bool) {
        self.ended.record(id, owner, reset, true);
    }

    /// True when session `id` of `owner` ended lately because its upstream closed it.
    pub fn closed_by_upstream(&self, id: &str, owner: &IdentityId) -> bool {
        self.ended.closed_by_upstream(id, owner)
    }

    /// The TLS settings of links to `upstream`, built on first use.
    pub fn upstream_tls(
        &self,
        upstream: &UpstreamConfig,
    ) -> Result<Option<UpstreamTlsLink>, crate::Error> {
        let mut cache = lock(&self.upstream_tls);
        if let Some(tls) = cache.get(&upstream.name) {
            return Ok(tls.clone());
        }
        let tls = crate::relay::tls::upstream_tls(upstream)?;
        cache.insert(upstream.name.clone(), tls.clone());
        Ok(tls)
    }
}

/// The identities of `config`.
fn identities_of(config: &TransportConfig) -> Result<Identities, crate::Error> {
    Identities::new(&config.tokens, &config.identities, config.oidc.as_ref(), None)
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}
