//! Greetings prepared ahead: a relayed session opened before its client arrives, so that a new
//! connection's critical path is one round trip to the transport (its login) instead of two.
//! Each greeting is a fresh upstream connection's, with its own scramble, logged in on by at
//! most one client. One is prepared after each connection whose login went upstream, one at a
//! time, on a connection to the transport already open where there is one (the session takes
//! its affinity), which it keeps for its client: that client is served on the thread that
//! made the connection, and its login takes it, a request away. An unused one is closed after
//! [`FRESH_FOR`] (a server waits only its `connect_timeout`, 10 s by default, for a login).
//!
//! A connection that leaves before its handshake response (a port check, a health probe, a
//! browser's request), or whose answer a `users` entry refuses (a wrong password), gives its
//! greeting back, still fresh, for the next client: the upstream saw nothing of it, and no
//! answer to its scramble passed (so none can be replayed). Closing it instead would count as
//! an aborted connect upstream each time (security review F9: `max_connect_errors` then blocks
//! the transport's host); so port checks in a row cost one upstream connection per
//! [`FRESH_FOR`].

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::wire::{OpenRelay, TurnEnd};
use tracing::debug;

use crate::Error;
use crate::tunnel::{Credential, TunnelClient, TunnelConn};

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
    /// The affinity key of `bucket`.
    affinity: String,
    /// The connection it was opened on, kept for its client (none once a client had it).
    conn: Option<TunnelConn>,
    /// The thread that made that connection (its socket's readiness is seen there).
    thread: ThreadId,
    /// A client was sent to that thread for it (one only: a burst of clients is spread).
    steered: bool,
    made: Instant,
    /// How long it stays usable: [`FRESH_FOR`], or less when the transport's session timeout
    /// is shorter.
    fresh_for: Duration,
    /// A task closes it at its expiry if it is still kept then.
    expiry_set: bool,
}

impl Prepared {
    /// A relayed session opened just now (`session_timeout`: the transport's, if it said),
    /// whose greeting is `greeting`.
    pub fn new(
        session: String,
        greeting: Vec<Bytes>,
        (bucket, affinity): (usize, String),
        authorization: Credential,
        session_timeout: Option<Duration>,
    ) -> Self {
        let fresh_for = session_timeout.map_or(FRESH_FOR, |t| FRESH_FOR.min(t / 2));
        let made = Instant::now();
        Self {
            session,
            greeting,
            bucket,
            authorization,
            affinity,
            conn: None,
            thread: std::thread::current().id(),
            steered: false,
            made,
            fresh_for,
            expiry_set: false,
        }
    }

    /// Still usable by a client.
    fn is_fresh(&self) -> bool {
        self.made.elapsed() < self.fresh_for
    }

    /// The connection its client's requests go on: the one it was opened on, else a new one
    /// of its affinity.
    pub fn connection(&mut self, tunnel: &TunnelClient) -> TunnelConn {
        let (affinity, authorization) = (&self.affinity, self.authorization.clone());
        self.conn.take().unwrap_or_else(|| tunnel.connection_as(affinity, authorization))
    }

    /// Closes its session on the transport.
    async fn close(mut self, tunnel: &TunnelClient) {
        self.connection(tunnel).close_session(&self.session).await;
    }
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
        self.lock().take().filter(Prepared::is_fresh)
    }

    /// The thread that holds the connection of the greeting ready for the next client, if one
    /// is and no client was sent there for it yet: that client is best served there (its
    /// requests take that connection); the others of a burst are spread as usual.
    pub fn steer(&self) -> Option<ThreadId> {
        let mut slot = self.lock();
        let prepared = slot.as_mut().filter(|p| p.is_fresh() && !p.steered)?;
        prepared.steered = true;
        Some(prepared.thread)
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

    /// The task that prepares the next greeting (for the caller to run where it chooses),
    /// unless one is ready or on its way. Its session takes the affinity of a connection idle
    /// where it runs (one of `affinities`), else `affinities[bucket]`.
    pub fn prepare_next(
        self: &Arc<Self>,
        tunnel: TunnelClient,
        open: OpenRelay,
        affinities: Arc<[String]>,
        bucket: usize,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        if self.lock().is_some() || self.preparing.swap(true, Ordering::AcqRel) {
            return None;
        }
        let greetings = self.clone();
        Some(async move {
            match open_session(&tunnel, &open, &affinities, bucket).await {
                Ok(prepared) => greetings.keep(prepared, &tunnel),
                Err(e) => debug!(error = %e, "cannot prepare a greeting"),
            }
            greetings.preparing.store(false, Ordering::Release);
            greetings.prepared.notify_waiters();
        })
    }

    /// Takes back the greeting of a client that left before answering it (or answered wrong),
    /// for the next client while it is fresh; returns it when it is not (to be closed).
    pub fn give_back(
        self: &Arc<Self>,
        prepared: Prepared,
        tunnel: &TunnelClient,
    ) -> Option<Prepared> {
        if !prepared.is_fresh() {
            return Some(prepared);
        }
        debug!("a client left before its login: its greeting is kept for the next one");
        let prepared = Prepared { steered: false, ..prepared };
        self.keep(prepared, tunnel);
        None
    }

    /// Keeps `prepared` for the next client, and closes it when it expires unused. Of two, the
    /// older is closed at once.
    fn keep(self: &Arc<Self>, mut prepared: Prepared, tunnel: &TunnelClient) {
        let expiry = prepared.made + prepared.fresh_for;
        let set_expiry = !std::mem::replace(&mut prepared.expiry_set, true);
        let session = prepared.session.clone();
        let displaced = {
            let mut slot = self.lock();
            match slot.as_ref() {
                Some(kept) if kept.made >= prepared.made => Some(prepared),
                _ => slot.replace(prepared),
            }
        };
        if let Some(displaced) = displaced {
            let tunnel = tunnel.clone();
            tokio::spawn(async move { displaced.close(&tunnel).await });
        }
        if !set_expiry {
            return;
        }
        let (greetings, tunnel) = (self.clone(), tunnel.clone());
        tokio::spawn(async move {
            tokio::time::sleep_until(expiry.into()).await;
            let stale = {
                let mut slot = greetings.lock();
                match slot.as_ref() {
                    Some(p) if p.session == session => slot.take(),
                    _ => None,
                }
            };
            if let Some(stale) = stale {
                stale.close(&tunnel).await;
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Prepared>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Opens a relayed session, on an idle connection when there is one (of its affinity, one of
/// `affinities`; else `affinities[bucket]`'s), and reads its greeting.
async fn open_session(
    tunnel: &TunnelClient,
    open: &OpenRelay,
    affinities: &[String],
    bucket: usize,
) -> Result<Prepared, Error> {
    let mut conn = tunnel.connection_reusing(&affinities[bucket % affinities.len()]);
    let affinity = conn.affinity().to_owned();
    let bucket = affinities.iter().position(|a| *a == affinity).unwrap_or(bucket);
    let (session, timeout, mut frames) = conn.open_relay(open).await?;
    let (greeting, end) = frames.payloads().await?;
    if end != Some(TurnEnd::AwaitAuth) || session.is_empty() {
        return Err(Error::StreamBroken(crate::error::Broken::UpstreamRefused));
    }
    let mut prepared =
        Prepared::new(session, greeting, (bucket, affinity), conn.authorization(), timeout);
    prepared.thread = conn.home().unwrap_or(prepared.thread);
    prepared.conn = Some(conn);
    Ok(prepared)
}

#[cfg(test)]
mod tests {
    use common::config::parse_yaml;
    use prometheus_client::metrics::counter::Counter;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;
    use tokio::sync::mpsc;

    use super::*;

    /// A client of a fake transport that reports the path of each `DELETE` (a session closed).
    async fn transport() -> (TunnelClient, mpsc::UnboundedReceiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let (closed, closes) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let closed = closed.clone();
                tokio::spawn(async move {
                    let mut socket = BufReader::new(socket);
                    let mut line = String::new();
                    drop(socket.read_line(&mut line).await);
                    if let Some(path) = line.strip_prefix("DELETE ") {
                        drop(closed.send(path.split(' ').next().unwrap_or_default().to_owned()));
                    }
                    drop(socket.get_mut().write_all(b"HTTP/1.1 404 Not Found\r\n\r\n").await);
                });
            }
        });
        let yaml = format!("listen: 127.0.0.1:0\ntransport:\n  url: {url}\n  token: t0ken-t0ken\n");
        let config: crate::SidecarConfig = parse_yaml(&yaml).expect("config");
        (TunnelClient::new(&config.transport, Counter::default()).expect("client"), closes)
    }

    fn greeting(session: &str, tunnel: &TunnelClient, session_timeout: Duration) -> Prepared {
        let (id, auth) = (session.to_owned(), tunnel.authorization());
        Prepared::new(
            id,
            vec![Bytes::from_static(b"\x0a")],
            (0, "a".into()),
            auth,
            Some(session_timeout),
        )
    }

    #[tokio::test]
    async fn a_greeting_given_back_fresh_goes_to_the_next_client() {
        let (tunnel, mut closes) = transport().await;
        let greetings = Arc::new(Greetings::default());
        let fresh = greeting("s1", &tunnel, Duration::from_secs(60));
        assert!(greetings.give_back(fresh, &tunnel).is_none());
        // Given back again and again by port checks: still the one greeting.
        for _ in 0..3 {
            let taken = greetings.take().expect("kept for the next client");
            assert_eq!(taken.session, "s1");
            assert!(greetings.give_back(taken, &tunnel).is_none());
        }
        // A stale one is not kept: the caller closes it.
        let stale = greeting("s2", &tunnel, Duration::ZERO);
        assert_eq!(greetings.give_back(stale, &tunnel).map(|p| p.session).as_deref(), Some("s2"));
        assert_eq!(greetings.take().map(|p| p.session).as_deref(), Some("s1"));
        assert!(closes.try_recv().is_err(), "nothing closed");
    }

    #[tokio::test]
    async fn of_two_greetings_the_older_is_closed_and_a_kept_one_at_its_expiry() {
        let (tunnel, mut closes) = transport().await;
        let greetings = Arc::new(Greetings::default());
        let older = greeting("old", &tunnel, Duration::from_secs(60));
        let newer = greeting("new", &tunnel, Duration::from_millis(400));
        greetings.keep(newer, &tunnel);
        assert!(greetings.give_back(older, &tunnel).is_none());
        let closed = tokio::time::timeout(Duration::from_secs(5), closes.recv()).await;
        assert!(closed.expect("closed").expect("a path").ends_with("/old"));
        // The newer one (fresh for 200 ms) is closed once it expires, unused.
        let closed = tokio::time::timeout(Duration::from_secs(5), closes.recv()).await;
        assert!(closed.expect("closed").expect("a path").ends_with("/new"));
        assert!(greetings.take().is_none());
    }
}
