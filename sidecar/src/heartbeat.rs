//! Session keep-alives: every `heartbeat_interval`, one batched request tells the transport
//! which sessions this sidecar still serves; client connections whose session is gone are
//! closed (the client sees a lost connection, as after a server restart, and reconnects).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::server::Shared;

/// Live sessions of this sidecar, each with the token that closes its client connection.
#[derive(Debug, Default)]
pub struct LiveSessions(Mutex<HashMap<String, CancellationToken>>);

impl LiveSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a session; the token is cancelled when the transport reports it gone.
    pub fn register(&self, id: &str) -> CancellationToken {
        let token = CancellationToken::new();
        self.lock().insert(id.to_owned(), token.clone());
        token
    }

    /// Forgets a session.
    pub fn unregister(&self, id: &str) {
        self.lock().remove(id);
    }

    fn ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn close(&self, id: &str) {
        if let Some(token) = self.lock().remove(id) {
            token.cancel();
        }
    }
}

/// Sends keep-alives until `shutdown`.
pub async fn run(shared: Arc<Shared>, shutdown: CancellationToken) {
    let every = shared.config.heartbeat_interval;
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut conn = shared.tunnel.connection();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let sessions = shared.live.ids();
        if sessions.is_empty() {
            continue;
        }
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
