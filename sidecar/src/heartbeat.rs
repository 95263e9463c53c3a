//! Session keep-alives: one long-polling loop per affinity key in use tells the transport
//! holding those sessions that they are still served, at least every `heartbeat_interval`.
//! The transport answers at once when one of them ends (expired, or its upstream closed the
//! connection), and the client's connection is then closed, as a direct server would: the
//! client sees a lost connection and reconnects.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::wire::session_label;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::shared::{AFFINITY_BUCKETS, Shared};
use crate::tunnel::{Credential, TunnelConn};

/// Sends keep-alives until `shutdown`.
pub async fn run(shared: Arc<Shared>, shutdown: CancellationToken) {
    let loops = (0..AFFINITY_BUCKETS).map(|bucket| {
        let shared = shared.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = keep_bucket_alive(&shared, bucket) => {}
                () = shutdown.cancelled() => {}
            }
        })
    });
    for task in loops.collect::<Vec<_>>() {
        drop(task.await);
    }
}

/// The keep-alive loop of the sessions of one affinity bucket. Sessions opened with a token
/// since replaced (a reload) are kept alive with it, without waiting for news.
async fn keep_bucket_alive(shared: &Shared, bucket: usize) {
    let every = shared.config.heartbeat_interval;
    let affinity = shared.affinity(bucket);
    let mut conns: HashMap<Credential, TunnelConn> = HashMap::new();
    let mut registrations = shared.live.registrations();
    loop {
        registrations.mark_unchanged();
        let started = Instant::now();
        let groups = shared.live.in_bucket(bucket);
        conns.retain(|authorization, _| groups.contains_key(authorization));
        let current = shared.tunnel.authorization();
        let (mut gone, mut reset, mut revoked) = (Vec::new(), Vec::new(), Vec::new());
        for (authorization, sessions) in &groups {
            let wait = if *authorization == current { every } else { Duration::ZERO };
            let conn = conns
                .entry(authorization.clone())
                .or_insert_with(|| shared.tunnel.connection_as(affinity, authorization.clone()));
            match conn.keep_alive(sessions.clone(), wait).await {
                Ok(answer) => {
                    gone.extend(answer.gone);
                    reset.extend(answer.reset);
                    revoked.extend(answer.revoked);
                }
                Err(e) => debug!(error = %e, "keepalive failed; will retry"),
            }
        }
        for id in &gone {
            // The transport tells every keep-alive of a token about its sessions that ended:
            // only the one that still has a client here is news.
            if shared.live.close(id, reset.contains(id), revoked.contains(id)) {
                info!(session = %session_label(id), "the transport no longer has this session; closing its client");
            }
        }
        if gone.is_empty() {
            // Whatever the transport did with the wait (an older one answers at once); a
            // loop with nothing to watch wakes for a new session.
            tokio::select! {
                () = tokio::time::sleep_until(started + every) => {}
                _ = registrations.changed(), if groups.is_empty() => {}
            }
        }
    }
}
