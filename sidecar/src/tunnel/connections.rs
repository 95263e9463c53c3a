//! Which carrier a new connection to the transport uses (`transport.stream`): a WebSocket
//! stream when the path passes the upgrade, else one HTTP request per step. A path that
//! refuses the upgrade is remembered for a while and logged once, with the nginx lines that
//! would let it through. And the idle connections: a new session takes one of any affinity (it
//! adopts the stream's), made on this thread if one is, else on another, before it opens one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::wire::{AFFINITY_HEADER, ApiError, NGINX_STREAM_LINES, Route, STREAM_PROTOCOL};
use tracing::{debug, warn};

use super::carrier::Connection;
use super::{Credential, TunnelClient, TunnelConn};
use crate::Error;
use crate::config::StreamMode;
use crate::http::{HttpConn, OpenedAs, ResponseHead, Upgrade, upgrade_request};

/// An idle connection in the pool.
pub(super) struct IdleConn {
    /// The affinity a stream is tied to (`None`: plain HTTP, usable by any session).
    pub(super) tied: Option<Arc<str>>,
    /// The thread that made it: its socket's readiness is seen there.
    pub(super) shard: std::thread::ThreadId,
    /// The connection.
    pub(super) conn: Connection,
}

/// Idle connections and streams kept for the next client sessions (two per affinity bucket),
/// the oldest let go first.
const MAX_IDLE: usize = 32;

/// How long `auto` sends plain requests after the path refused a stream.
const REFUSAL_REMEMBERED: Duration = Duration::from_secs(600);

/// The choice of carrier, shared by every connection to one transport.
#[derive(Debug)]
pub(super) struct Streams {
    mode: StreamMode,
    /// Under `auto`: no stream is asked for until then.
    refused_until: Mutex<Option<Instant>>,
    /// The refusal was logged at warn level (once).
    logged: AtomicBool,
}

impl Streams {
    pub(super) fn new(mode: StreamMode) -> Self {
        Self { mode, refused_until: Mutex::new(None), logged: AtomicBool::new(false) }
    }

    /// True when a new connection asks for a stream.
    fn wanted(&self) -> bool {
        match self.mode {
            StreamMode::Off => false,
            StreamMode::On => true,
            StreamMode::Auto => {
                let until = *self.refused_until.lock().unwrap_or_else(|p| p.into_inner());
                until.is_none_or(|until| Instant::now() >= until)
            }
        }
    }

    /// The path refused the upgrade (`answer`: what it said; `version`: the transport's own
    /// words when it speaks another stream version): plain requests for a while.
    fn refused(&self, url: &str, answer: &str, version: Option<&str>) {
        let until = Instant::now() + REFUSAL_REMEMBERED;
        *self.refused_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(until);
        if self.logged.swap(true, Ordering::Relaxed) {
            debug!(%url, %answer, "the path still refuses streams: requests are used");
        } else if let Some(said) = version {
            warn!(
                %url,
                transport_said = %said,
                "the transport speaks another stream version than this sidecar ({STREAM_PROTOCOL}), so each command is one HTTP request (slower) until both are of one release"
            );
        } else {
            warn!(
                %url,
                %answer,
                "the path to the transport does not pass WebSocket upgrades, so each command is one HTTP request (slower); to let streams through nginx, add to the tunnel's location: {NGINX_STREAM_LINES}"
            );
        }
    }
}

/// True when an answer to the upgrade other than `101` is the path (or a transport without
/// streams) saying no: a 4xx but 401. A 401 or a 5xx (a proxy whose transport is down) is
/// what any request would have met: an error.
pub fn refuses_streams(status: u16) -> bool {
    (400..500).contains(&status) && status != 401
}

/// The transport's words, when its refusal of an upgrade says it speaks other stream versions:
/// it names them in `x-tunnel-stream-versions` (a transport of version 2 said so only in its
/// message: "the subprotocol must be sqltunnel.v2").
pub fn other_version(refusal: &ResponseHead, body: &[u8]) -> Option<String> {
    let said = serde_json::from_slice::<ApiError>(body).ok().map(|e| e.message);
    if !refusal.stream_versions.is_empty() {
        let speaks = format!("it speaks {}", refusal.stream_versions);
        return Some(match said {
            Some(said) => format!("{speaks}: {said}"),
            None => speaks,
        });
    }
    said.filter(|said| said.contains("subprotocol"))
}

impl TunnelClient {
    /// The connection of a new session: with an idle connection when there is one (made on
    /// this thread first, else on another), whose affinity it takes if it is a stream's (a
    /// session's affinity only has to stay the same for all its requests), else with
    /// `affinity` and none yet.
    pub fn connection_reusing(&self, affinity: &str) -> TunnelConn {
        let mut conn = self.connection(affinity);
        let idle = {
            let mut idle = self.0.idle.lock().unwrap_or_else(|p| p.into_inner());
            let here = std::thread::current().id();
            let at = idle.iter().rposition(|kept| kept.shard == here);
            at.or_else(|| idle.len().checked_sub(1)).map(|at| idle.remove(at))
        };
        if let Some(kept) = idle {
            if let Some(tied) = kept.tied {
                conn.affinity = tied;
            }
            conn.http = Some(kept.conn);
        }
        conn
    }
}

impl TunnelConn {
    /// The affinity key its requests carry.
    pub fn affinity(&self) -> &str {
        &self.affinity
    }

    /// The thread that made its connection, when it holds one.
    pub fn home(&self) -> Option<std::thread::ThreadId> {
        self.http.as_ref().map(Connection::home)
    }

    /// Opens a connection to the transport now, kept (when this value is dropped) for the
    /// next session: a sidecar that just started has one at hand for its first client. Only
    /// with a fixed token: a token command or a login is not run before a client needs it.
    pub async fn warm_up(&mut self) {
        let Credential::Fixed(authorization) = self.authorization.clone() else { return };
        match Box::pin(self.open_connection(false, &authorization)).await {
            Ok(conn) => self.http = Some(conn),
            Err(e) => debug!(error = %e, "no connection to the transport at start"),
        }
    }

    /// A new connection to the transport, upgraded to a stream when `transport.stream` wants
    /// one, the path allows it and the request is not `plain` (too large for a message); the
    /// upgrade carries `authorization`.
    pub(super) async fn open_connection(
        &self,
        plain: bool,
        authorization: &std::sync::Arc<str>,
    ) -> Result<Connection, Error> {
        let ep = &self.endpoint;
        let mut conn = match self.connect().await {
            Ok(conn) => conn,
            // The transport takes no new connection (a shutdown's drain): another thread's
            // idle one still reaches it, only slower (its socket's readiness is seen there).
            Err(e) => return self.idle_connection(plain).ok_or(e),
        };
        if plain || !ep.streams.wanted() {
            return Ok(Connection::Requests(conn));
        }
        conn.set_silence_limit(Duration::from_millis(ep.silence_limit_ms.load(Ordering::Relaxed)));
        let (key, lines) = upgrade_request();
        let headers = format!(
            "Authorization: {authorization}\r\n{AFFINITY_HEADER}: {}\r\n{lines}",
            self.affinity
        );
        let head = ep.target().request_head("GET", &Route::Stream.path(), 0, &headers);
        let url = ep.url.clone();
        let opened_as = OpenedAs(authorization.clone());
        let upgraded = conn.upgrade(head.as_bytes(), &key, opened_as).await;
        let (conn, refusal, body) = match (upgraded, ep.streams.mode) {
            (Ok(Upgrade::Stream(stream)), _) => return Ok(Connection::Stream(stream)),
            (Ok(Upgrade::Refused(conn, refusal, body)), _) => (conn, refusal, body),
            (Err(e), StreamMode::On) => return Err(self.failed(&e)),
            // Under `auto`: a middlebox that answers 101 without the upgrade is a refusal; an
            // upgrade that broke off is tried as a plain connection this once; silence is
            // silence.
            (Err(e), StreamMode::Auto | StreamMode::Off) => {
                match e.kind() {
                    std::io::ErrorKind::TimedOut => return Err(self.failed(&e)),
                    std::io::ErrorKind::InvalidData => {
                        ep.streams.refused(&url, &e.to_string(), None);
                    }
                    _ => debug!(error = %e, "an upgrade to a stream failed: a plain connection"),
                }
                return self.connect().await.map(Connection::Requests);
            }
        };
        if !refuses_streams(refusal.status) {
            return Err(self.error_of(&refusal, &body, 0));
        }
        let version = other_version(&refusal, &body);
        if ep.streams.mode == StreamMode::On {
            let detail = match &version {
                Some(said) => format!(
                    ": transport.stream is on and the transport speaks another stream version ({said})"
                ),
                None => format!(
                    ": transport.stream is on and the path did not upgrade to a stream; nginx needs {NGINX_STREAM_LINES}"
                ),
            };
            return Err(Error::BadAnswer { url, status: refusal.status_line(), detail });
        }
        ep.streams.refused(&url, &refusal.status_line(), version.as_deref());
        let conn = if conn.reusable() { conn } else { self.connect().await? };
        Ok(Connection::Requests(conn))
    }

    /// The newest idle connection this one may use: plain HTTP, or (unless `plain`) a stream
    /// of its affinity. One made on this thread (shard) first: its socket's readiness is seen
    /// here, and its stream is in this thread's lane at the transport; else one made on
    /// another, rather than a new one (its readiness is seen there: slower, but no connect
    /// and no upgrade, a round trip each over a long link).
    pub(super) fn idle_connection(&self, plain: bool) -> Option<Connection> {
        let mut idle = self.endpoint.idle.lock().unwrap_or_else(|p| p.into_inner());
        let here = std::thread::current().id();
        let usable = |kept: &IdleConn| match &kept.tied {
            None => true,
            Some(affinity) => !plain && *affinity == self.affinity,
        };
        let at = idle
            .iter()
            .rposition(|kept| kept.shard == here && usable(kept))
            .or_else(|| idle.iter().rposition(usable))?;
        Some(idle.remove(at).conn)
    }

    /// Hands its connection, when clean, to the next client session: a stream to one of the
    /// same affinity only (a hashing proxy tied the stream to one transport).
    pub(super) fn give_back(&mut self) {
        if let Some(conn) = self.http.take().filter(Connection::reusable) {
            let tied = conn.is_stream().then(|| self.affinity.clone());
            // Back to the pool of the thread that made it (one borrowed from another thread
            // goes home).
            let shard = conn.home();
            let mut idle = self.endpoint.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() >= MAX_IDLE {
                idle.remove(0);
            }
            idle.push(IdleConn { tied, shard, conn });
        }
    }

    /// A new HTTP connection to the transport (or through its proxy).
    async fn connect(&self) -> Result<HttpConn, Error> {
        let ep = &self.endpoint;
        let conn = HttpConn::connect(
            &ep.host,
            ep.port,
            ep.connect_timeout,
            ep.tls.as_ref(),
            ep.proxy.as_ref(),
        )
        .await
        .map_err(|e| self.unreachable(&e))?;
        ep.connects.inc();
        Ok(conn)
    }
}
