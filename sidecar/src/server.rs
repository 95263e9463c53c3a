//! The accept loop: one relayed connection task per client, the heartbeat task, and a bounded
//! drain on shutdown: no new client, idle clients closed, running commands given
//! `shutdown_grace`, then ended (the transport kills their statements).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::cli::Reloads;
use common::rare::RareWait;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, info_span, warn};

use crate::Error;
use crate::config::SidecarConfig;
use crate::connection::{CUT_WAIT, Connection};
use crate::heartbeat;
use crate::protocol::PacketIo;
use crate::shared::{AFFINITY_BUCKETS, Shared};

/// Time to write a refusal to a client beyond `max_clients`.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);

/// After the cut, how long shutdown waits for the connections still open.
const AFTER_CUT: Duration = Duration::from_secs(10);

/// Serves MySQL clients on `listener` until `shutdown` is cancelled.
pub async fn run(
    listener: TcpListener,
    config: SidecarConfig,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    run_with_reloads(listener, config, shutdown, tokio::sync::mpsc::unbounded_channel().1).await
}

/// [`run`], applying each configuration that arrives on `reloads` (SIGHUP): the transport
/// token takes effect for the next request (the log level is applied by the caller); other
/// changes need a restart, and a warning says so.
pub async fn run_with_reloads(
    listener: TcpListener,
    config: SidecarConfig,
    shutdown: CancellationToken,
    mut reloads: Reloads<SidecarConfig>,
) -> Result<(), Error> {
    let max_packet = config.max_packet;
    let shared = Arc::new(Shared::new(config)?);
    let reloading = shared.clone();
    tokio::spawn(async move {
        while let Some(mut config) = reloads.recv().await {
            if let Some(token) = &config.transport.token
                && let Err(e) = reloading.tunnel.set_token(token)
            {
                warn!(error = %e, "reloaded transport.token not applied");
            }
            config.log = reloading.config.log.clone();
            if format!("{config:?}") != format!("{:?}", reloading.config) {
                warn!(
                    "settings other than transport.token and log.level changed: restart the sidecar to apply them"
                );
            }
            info!("configuration reloaded");
        }
    });
    let tracker = TaskTracker::new();
    // Keep-alives go on while running commands finish.
    let heartbeats = CancellationToken::new();
    let heartbeat_task = tokio::spawn(heartbeat::run(shared.clone(), heartbeats.clone()));
    let stop = CancellationToken::new();
    if let Some(addr) = shared.config.metrics_listen {
        let listener = TcpListener::bind(addr).await?;
        info!(%addr, "metrics served");
        tokio::spawn(crate::metrics::serve(listener, shared.metrics.clone(), stop.clone()));
    }
    info!(addr = %listener.local_addr()?, transport = %shared.tunnel.url(), "sidecar listening");
    for exposed in crate::exposure::exposures(&shared.config) {
        warn!("{exposed}");
    }
    let shards = common::shards::Shards::start(shared.config.worker_threads)?;
    drop(shared.shards.set(shards.clone()));
    // A connection to the transport opened now, on the thread the first client is served on
    // (the least loaded: the first), so that client waits for no connect nor upgrade.
    let warming = shared.clone();
    tokio::spawn(async move {
        warming.tunnel.connection(warming.affinity(0)).warm_up().await;
    });
    let accepted = AtomicUsize::new(0);
    let clients = Arc::new(Semaphore::new(shared.config.max_clients));
    let (mut last_warned, mut refused) = (None::<std::time::Instant>, 0u64);
    loop {
        let Some((stream, peer)) = common::runtime::accept(&listener, &shutdown).await else {
            break;
        };
        let n = accepted.fetch_add(1, Ordering::Relaxed);
        let Ok(slot) = clients.clone().try_acquire_owned() else {
            shared.metrics.clients_refused.inc();
            refused += 1;
            if last_warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
                warn!(refused, "max_clients reached: new connections get error 1040");
                (last_warned, refused) = (Some(std::time::Instant::now()), 0);
            }
            tracker.spawn(too_many(stream, max_packet));
            continue;
        };
        let (shared, token) = (shared.clone(), stop.clone());
        shared.metrics.clients_accepted.inc();
        // Where the greeting prepared for it is (its requests take that one's connection to
        // the transport), else where the fewest clients are.
        let home = shared.greetings.steer().and_then(|thread| shards.index_of(thread));
        let shard = home.unwrap_or_else(|| shards.least_loaded());
        shards.spawn_on(shard, &tracker, stream, move |stream| {
            let metrics = shared.metrics.clone();
            let conn =
                Connection::new(PacketIo::new(stream, max_packet), shared, n % AFFINITY_BUCKETS);
            async move {
                let _slot = slot;
                metrics.clients_open.inc();
                // The stop is polled only when it wakes the task, not at each command.
                tokio::select! {
                    biased;
                    _ = conn.run(info_span!("client", conn = n, %peer)) => {}
                    () = RareWait::new(token.cancelled()) => {}
                }
                metrics.clients_open.dec();
            }
        });
    }
    // New clients are refused from here on, not left waiting in the backlog.
    drop(listener);
    let grace = shared.config.shutdown_grace;
    info!(?grace, "sidecar shutting down");
    shared.draining.cancel();
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        warn!("commands still running after the shutdown grace: ending them");
        shared.cut.cancel();
        if tokio::time::timeout(CUT_WAIT + AFTER_CUT, tracker.wait()).await.is_err() {
            warn!("some client connections were still open at exit");
        }
    }
    stop.cancel();
    heartbeats.cancel();
    drop(tokio::time::timeout(Duration::from_secs(1), heartbeat_task).await);
    shards.stop();
    info!("sidecar stopped");
    Ok(())
}

/// Refuses a client beyond `max_clients` as a server does: error 1040 in place of the greeting.
async fn too_many(stream: tokio::net::TcpStream, max_packet: usize) {
    let mut io = PacketIo::new(stream, max_packet);
    let refuse = Connection::refuse(&mut io, &Error::TooManyClients);
    drop(tokio::time::timeout(REFUSAL_WRITE, refuse).await);
}
