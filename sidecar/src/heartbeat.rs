//! Session keep-alives: every `heartbeat_interval`, one batched request per affinity key in
//! use tells the transport holding those sessions that they are still served; client
//! connections whose session is gone are closed (the client sees a lost connection, as after a
//! server restart, and reconnects).

use std::collections::HashMap;
use std::sync::Arc;

use common::wire::session_label;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::shared::Shared;

/// Sends keep-alives until `shutdown`.
pub async fn run(shared: Arc<Shared>, shutdown: CancellationToken) {
    let every = shared.config.heartbeat_interval;
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut conns = HashMap::new();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        for (bucket, sessions) in shared.live.by_bucket() {
            let conn = conns
                .entry(bucket)
                .or_insert_with(|| shared.tunnel.connection(shared.affinity(bucket)));
            match conn.keep_alive(sessions).await {
                Ok(gone) => {
                    for id in gone {
                        info!(session = %session_label(&id), "the transport no longer has this session; closing its client");
                        shared.live.close(&id);
                    }
                }
                Err(e) => debug!(error = %e, "keepalive failed; will retry"),
            }
        }
    }
}
