//! Shared state of a running transport: config, tokens, sessions, cached upstream versions
//! and counters.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use crate::auth::Tokens;
use crate::config::TransportConfig;
use crate::session::Session;
use crate::session::SessionTable;

/// Counters exported on `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Sessions opened since start.
    pub sessions_opened: AtomicU64,
    /// Sessions closed because their sidecar went silent.
    pub sessions_expired: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Requests refused for a bad or missing token.
    pub unauthorized: AtomicU64,
}

impl Metrics {
    /// Adds one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything request handlers share.
#[derive(Debug)]
pub struct AppState {
    /// The configuration.
    pub config: TransportConfig,
    /// Accepted tokens.
    pub tokens: Tokens,
    /// Open sessions.
    pub sessions: SessionTable,
    /// Version strings read from upstream greetings, by upstream name.
    pub versions: Mutex<HashMap<String, String>>,
    /// Counters.
    pub metrics: Metrics,
    /// New sessions, for the reaper to watch.
    pub reaper: mpsc::UnboundedSender<std::sync::Arc<Session>>,
}

impl AppState {
    /// State for `config`; new sessions are announced on `reaper`.
    pub fn new(
        config: TransportConfig,
        reaper: mpsc::UnboundedSender<std::sync::Arc<Session>>,
    ) -> Self {
        Self {
            reaper,
            tokens: Tokens::new(config.tokens.clone()),
            config,
            sessions: SessionTable::default(),
            versions: Mutex::new(HashMap::new()),
            metrics: Metrics::default(),
        }
    }

    /// The cached version of an upstream, if known.
    pub fn cached_version(&self, name: &str) -> Option<String> {
        self.versions.lock().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Caches the version of an upstream.
    pub fn cache_version(&self, name: &str, version: String) {
        self.versions.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_owned(), version);
    }

    /// Prometheus text exposition of the counters.
    pub fn render_metrics(&self) -> String {
        let m = &self.metrics;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "# TYPE sqltunnel_sessions_open gauge\nsqltunnel_sessions_open {}\n\
             # TYPE sqltunnel_sessions_opened_total counter\nsqltunnel_sessions_opened_total {}\n\
             # TYPE sqltunnel_sessions_expired_total counter\nsqltunnel_sessions_expired_total {}\n\
             # TYPE sqltunnel_commands_total counter\nsqltunnel_commands_total {}\n\
             # TYPE sqltunnel_unauthorized_total counter\nsqltunnel_unauthorized_total {}\n",
            self.sessions.len(),
            get(&m.sessions_opened),
            get(&m.sessions_expired),
            get(&m.commands),
            get(&m.unauthorized),
        )
    }
}
