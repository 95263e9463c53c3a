//! The sessions this sidecar serves, each with the token that closes its client connection
//! when the transport reports the session gone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::tunnel::Credential;
use tokio_util::sync::CancellationToken;

/// A live session: what ends its client connection, its affinity bucket, its `Authorization`.
type Entry = (Gone, usize, Credential);

/// Tells a client connection that its session is gone, and how.
#[derive(Debug, Clone, Default)]
pub struct Gone {
    token: CancellationToken,
    reset: Arc<AtomicBool>,
    revoked: Arc<AtomicBool>,
}

impl Gone {
    /// Completes once the session is gone.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    /// The server reset the connection (rather than closing it in order).
    pub fn was_reset(&self) -> bool {
        self.reset.load(Ordering::Acquire)
    }

    /// The transport ended the session because its identity's access was revoked: the
    /// client is told so at its next command.
    pub fn was_revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
    }
}

/// Live sessions of this sidecar, each with the token that closes its client connection.
#[derive(Debug, Default)]
pub struct LiveSessions {
    sessions: Mutex<HashMap<String, Entry>>,
    /// Counts registrations, so an idle keep-alive loop wakes for a new session.
    registered: watch::Sender<u64>,
}

impl LiveSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a session of affinity bucket `bucket`; the token is cancelled when the
    /// transport reports the session gone.
    pub fn register(&self, id: &str, bucket: usize, authorization: Credential) -> Gone {
        let token = Gone::default();
        self.lock().insert(id.to_owned(), (token.clone(), bucket, authorization));
        self.registered.send_modify(|n| *n += 1);
        token
    }

    /// Changes whenever a session registers.
    pub fn registrations(&self) -> watch::Receiver<u64> {
        self.registered.subscribe()
    }

    /// Forgets a session.
    pub fn unregister(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Session ids of affinity bucket `bucket`, grouped by the `Authorization` they were
    /// opened with.
    pub fn in_bucket(&self, bucket: usize) -> HashMap<Credential, Vec<String>> {
        let mut groups: HashMap<Credential, Vec<String>> = HashMap::new();
        for (id, (_, b, authorization)) in self.lock().iter() {
            if *b == bucket {
                groups.entry(authorization.clone()).or_default().push(id.clone());
            }
        }
        groups
    }

    /// Ends a session's client connection (the transport no longer has the session): with a
    /// reset when its server reset the connection, else in order (or after telling the client
    /// at its next command that its access was revoked). False when no client of this sidecar
    /// had it any more (it quit, or another bucket's keep-alive was told first).
    pub fn close(&self, id: &str, reset: bool, revoked: bool) -> bool {
        let Some((gone, ..)) = self.lock().remove(id) else { return false };
        gone.reset.store(reset, Ordering::Release);
        gone.revoked.store(revoked, Ordering::Release);
        gone.token.cancel();
        true
    }
}
