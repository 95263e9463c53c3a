//! The sessions this sidecar serves, each with the token that closes its client connection
//! when the transport reports the session gone.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

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

    /// Forgets a session.
    pub fn unregister(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Session ids grouped by affinity bucket.
    pub fn by_bucket(&self) -> HashMap<usize, Vec<String>> {
        let mut groups: HashMap<usize, Vec<String>> = HashMap::new();
        for (id, (_, bucket)) in self.lock().iter() {
            groups.entry(*bucket).or_default().push(id.clone());
        }
        groups
    }

    /// Closes a session's client connection (the transport no longer has the session).
    pub fn close(&self, id: &str) {
        if let Some((token, _)) = self.lock().remove(id) {
            token.cancel();
        }
    }
}
