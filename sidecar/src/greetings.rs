//! Greetings prepared ahead: a relayed session opened before its client arrives, so that a new
//! connection's critical path is one round trip to the transport (its login) instead of two.
//! Each greeting is a fresh upstream connection's, with its own scramble, handed to exactly one
//! client. One is prepared after each connection, one at a time; an unused one is closed after
//! [`FRESH_FOR`] (a server waits only its `connect_timeout`, 10 s by default, for a login).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::wire::{OpenRelay, TurnEnd};
use tracing::debug;

use crate::Error;
use crate::tunnel::{Credential, TunnelClient};

/// How long a prepared greeting may wait for its client.
pub const FRESH_FOR: Duration = Duration::from_secs(5);

/// A relayed session waiting for its client.
#[derive(Debug)]
pub struct Prepared {
    /// The transport's session id.
    pub session: String,
    /// The greeting's packet payloads.
    pub greeting: Vec<Bytes>,
    /// The affinity bucket it was opened with (its later requests must use it too).
    pub bucket: usize,
    /// The `Authorization` it was opened with (its later requests must carry it too).
    pub authorization: Credential,
    made: Instant,
    /// How long it stays usable: [`FRESH_FOR`], or less when the transport's session timeout
    /// is shorter.
    fresh_for: Duration,
}

/// At most one prepared greeting, and whether one is being prepared.
#[derive(Debug, Default)]
pub struct Greetings {
    slot: Mutex<Option<Prepared>>,
    preparing: AtomicBool,
    /// Told when a greeting being prepared is ready (or could not be).
    prepared: tokio::sync::Notify,
}

impl Greetings {
    /// A prepared greeting still fresh enough for a client, if there is one.
    pub fn take(&self) -> Option<Prepared> {
        let prepared = self.lock().take()?;
        (prepared.made.elapsed() < prepared.fresh_for).then_some(prepared)
    }

    /// A prepared greeting, waiting (up to [`FRESH_FOR`]) for one on its way: it costs no more
    /// than opening another, and opening another could overrun the session limits.
    pub async fn take_or_wait(&self) -> Option<Prepared> {
        let ready = self.prepared.notified();
        tokio::pin!(ready);
        ready.as_mut().enable();
        if let Some(prepared) = self.take() {
            return Some(prepared);
        }
        if !self.preparing.load(Ordering::Acquire) {
            return None;
        }
        drop(tokio::time::timeout(FRESH_FOR, ready).await);
        self.take()
    }

    /// Prepares the next greeting in the background, unless one is ready or on its way.
    pub fn prepare_next(
        self: &Arc<Self>,
        tunnel: TunnelClient,
        open: OpenRelay,
        affinity: String,
        bucket: usize,
    ) {
        if self.lock().is_some() || self.preparing.swap(true, Ordering::AcqRel) {
            return;
        }
        let greetings = self.clone();
        tokio::spawn(async move {
            let prepared = open_session(&tunnel, &open, &affinity, bucket).await;
            let ready = match prepared {
                Ok(prepared) => {
                    let kept = (prepared.session.clone(), prepared.fresh_for);
                    *greetings.lock() = Some(prepared);
                    Ok(kept)
                }
                Err(e) => Err(e),
            };
            greetings.preparing.store(false, Ordering::Release);
            greetings.prepared.notify_waiters();
            let (session, fresh_for) = match ready {
                Ok(kept) => kept,
                Err(e) => return debug!(error = %e, "cannot prepare a greeting"),
            };
            tokio::time::sleep(fresh_for).await;
            let stale = {
                let mut slot = greetings.lock();
                match slot.as_ref() {
                    Some(p) if p.session == session => slot.take(),
                    _ => None,
                }
            };
            if let Some(stale) = stale {
                let mut conn = tunnel.connection_as(&affinity, stale.authorization.clone());
                conn.close_session(&stale.session).await;
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Prepared>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Opens a relayed session and reads its greeting.
async fn open_session(
    tunnel: &TunnelClient,
    open: &OpenRelay,
    affinity: &str,
    bucket: usize,
) -> Result<Prepared, Error> {
    let mut conn = tunnel.connection(affinity);
    let (session, timeout, mut frames) = conn.open_relay(open).await?;
    let fresh_for = timeout.map_or(FRESH_FOR, |t| FRESH_FOR.min(t / 2));
    let (greeting, end) = frames.payloads().await?;
    if end != Some(TurnEnd::AwaitAuth) || session.is_empty() {
        return Err(Error::StreamBroken(crate::error::Broken::UpstreamRefused));
    }
    let authorization = conn.authorization();
    Ok(Prepared { session, greeting, bucket, authorization, made: Instant::now(), fresh_for })
}
