//! The upstream connection pool: a session that ends normally parks its connection, reset,
//! under the key of what it was opened with; the next session with the same key takes it
//! instead of a fresh connect and login. Idle connections are reaped by the reaper's wheel.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use common::mysql::capability;
use common::wire::OpenSession;
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use sha1::{Digest, Sha1};

use crate::config::PoolConfig;
use crate::upstream;

/// A connection parked for less than this is handed out without a ping.
const TRUST_PARKED_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// Client flags that change a session; connections differing in them are never shared.
const SESSION_FLAGS: u32 =
    capability::FOUND_ROWS | capability::IGNORE_SPACE | capability::INTERACTIVE;

/// What a connection was opened with; only an identical request may reuse it. The password is
/// kept as a digest, never in clear.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    upstream: String,
    user: String,
    password_digest: [u8; 20],
    database: Option<String>,
    collation: u8,
    /// Client flags that shape the session (FOUND_ROWS, IGNORE_SPACE, INTERACTIVE).
    session_flags: u32,
    /// A relayed session's (never pooled: its login belongs to its client).
    relay: bool,
}

impl PoolKey {
    /// The session-shaping client flags.
    pub fn session_flags(&self) -> u32 {
        self.session_flags
    }

    /// The login collation.
    pub fn collation(&self) -> u8 {
        self.collation
    }

    /// The key of a session request.
    pub fn of(req: &OpenSession) -> Self {
        Self {
            upstream: req.upstream.clone(),
            user: req.user.clone(),
            password_digest: Sha1::digest(req.password.as_bytes()).into(),
            database: req.database.clone(),
            collation: req.collation,
            session_flags: req.client_flags & SESSION_FLAGS,
            relay: false,
        }
    }

    /// The key of every relayed session.
    pub fn relay() -> Self {
        Self {
            upstream: String::new(),
            user: String::new(),
            password_digest: [0; 20],
            database: None,
            collation: 0,
            session_flags: 0,
            relay: true,
        }
    }

    /// True for a relayed session's key.
    pub fn is_relay(&self) -> bool {
        self.relay
    }
}

/// An upstream connection and when it was made.
#[derive(Debug)]
pub struct Upstream {
    /// The connection.
    pub conn: Conn,
    /// When it was opened (for `max_lifetime`).
    pub born: Instant,
    /// Its LOCAL INFILE handler's link to the session using it.
    pub infile: std::sync::Arc<crate::infile::InfileBridge>,
}

#[derive(Debug)]
struct Idle {
    upstream: Upstream,
    id: u64,
    parked: Instant,
}

/// Counters of the pool.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Sessions served by a parked connection.
    pub hits: AtomicU64,
    /// Sessions that needed a new connection.
    pub misses: AtomicU64,
    /// Idle connections closed after `idle_timeout`.
    pub reaped: AtomicU64,
}

/// The pool.
#[derive(Debug)]
pub struct Pool {
    config: PoolConfig,
    idle: Mutex<HashMap<PoolKey, Vec<Idle>>>,
    next_id: AtomicU64,
    /// Counters.
    pub stats: PoolStats,
}

/// A parked connection's reaper timer: the key and the parking id.
pub type IdleTicket = (PoolKey, u64);

impl Pool {
    /// An empty pool.
    pub fn new(config: PoolConfig) -> Self {
        Self {
            config,
            idle: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            stats: PoolStats::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PoolKey, Vec<Idle>>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Idle connections parked now.
    pub fn idle_count(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    /// A healthy parked connection for `key` (most recently parked first), if any.
    pub async fn take(&self, key: &PoolKey) -> Option<Upstream> {
        loop {
            let idle = self.lock().get_mut(key).and_then(Vec::pop)?;
            let mut upstream = idle.upstream;
            // A connection parked a moment ago was healthy then; older ones are pinged first.
            let fresh = idle.parked.elapsed() < TRUST_PARKED_FOR;
            if upstream.born.elapsed() < self.config.max_lifetime
                && (fresh || upstream.conn.ping().await.is_ok())
            {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                return Some(upstream);
            }
            drop(upstream.conn.disconnect().await);
        }
    }

    /// Records that a session needed a new connection.
    pub fn record_miss(&self) {
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Resets a finished session's connection and parks it; returns the ticket the reaper
    /// needs to close it after `idle_timeout`, or `None` if it was closed instead.
    pub async fn park(&self, key: PoolKey, mut upstream: Upstream) -> Option<IdleTicket> {
        let full = self.lock().get(&key).is_some_and(|v| v.len() >= self.config.max_idle_per_key);
        let too_old = upstream.born.elapsed() >= self.config.max_lifetime;
        if full
            || too_old
            || self.config.max_idle_per_key == 0
            || reset(&mut upstream.conn, &key).await.is_err()
        {
            drop(upstream.conn.disconnect().await);
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let refused = {
            let mut idle = self.lock();
            let list = idle.entry(key.clone()).or_default();
            if list.len() < self.config.max_idle_per_key {
                list.push(Idle { upstream, id, parked: Instant::now() });
                None
            } else {
                Some(upstream)
            }
        };
        // Another session filled the key while this one was being reset.
        if let Some(upstream) = refused {
            drop(upstream.conn.disconnect().await);
            return None;
        }
        Some((key, id))
    }

    /// Removes a parked connection if it is still idle and has been for `idle_timeout`.
    pub fn reap(&self, ticket: &IdleTicket) -> Option<Conn> {
        let mut idle = self.lock();
        let list = idle.get_mut(&ticket.0)?;
        let at = list
            .iter()
            .position(|i| i.id == ticket.1 && i.parked.elapsed() >= self.config.idle_timeout)?;
        let conn = list.swap_remove(at).upstream.conn;
        if list.is_empty() {
            idle.remove(&ticket.0);
        }
        self.stats.reaped.fetch_add(1, Ordering::Relaxed);
        Some(conn)
    }

    /// Takes every parked connection (shutdown).
    pub fn drain(&self) -> Vec<Conn> {
        self.lock().drain().flat_map(|(_, v)| v.into_iter().map(|i| i.upstream.conn)).collect()
    }
}

/// Brings a used connection back to the state of a fresh login with `key`: COM_RESET_CONNECTION
/// (rolls back, drops temporary tables and variables), then the default database and the
/// collation of the login.
async fn reset(conn: &mut Conn, key: &PoolKey) -> mysql_async::Result<()> {
    conn.reset().await?;
    let current: Option<String> = conn.query_first("SELECT DATABASE()").await?.flatten();
    if current != key.database {
        match &key.database {
            Some(db) => conn.query_drop(format!("USE `{}`", db.replace('`', "``"))).await?,
            None => conn.change_user(Default::default()).await?,
        }
    }
    upstream::apply_session_flags(conn, key.session_flags).await?;
    upstream::apply_collation(conn, key.collation).await
}
