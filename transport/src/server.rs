//! The accept loop: one hyper HTTP/1.1 connection task per socket, a session reaper, and a
//! graceful shutdown: no new connection or work, running commands get `shutdown_grace`, then
//! are ended (`ending.rs`), and answers still on their way are flushed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::shards::{LaneSeat, Shards};
use common::stream::Prefixed;
use http_body_util::BodyExt;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use common::cli::Reloads;

use crate::config::TransportConfig;
use crate::identity::{Caller, HeldCaller, LastCaller, Refusal};
use crate::session::lock;
use crate::shares::Share;
use crate::slots::Slot;
use crate::state::AppState;
use crate::write_stall::WriteStall;
use crate::{api, ending, http_conn, listening, probes, reaper, stream};

/// How long shutdown waits for the last answers to reach their sidecars.
const FLUSH_GRACE: Duration = Duration::from_secs(2);

/// Serves the transport API on `listener` until `shutdown` is cancelled.
pub async fn run(
    listener: TcpListener,
    config: TransportConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let reloads = tokio::sync::mpsc::unbounded_channel().1;
    run_with_reloads(Some(listener), config, shutdown, reloads).await
}

/// [`run`], applying each configuration that arrives on `reloads` (SIGHUP); without a
/// listener, taking over the transport running with the same configuration
/// (`take_over_socket`): its listeners and sessions.
pub async fn run_with_reloads(
    listener: Option<TcpListener>,
    config: TransportConfig,
    shutdown: CancellationToken,
    mut reloads: Reloads<TransportConfig>,
) -> std::io::Result<()> {
    let (reaper_tx, reaper_rx) = tokio::sync::mpsc::unbounded_channel();
    let state = Arc::new(AppState::new(config, reaper_tx).map_err(std::io::Error::other)?);
    let reloading = state.clone();
    tokio::spawn(async move {
        while let Some(config) = reloads.recv().await {
            let revoked = reloading.reload(config);
            crate::ending::end_revoked(&reloading, revoked);
        }
    });
    // HTTP connections: told to finish at shutdown, then waited for (`FLUSH_GRACE`).
    let (connection_tasks, mut closing) = (TaskTracker::new(), CancellationToken::new());
    let config = state.config();
    let (listener, metrics_listener, mut knocks) = listening::listeners(listener, &state).await?;
    if let Some(audit) = &config.audit {
        let log = crate::audit::AuditLog::open(audit, state.metrics.audit_dropped.clone())
            .map_err(|e| std::io::Error::other(format!("audit log {}: {e}", audit.path)))?;
        drop(state.audit.set(Arc::new(log)));
        info!(path = %audit.path, "audit log on");
    }
    let tls = match &config.tls {
        Some(tls) => Some(TlsAcceptor::from(tls.build().map_err(std::io::Error::other)?)),
        None => None,
    };
    tokio::spawn(reaper::run(state.clone(), reaper_rx, shutdown.clone()));
    tokio::spawn(probes::run(state.clone(), shutdown.clone()));
    if let Some(metrics) = &metrics_listener {
        info!(addr = %metrics.local_addr()?, "metrics served without a token");
        tokio::spawn(serve_metrics(metrics.clone(), state.clone(), shutdown.clone()));
    }
    let shards = common::shards::Shards::start(config.worker_threads)?;
    let slots = crate::slots::Slots::new(config.max_connections);
    let idle_timeout = config.idle_timeout;
    info!(addr = %listener.local_addr()?, https = tls.is_some(), "transport listening");
    let mut handed_over = false;
    loop {
        let accepted = tokio::select! {
            accepted = common::runtime::accept(&listener, &shutdown) => accepted,
            Some(knock) = knocks.recv() => {
                let listeners = (&listener, metrics_listener.as_deref());
                match listening::hand_over(knock, &state, listeners, &closing).await {
                    Ok(()) => {
                        handed_over = true;
                        break;
                    }
                    // Connections were asked to close: those opened from now on are not.
                    Err(true) => closing = CancellationToken::new(),
                    Err(false) => {}
                }
                continue;
            }
        };
        let Some((stream, peer)) = accepted else { break };
        let config = state.config();
        let trusted = config.trusted_proxies.iter().any(|c| c.contains(peer.ip()));
        let slot = match slots.take(peer.ip(), trusted, config.max_connections_per_client) {
            Ok(slot) => slot,
            Err(full) => {
                state.metrics.connections_refused.inc();
                debug!(%peer, ?full, "max_connections or max_connections_per_client reached: connection closed");
                continue;
            }
        };
        state.metrics.connections_accepted.inc();
        let (evicted, state_now) = (slot.evicted(), state.clone());
        // The connection's place in `max_connections`, handed to its stream if it upgrades.
        let slot = Arc::new(std::sync::Mutex::new(Some(slot)));
        let state = state.clone();
        let (streams, stream_closing, stream_slot) =
            (connection_tasks.clone(), closing.clone(), slot.clone());
        let stream_shards = shards.clone();
        // The connection's last accepted token, handed to its stream too.
        let last = Arc::new(LastCaller::default());
        // A permit once a request began: closing, a new connection answers its first.
        let began = Arc::new(tokio::sync::Notify::new());
        let began_in_service = began.clone();
        let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
            began_in_service.notify_one();
            let (state, streams, closing) =
                (state.clone(), streams.clone(), stream_closing.clone());
            let shards = stream_shards.clone();
            let (slot, last) = (stream_slot.clone(), last.clone());
            async move {
                let req = req.map(BodyExt::boxed);
                // The place becomes the caller's own, within its share of connections; a
                // request without a valid token gives it back.
                let shown = |caller: Option<&Caller>| {
                    let mut slot = lock(&slot);
                    let Some(caller) = caller else {
                        slot.as_mut().map(Slot::unprove);
                        return true;
                    };
                    let own = || state.take_share(caller, Share::Connections, 1).ok();
                    slot.as_mut().is_none_or(|slot| slot.prove(own))
                };
                // An error is a step for a session that moved: the connection closes
                // unanswered, and the sidecar sends it again on a new one.
                let mut response = api::handle(state.clone(), peer, req, (&last, shown)).await?;
                if let Some(upgrading) = response.extensions_mut().remove::<stream::Upgrading>() {
                    // A stream's place is its own (nobody would act on its eviction): its
                    // identity's streams are bounded by `max_streams_per_token`.
                    let mut slot = lock(&slot).take();
                    if slot.as_mut().is_none_or(Slot::settle) {
                        let placing = (shards, streams.clone());
                        let held = (slot, closing);
                        streams.spawn(carry_stream(state, peer, upgrading, held, placing));
                    }
                }
                Ok::<_, crate::Error>(response)
            }
        });
        let closing = closing.clone();
        let tls = tls.clone();
        shards.place(&connection_tasks, stream, move |stream| async move {
            let _slot = slot;
            // Its place taken by a new connection before it showed a token, it closes.
            let evicted = async {
                evicted.cancelled().await;
                state_now.metrics.connections_evicted.inc();
                debug!(%peer, "a connection whose place was not its own closed to make room for a new one");
            };
            tokio::select! {
                biased;
                () = evicted => {}
                () = http_conn::connection(stream, peer, service, (closing, began), (tls, idle_timeout)) => {}
            }
        });
    }
    // New connections are refused from here on, not left waiting in the backlog (after a
    // take-over, the new process accepts them).
    drop(listener);
    let grace = state.config().shutdown_grace;
    match handed_over {
        true => info!(sessions = state.sessions.len(), ?grace, "taken over: ending what stayed"),
        false => info!(sessions = state.sessions.len(), ?grace, "transport shutting down"),
    }
    ending::drain(&state, grace).await;
    closing.cancel();
    connection_tasks.close();
    if tokio::time::timeout(FLUSH_GRACE, connection_tasks.wait()).await.is_err() {
        warn!("some HTTP connections were still busy at exit");
    }
    shards.stop();
    info!("transport stopped");
    Ok(())
}

/// What a stream holds while it is carried: its HTTP connection's place in `max_connections`
/// (and in `max_connections_per_client`), and the shutdown's last call.
type Held = (Option<Slot>, CancellationToken);

/// Carries an upgraded connection's stream ([`carry`]) on the shard of its lane: a plain TCP
/// socket moves there with the bytes hyper read past the upgrade; a TLS one stays (its state
/// lives in this thread's tasks).
async fn carry_stream(
    state: Arc<AppState>,
    peer: SocketAddr,
    upgrading: stream::Upgrading,
    held: Held,
    (shards, tracker): (Arc<Shards>, TaskTracker),
) {
    // The stream's place in its identity's share, held until the stream ends.
    let (share, caller) = (upgrading.share, upgrading.caller);
    let held = (held.0.map(|slot| slot.with(share)), held.1);
    let upgraded = match upgrading.on_upgrade.await {
        Ok(upgraded) => upgraded,
        Err(e) => return debug!(%peer, error = %e, "a stream's upgrade failed"),
    };
    let seat = upgrading.lane.map(|key| shards.join_lane(key));
    let elsewhere = seat.as_ref().map(LaneSeat::shard).filter(|s| shards.current() != Some(*s));
    // A plain socket is carried bare (with the bytes hyper read past the `101`), not through
    // hyper's layers of upgraded IO; on its lane's shard, moved there when it is elsewhere.
    let parts = match upgraded.downcast::<TokioIo<WriteStall<TcpStream>>>() {
        Ok(parts) => parts,
        Err(upgraded) => {
            return carry(state, caller, TokioIo::new(upgraded), held, seat).await;
        }
    };
    let (tcp, early) = (parts.io.into_inner().into_inner(), parts.read_buf);
    match elsewhere {
        Some(shard) => shards.spawn_on(shard, &tracker, tcp, move |tcp| {
            carry(state, caller, Prefixed::new(early, tcp), held, seat)
        }),
        None => carry(state, caller, Prefixed::new(early, tcp), held, seat).await,
    }
}

/// Carries a stream: each message is a step of the caller that opened it, run by
/// [`crate::run`] while its token holds.
async fn carry<IO: AsyncRead + AsyncWrite + Unpin>(
    state: Arc<AppState>,
    caller: Arc<std::sync::Mutex<HeldCaller>>,
    io: IO,
    (_slot, closing): Held,
    seat: Option<LaneSeat>,
) {
    if let Some(seat) = &seat {
        state.metrics.stream_lanes.set(seat.lanes_open() as i64);
    }
    state.metrics.streams_opened.inc();
    let config = state.config();
    let limits = stream::StreamLimits {
        max_body: config.max_request_bytes.min(common::wire::MAX_STREAM_BODY),
        idle: config.idle_timeout,
    };
    state.metrics.streams_open.inc();
    let answer = |step| {
        let (state, caller) = (state.clone(), caller.clone());
        async move {
            match stream_caller(&state, &caller).await {
                Ok(caller) => crate::run::run(&state, &caller, step).await,
                Err((refusal, identity)) => {
                    state.metrics.unauthorized.inc();
                    info!(%identity, ?refusal, "a stream's token no longer holds: the stream ends");
                    let mut reply =
                        crate::reply::error_response(&crate::Error::Unauthorized(refusal));
                    reply.then = crate::reply::Then::Close;
                    reply
                }
            }
        }
    };
    stream::serve(io, limits, closing, answer).await;
    state.metrics.streams_open.dec();
    if let Some(lanes_open) = seat.map(LaneSeat::leave) {
        state.metrics.stream_lanes.set(lanes_open as i64);
    }
}

/// The caller of a stream's next step: the one its upgrade was authenticated as, while the
/// token holds (see [`HeldCaller`]); else why not, and whose stream it is.
async fn stream_caller(
    state: &AppState,
    held: &std::sync::Mutex<HeldCaller>,
) -> Result<Arc<Caller>, (Refusal, String)> {
    let lock = || held.lock().unwrap_or_else(|p| p.into_inner());
    let now = state.identities();
    if let Some(caller) = lock().holding(&now) {
        return Ok(caller);
    }
    let mut checked = lock().clone();
    let caller = checked.current(&now).await;
    let identity = checked.name().to_owned();
    *lock() = checked;
    caller.map_err(|refusal| (refusal, identity))
}

/// Serves `GET /metrics` (and nothing else) on `listener`, without a token, until `shutdown`.
async fn serve_metrics(
    listener: Arc<TcpListener>,
    state: Arc<AppState>,
    shutdown: CancellationToken,
) {
    while let Some((stream, _)) = common::runtime::accept(&listener, &shutdown).await {
        let state = state.clone();
        let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
            let state = state.clone();
            async move {
                let response = match (req.method().as_str(), req.uri().path()) {
                    ("GET" | "HEAD", "/metrics") => api::metrics(&state),
                    _ => crate::reply::error_response(&crate::Error::NotFound),
                };
                crate::reply::http_response(response)
            }
        });
        tokio::spawn(async move {
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(http_conn::FIRST_BYTE)
                .max_buf_size(http_conn::MAX_BUFFER)
                .serve_connection(TokioIo::new(stream), service);
            drop(tokio::time::timeout(Duration::from_secs(60), conn).await);
        });
    }
}
