//! The accept loop and what all client connections share: config, the transport client, the
//! cached upstream version and the connection id counter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::Error;
use crate::config::SidecarConfig;
use crate::connection::ClientConnection;
use crate::greetings::Greetings;
use crate::heartbeat::{self, LiveSessions};
use crate::kill::ConnectionIds;
use crate::protocol::PacketIo;
use crate::relayed::RelayedConnection;
use crate::rsa_key::RsaKey;
use crate::tunnel::TunnelClient;

/// Greeting version used only while the transport cannot tell the real one.
const FALLBACK_VERSION: &str = "5.5.5-10.11.0-MariaDB-sqltunnel";
/// How long shutdown waits for clients to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long the greeting waits for the transport to name the upstream version.
const VERSION_LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// State shared by every client connection.
pub struct Shared {
    /// The configuration.
    pub config: SidecarConfig,
    /// The HTTP client to the transport.
    pub tunnel: TunnelClient,
    /// Sessions kept alive by heartbeats.
    pub live: LiveSessions,
    /// Local → upstream connection ids, for `KILL`.
    pub connection_ids: ConnectionIds,
    /// TLS for clients that send an SSLRequest, when enabled.
    pub client_tls: Option<tokio_rustls::TlsAcceptor>,
    /// A relayed session prepared ahead for the next client.
    pub greetings: Arc<Greetings>,
    /// RSA key for `caching_sha2_password` passthrough (present in passthrough mode).
    pub rsa_key: Option<Arc<RsaKey>>,
    versions: Mutex<HashMap<String, String>>,
    version_lookup: tokio::sync::Mutex<()>,
    next_connection_id: AtomicU32,
    affinities: Vec<String>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("transport", &self.tunnel.url()).finish_non_exhaustive()
    }
}

impl Shared {
    /// Shared state for `config`.
    pub fn new(config: SidecarConfig) -> Result<Self, Error> {
        let tunnel = TunnelClient::new(&config.transport)?;
        let client_tls = config.client_tls.acceptor()?;
        let rsa_key = if config.passthrough() {
            let key = match &config.auth.rsa_key_file {
                Some(path) => RsaKey::load(path)?,
                None => RsaKey::generate()?,
            };
            info!(fingerprint = key.fingerprint(), "passthrough logins on; RSA public key ready");
            Some(Arc::new(key))
        } else {
            None
        };
        Ok(Self {
            config,
            tunnel,
            live: LiveSessions::default(),
            connection_ids: ConnectionIds::default(),
            client_tls,
            greetings: Arc::default(),
            rsa_key,
            versions: Mutex::new(HashMap::new()),
            version_lookup: tokio::sync::Mutex::new(()),
            next_connection_id: AtomicU32::new(1),
            affinities: new_affinities()?,
        })
    }

    /// The version string to greet with: the default upstream's, asked of the transport once.
    pub async fn greeting_version(&self) -> String {
        let upstream = self.config.default_upstream().to_owned();
        if let Some(v) = self.versions.lock().unwrap_or_else(|p| p.into_inner()).get(&upstream) {
            return v.clone();
        }
        // One lookup at a time: connections arriving meanwhile wait for its answer.
        let _lookup = self.version_lookup.lock().await;
        if let Some(v) = self.versions.lock().unwrap_or_else(|p| p.into_inner()).get(&upstream) {
            return v.clone();
        }
        let mut conn = self.tunnel.connection(self.affinity(0));
        match tokio::time::timeout(VERSION_LOOKUP_TIMEOUT, conn.upstreams()).await {
            Ok(Ok(list)) => {
                if let [only] = list.as_slice()
                    && let Some(v) = &only.server_version
                {
                    self.remember_version("", v); // the transport's default upstream
                }
                for info in list {
                    if let Some(v) = info.server_version {
                        self.remember_version(&info.name, &v);
                    }
                }
            }
            Ok(Err(e)) => debug!(error = %e, "cannot ask the transport for upstream versions"),
            Err(_) => debug!("the transport did not name upstream versions in time"),
        }
        let versions = self.versions.lock().unwrap_or_else(|p| p.into_inner());
        versions.get(&upstream).cloned().unwrap_or_else(|| FALLBACK_VERSION.into())
    }

    /// Caches an upstream's version.
    pub fn remember_version(&self, upstream: &str, version: &str) {
        self.versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(upstream.to_owned(), version.to_owned());
    }

    /// The affinity key of bucket `n`: sessions are spread over [`AFFINITY_BUCKETS`] keys, so a
    /// hashing proxy spreads them over transports while keep-alives need one request per key.
    pub fn affinity(&self, n: usize) -> &str {
        &self.affinities[n % self.affinities.len()]
    }

    fn next_connection_id(&self) -> u32 {
        self.next_connection_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// Affinity keys per sidecar.
pub const AFFINITY_BUCKETS: usize = 16;

/// Random affinity keys for this sidecar process.
fn new_affinities() -> Result<Vec<String>, Error> {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
    let seed: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    Ok((0..AFFINITY_BUCKETS).map(|i| format!("{seed}-{i}")).collect())
}

/// Serves MySQL clients on `listener` until `shutdown` is cancelled.
pub async fn run(
    listener: TcpListener,
    config: SidecarConfig,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let max_packet = config.max_packet;
    let shared = Arc::new(Shared::new(config)?);
    let tracker = TaskTracker::new();
    tracker.spawn(heartbeat::run(shared.clone(), shutdown.clone()));
    info!(addr = %listener.local_addr()?, transport = %shared.tunnel.url(), "sidecar listening");
    loop {
        let Some((stream, peer)) = common::runtime::accept(&listener, &shutdown).await else {
            break;
        };
        let id = shared.next_connection_id();
        let io = PacketIo::new(stream, max_packet);
        let token = shutdown.clone();
        let span = info_span!("client", conn = id, %peer);
        if shared.config.relays() {
            let bucket = id as usize % AFFINITY_BUCKETS;
            let conn = RelayedConnection::new(io, shared.clone(), bucket);
            tracker.spawn(
                async move {
                    tokio::select! {
                        _ = conn.run() => {}
                        _ = token.cancelled() => {}
                    }
                }
                .instrument(span),
            );
            continue;
        }
        let conn = ClientConnection::new(io, shared.clone(), id);
        tracker.spawn(
            async move {
                tokio::select! {
                    _ = conn.run() => {}
                    _ = token.cancelled() => {}
                }
            }
            .instrument(span),
        );
    }
    tracker.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait()).await.is_err() {
        warn!("some client connections were still open after the grace period");
    }
    Ok(())
}
