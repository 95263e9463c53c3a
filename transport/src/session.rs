//! Sessions: one upstream connection per client session, in a table keyed by an unguessable id.
//! Hearing from a session is one atomic store; the reaper reads it when the session's timer
//! comes due (see `reaper.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::wire::SESSION_ID_BYTES;
use mysql_async::Conn;
use tokio::sync::Mutex as AsyncMutex;

use crate::Error;
use crate::pool::PoolKey;
use crate::relay::RelayLink;

/// One client session and its upstream connection.
#[derive(Debug)]
pub struct Session {
    /// The session id (hex of 128 random bits).
    pub id: String,
    /// What the connection was opened with (for parking it in the pool afterwards).
    pub key: PoolKey,
    /// When the upstream connection was made.
    pub born: Instant,
    /// Index of the token that opened it.
    pub token: usize,
    /// Its prepared statements.
    pub statements: crate::prepared::Statements,
    /// The upstream connection; `None` once closed. Held for the whole of a command.
    pub conn: Arc<AsyncMutex<Option<Conn>>>,
    /// LOCAL INFILE requests of the connection, answered through this session.
    pub infile: Arc<crate::infile::InfileBridge>,
    /// The relayed upstream connection of a relayed session (`None` for a library one, or
    /// once closed). Held for the whole of a turn.
    pub relay: Arc<AsyncMutex<Option<RelayLink>>>,
    origin: Instant,
    last_seen_ms: AtomicU64,
}

impl Session {
    /// Marks the session as heard from now.
    pub fn touch(&self) {
        self.last_seen_ms.store(self.origin.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// When the session was last heard from.
    pub fn last_seen(&self) -> Instant {
        self.origin + Duration::from_millis(self.last_seen_ms.load(Ordering::Relaxed))
    }

    /// True while a command runs on it.
    pub fn is_busy(&self) -> bool {
        self.conn.try_lock().is_err() || self.relay.try_lock().is_err()
    }

    /// True for a relayed session.
    pub fn is_relayed(&self) -> bool {
        self.key.is_relay()
    }
}

/// Session limits checked when a session is registered.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Most sessions in all.
    pub total: usize,
    /// Most sessions per token.
    pub per_token: usize,
    /// The token opening this one.
    pub token: usize,
}

/// The table of open sessions.
#[derive(Debug)]
pub struct SessionTable {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    origin: Instant,
}

impl Default for SessionTable {
    fn default() -> Self {
        Self { sessions: Mutex::new(HashMap::new()), origin: Instant::now() }
    }
}

impl SessionTable {
    /// Registers a new session for `conn`, unless `max` sessions are already open.
    pub fn insert(
        &self,
        key: PoolKey,
        upstream: crate::pool::Upstream,
        limits: SessionLimits,
    ) -> Result<Arc<Session>, (Error, Option<Conn>)> {
        let crate::pool::Upstream { conn, born, infile } = upstream;
        let slot = Arc::new(AsyncMutex::new(Some(conn)));
        let relay = Arc::new(AsyncMutex::new(None));
        self.register(key, born, limits, infile, slot.clone(), relay)
            .map_err(|e| (e, slot.try_lock().ok().and_then(|mut c| c.take())))
    }

    /// Registers a new relayed session for `link`, unless the limits are reached.
    pub fn insert_relay(
        &self,
        link: RelayLink,
        limits: SessionLimits,
        infile: Arc<crate::infile::InfileBridge>,
    ) -> Result<Arc<Session>, Error> {
        let conn = Arc::new(AsyncMutex::new(None));
        let relay = Arc::new(AsyncMutex::new(Some(link)));
        self.register(PoolKey::relay(), Instant::now(), limits, infile, conn, relay)
    }

    fn register(
        &self,
        key: PoolKey,
        born: Instant,
        limits: SessionLimits,
        infile: Arc<crate::infile::InfileBridge>,
        conn: Arc<AsyncMutex<Option<Conn>>>,
        relay: Arc<AsyncMutex<Option<RelayLink>>>,
    ) -> Result<Arc<Session>, Error> {
        let id = new_session_id()?;
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= limits.total {
            return Err(Error::TooManySessions(limits.total));
        }
        if sessions.values().filter(|s| s.token == limits.token).count() >= limits.per_token {
            return Err(Error::TooManySessions(limits.per_token));
        }
        let session = Arc::new(Session {
            id: id.clone(),
            key,
            born,
            token: limits.token,
            statements: crate::prepared::Statements::default(),
            conn,
            infile,
            relay,
            origin: self.origin,
            last_seen_ms: AtomicU64::new(0),
        });
        session.touch();
        sessions.insert(id, session.clone());
        Ok(session)
    }

    /// The session with this id, marked as heard from.
    pub fn get(&self, id: &str) -> Result<Arc<Session>, Error> {
        let session = lock(&self.sessions).get(id).cloned().ok_or(Error::SessionNotFound)?;
        session.touch();
        Ok(session)
    }

    /// Sessions opened with token `token`.
    pub fn count_for_token(&self, token: usize) -> usize {
        lock(&self.sessions).values().filter(|s| s.token == token).count()
    }

    /// True when the session is still in the table.
    pub fn contains(&self, id: &str) -> bool {
        lock(&self.sessions).contains_key(id)
    }

    /// Removes a session from the table and returns it.
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).remove(id)
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
}

/// Locks a std mutex, recovering from poisoning (the data stays consistent: plain maps).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A new session id: 128 bits from the OS's CSPRNG, as 32 hex digits.
fn new_session_id() -> Result<String, Error> {
    let mut bytes = [0u8; SESSION_ID_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_long_and_distinct() {
        let a = new_session_id().unwrap_or_default();
        let b = new_session_id().unwrap_or_default();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
