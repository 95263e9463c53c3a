//! The accept loop: one relayed connection task per client, the heartbeat task, and a bounded
//! drain on shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info, info_span, warn};

use crate::Error;
use crate::config::SidecarConfig;
use crate::connection::Connection;
use crate::heartbeat;
use crate::protocol::PacketIo;
use crate::shared::{AFFINITY_BUCKETS, Shared};

/// How long shutdown waits for clients to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

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
    let accepted = AtomicUsize::new(0);
    loop {
        let Some((stream, peer)) = common::runtime::accept(&listener, &shutdown).await else {
            break;
        };
        let n = accepted.fetch_add(1, Ordering::Relaxed);
        let conn = Connection::new(
            PacketIo::new(stream, max_packet),
            shared.clone(),
            n % AFFINITY_BUCKETS,
        );
        let token = shutdown.clone();
        tracker.spawn(
            async move {
                tokio::select! {
                    _ = conn.run() => {}
                    _ = token.cancelled() => {}
                }
            }
            .instrument(info_span!("client", conn = n, %peer)),
        );
    }
    tracker.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait()).await.is_err() {
        warn!("some client connections were still open after the grace period");
    }
    Ok(())
}
