//! What every client connection shares: the config, the transport client, the live sessions
//! kept alive by heartbeats, TLS for clients, the greeting prepared ahead, and the affinity
//! keys that keep a session on one transport behind a hashing proxy.

use std::sync::{Arc, OnceLock};

use common::shards::Shards;
use common::wire::OpenRelay;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::Error;
use crate::config::SidecarConfig;
use crate::greetings::Greetings;
use crate::live::LiveSessions;
use crate::tunnel::TunnelClient;

/// Affinity keys per sidecar.
pub const AFFINITY_BUCKETS: usize = 16;

/// State shared by every client connection.
pub struct Shared {
    /// The configuration.
    pub config: SidecarConfig,
    /// The HTTP client to the transport.
    pub tunnel: TunnelClient,
    /// Sessions kept alive by heartbeats.
    pub live: LiveSessions,
    /// TLS for clients that send an SSLRequest, when enabled.
    pub client_tls: Option<tokio_rustls::TlsAcceptor>,
    /// A relayed session prepared ahead for the next client.
    pub greetings: Arc<Greetings>,
    /// Room for client commands held at once (`max_inflight_bytes`), a permit a byte.
    pub inflight: Arc<tokio::sync::Semaphore>,
    /// Cancelled when shutdown begins: idle clients are closed, running commands go on.
    pub draining: CancellationToken,
    /// Cancelled when the shutdown grace is over: running commands are ended.
    pub cut: CancellationToken,
    /// Metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The threads clients are served on, once the accept loop started them.
    pub shards: OnceLock<Arc<Shards>>,
    affinities: Arc<[String]>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("transport", &self.tunnel.url()).finish_non_exhaustive()
    }
}

impl Shared {
    /// Shared state for `config`.
    pub fn new(config: SidecarConfig) -> Result<Self, Error> {
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let tunnel = TunnelClient::new(&config.transport, metrics.transport_connects.clone())?;
        let client_tls = config.client_tls.acceptor()?;
        if config.passthrough() {
            info!("passthrough logins on: the upstream checks every login without a users entry");
        }
        Ok(Self {
            inflight: Arc::new(tokio::sync::Semaphore::new(config.max_inflight_bytes)),
            config,
            tunnel,
            live: LiveSessions::default(),
            client_tls,
            greetings: Arc::default(),
            draining: CancellationToken::new(),
            cut: CancellationToken::new(),
            metrics,
            shards: OnceLock::new(),
            affinities: new_affinities()?,
        })
    }

    /// The affinity key of bucket `n`: sessions are spread over [`AFFINITY_BUCKETS`] keys, so a
    /// hashing proxy spreads them over transports while keep-alives need one request per key.
    pub fn affinity(&self, n: usize) -> &str {
        &self.affinities[n % self.affinities.len()]
    }

    /// What a new relayed session asks the transport for.
    pub fn open_relay(&self) -> OpenRelay {
        let config = &self.config;
        let upstream = if config.passthrough() {
            config.passthrough_upstream()
        } else {
            config.default_upstream()
        };
        OpenRelay {
            upstream: upstream.to_owned(),
            client_tls: self.client_tls.is_some(),
            client_compression: true,
        }
    }

    /// The bucket whose affinity key is `affinity`.
    pub fn bucket_of(&self, affinity: &str) -> Option<usize> {
        self.affinities.iter().position(|a| a == affinity)
    }

    /// Prepares the greeting of the next client in the background (see `greetings.rs`), on
    /// the thread serving the fewest clients: the next client is served where its greeting
    /// is, so that the clients stay spread.
    pub fn prepare_next_greeting(&self, after_bucket: usize) {
        let bucket = (after_bucket + 1) % AFFINITY_BUCKETS;
        let (tunnel, open, affinities) =
            (self.tunnel.clone(), self.open_relay(), self.affinities.clone());
        let Some(task) = self.greetings.prepare_next(tunnel, open, affinities, bucket) else {
            return;
        };
        match self.shards.get() {
            Some(shards) => shards.spawn_task(shards.least_loaded(), task),
            None => drop(tokio::spawn(task)),
        }
    }
}

/// Random affinity keys for this sidecar process.
fn new_affinities() -> Result<Arc<[String]>, Error> {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
    let seed: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    Ok((0..AFFINITY_BUCKETS).map(|i| format!("{seed}-{i}")).collect())
}
