//! Shared state of a running transport: config, tokens, sessions, cached upstream versions
//! and counters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use crate::auth::Tokens;
use crate::config::{TransportConfig, UpstreamConfig};
use crate::pool::Pool;
use crate::reaper::Timer;
use crate::relay::link::UpstreamTlsLink;
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
    versions: tokio::sync::Mutex<HashMap<String, String>>,
    /// Counters.
    pub metrics: Metrics,
    /// Timers for the reaper to watch.
    pub reaper: mpsc::UnboundedSender<Timer>,
    /// Parked upstream connections.
    pub pool: Pool,
    /// TLS settings of relayed upstream links, built once per upstream.
    pub relay_tls: std::sync::Mutex<HashMap<String, Option<UpstreamTlsLink>>>,
}

impl AppState {
    /// State for `config`; new sessions are announced on `reaper`.
    pub fn new(config: TransportConfig, reaper: mpsc::UnboundedSender<Timer>) -> Self {
        Self {
            reaper,
            pool: Pool::new(config.pool.clone()),
            tokens: Tokens::new(config.tokens.clone()),
            config,
            sessions: SessionTable::default(),
            versions: tokio::sync::Mutex::new(HashMap::new()),
            metrics: Metrics::default(),
            relay_tls: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The version string an upstream greets with, probed once and cached. Concurrent callers
    /// wait for the one probe in flight (a flood of unauthenticated probes could get this host
    /// blocked by the server's `max_connect_errors`).
    pub async fn server_version(&self, upstream: &UpstreamConfig) -> Result<String, crate::Error> {
        let mut versions = self.versions.lock().await;
        if let Some(v) = versions.get(&upstream.name) {
            return Ok(v.clone());
        }
        let v = crate::upstream::probe_version(upstream, self.config.connect_timeout).await?;
        versions.insert(upstream.name.clone(), v.clone());
        Ok(v)
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
             # TYPE sqltunnel_unauthorized_total counter\nsqltunnel_unauthorized_total {}\n\
             # TYPE sqltunnel_pool_idle_connections gauge\nsqltunnel_pool_idle_connections {}\n\
             # TYPE sqltunnel_pool_hits_total counter\nsqltunnel_pool_hits_total {}\n\
             # TYPE sqltunnel_pool_misses_total counter\nsqltunnel_pool_misses_total {}\n\
             # TYPE sqltunnel_pool_reaped_total counter\nsqltunnel_pool_reaped_total {}\n",
            self.sessions.len(),
            get(&m.sessions_opened),
            get(&m.sessions_expired),
            get(&m.commands),
            get(&m.unauthorized),
            self.pool.idle_count(),
            get(&self.pool.stats.hits),
            get(&self.pool.stats.misses),
            get(&self.pool.stats.reaped),
        )
    }
}
