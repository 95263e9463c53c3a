//! Session keep-alives: every `heartbeat_interval`, one batched request per affinity key in
//! use tells the transport holding those sessions that they are still served; client
//! connections whose session is gone are closed (the client sees a lost connection, as after a
//! server restart, and reconnects).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::server::Shared;

/// Live sessions of this sidecar, each with the token that closes its client connection.
#[derive(Debug, Default)]
pub struct LiveSessions(Mutex<HashMap<String, (CancellationToken, usize)>>);

impl LiveSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (CancellationToken, usize)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a session of affinity bucket `bucket`; the token is cancelled when the
    /// transport reports the session gone.
    pub fn register(&self, id: &str, bucket: usize) -> CancellationToken {
        let token = CancellationToken::new();
        self.lock().insert(id.to_owned(), (token.clone(), bucket));
        token
    }

    /// Moves a registration (and its token) to a new session id (COM_CHANGE_USER).
    pub fn rename(&self, old: &str, new: &str) {
        let mut live = self.lock();
        if let Some(entry) = live.remove(old) {
            live.insert(new.to_owned(), entry);
        }
    }

    /// Forgets a session.
    pub fn unregister(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Session ids grouped by affinity bucket.
    fn by_bucket(&self) -> HashMap<usize, Vec<String>> {
        let mut groups: HashMap<usize, Vec<String>> = HashMap::new();
        for (id, (_, bucket)) in self.lock().iter() {
            groups.entry(*bucket).or_default().push(id.clone());
        }
        groups
    }

    fn close(&self, id: &str) {
        if let Some((token, _)) = self.lock().remove(id) {
            token.cancel();
        }
    }
}

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
                        info!(session = %id, "the transport no longer has this session; closing its client");
                        shared.live.close(&id);
                    }
                }
                Err(e) => debug!(error = %e, "keepalive failed; will retry"),
            }
        }
    }
}
