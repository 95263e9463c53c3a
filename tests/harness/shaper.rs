//! A TCP shaping proxy (the kernel's netem is not available): a delay each way, a bandwidth
//! limit, a switch that cuts every open connection, and one that refuses new ones (an outage).
//! Used by the drop tests and by the network bench (`shaper` binary).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Largest piece read at once.
const PIECE: usize = 16 * 1024;
/// Pieces in flight each way (with the bandwidth limit, what the "link" holds).
const IN_FLIGHT: usize = 32;

/// How the link behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shape {
    /// Delay each way (half the round trip).
    pub delay: Duration,
    /// Bandwidth each way, bits per second; `None`: unlimited.
    pub bits_per_second: Option<u64>,
}

/// A transport from `transport_yaml` (in-process) and a sidecar reaching it through a shaping
/// proxy with `shape`; `sidecar_extra` goes into the sidecar's `transport` section.
pub async fn tunnel_through(
    shape: Shape,
    transport_yaml: &str,
    sidecar_extra: &str,
) -> (crate::Tunnel, Shaper) {
    let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let shaper = Shaper::start(listener.local_addr().expect("addr"), shape).await;
    let url = format!("http://127.0.0.1:{}/", shaper.port);
    let sidecar = crate::sidecar_yaml(&url, crate::TOKEN)
        .replace("  connect_timeout: 2s\n", &format!("  connect_timeout: 2s\n{sidecar_extra}"));
    let tunnel = crate::Tunnel::start_with(listener, transport_yaml, &sidecar).await;
    (tunnel, shaper)
}

/// A running shaping proxy; stops when dropped.
pub struct Shaper {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    cuts: watch::Sender<u64>,
    refusing: Arc<AtomicBool>,
    accepted: Arc<AtomicU64>,
    downstream: Arc<AtomicU64>,
    upstream: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Shaper {
    /// Listens on a free port and relays each connection to `target`, shaped by `shape`.
    pub async fn start(target: SocketAddr, shape: Shape) -> Shaper {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind shaper");
        Self::serve(listener, target, shape)
    }

    /// Relays each connection of `listener` to `target`, shaped by `shape`.
    pub fn serve(listener: TcpListener, target: SocketAddr, shape: Shape) -> Shaper {
        let port = listener.local_addr().expect("addr").port();
        let (cuts, cut_rx) = watch::channel(0u64);
        let refusing = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicU64::new(0));
        let downstream = Arc::new(AtomicU64::new(0));
        let upstream = Arc::new(AtomicU64::new(0));
        let (refuse, count, down) = (refusing.clone(), accepted.clone(), downstream.clone());
        let up = upstream.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if refuse.load(Ordering::Acquire) {
                    drop(client);
                    continue;
                }
                count.fetch_add(1, Ordering::Relaxed);
                let (cut_rx, counters) = (cut_rx.clone(), (up.clone(), down.clone()));
                tokio::spawn(relay(client, target, shape, cut_rx, counters));
            }
        });
        Shaper { port, cuts, refusing, accepted, downstream, upstream, task }
    }

    /// Cuts every open connection now (both ends see it closed).
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Waits until `bytes` have passed back to clients (at most 20 s), then cuts every
    /// connection; answers how many had passed by then.
    pub async fn cut_after(&self, bytes: u64) -> u64 {
        let start = Instant::now();
        while self.bytes_down() < bytes && start.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.cut();
        self.bytes_down()
    }

    /// While on, new connections are closed as soon as they are accepted.
    pub fn refuse(&self, on: bool) {
        self.refusing.store(on, Ordering::Release);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Bytes passed from clients to the target so far.
    pub fn bytes_up(&self) -> u64 {
        self.upstream.load(Ordering::Relaxed)
    }

    /// Bytes passed from the target back to clients so far.
    pub fn bytes_down(&self) -> u64 {
        self.downstream.load(Ordering::Relaxed)
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

async fn relay(
    client: TcpStream,
    target: SocketAddr,
    shape: Shape,
    mut cut: watch::Receiver<u64>,
    (upstream, downstream): (Arc<AtomicU64>, Arc<AtomicU64>),
) {
    cut.mark_unchanged();
    let Ok(server) = TcpStream::connect(target).await else { return };
    drop((client.set_nodelay(true), server.set_nodelay(true)));
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, shape, upstream);
    let down = pump(server_read, client_write, shape, downstream);
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = cut.changed() => {}
    }
}

/// One direction: pieces leave the link at its bandwidth and arrive `delay` later.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    shape: Shape,
    counter: Arc<AtomicU64>,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Bytes)>(IN_FLIGHT);
    let reader = async move {
        let mut link_free = Instant::now();
        let mut buf = vec![0u8; PIECE];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let now = Instant::now();
            let send_time = shape
                .bits_per_second
                .map_or(Duration::ZERO, |bps| Duration::from_secs_f64(n as f64 * 8.0 / bps as f64));
            link_free = link_free.max(now) + send_time;
            if tx.send((link_free + shape.delay, Bytes::copy_from_slice(&buf[..n]))).await.is_err()
            {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((at, piece)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&piece).await.is_err() {
                return;
            }
            counter.fetch_add(piece.len() as u64, Ordering::Relaxed);
        }
        drop(to.shutdown().await);
    };
    tokio::join!(reader, writer);
}
