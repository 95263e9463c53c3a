//! A fault-injecting TCP proxy for seeded random fault runs: each connection it relays is cut
//! after a random number of bytes (drawn per direction, so a cut lands anywhere: a request's
//! head or body, a response head, a chunk-size line, a frame header, a payload, a zstd block),
//! with a reset or a plain close, and pieces are stalled at random. Every draw comes from one
//! seed, which the test prints.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// What the proxy does to the connections it relays.
#[derive(Debug, Clone, Copy)]
pub struct FaultPlan {
    /// Seed of every draw.
    pub seed: u64,
    /// Bytes towards the client (answers) after which a connection is cut, drawn uniformly.
    pub down_cut: (u64, u64),
    /// Bytes towards the server (requests) after which a connection is cut, drawn uniformly.
    pub up_cut: (u64, u64),
    /// Share of cuts that reset (RST) rather than close (FIN).
    pub reset_share: f64,
    /// Chance that a piece is stalled before it passes.
    pub stall_chance: f64,
    /// Longest stall.
    pub max_stall: Duration,
}

impl FaultPlan {
    /// The plan of the fault runs: a cut on average every 100 KB of answers (10 KB when they
    /// are compressed, so that zstd streams are cut as often per answer) and every 20 KB of
    /// requests.
    pub fn for_run(seed: u64, compressed: bool) -> Self {
        Self::cuts(seed, if compressed { 10_000 } else { 100_000 }, 20_000)
    }

    /// Cuts every `lo`–`hi` bytes, drawn uniformly, of requests and of answers alike (of
    /// answers a tenth of that when they are zstd-compressed, as in [`Self::for_run`]).
    pub fn every(seed: u64, (lo, hi): (u64, u64), compressed: bool) -> Self {
        let down_cut = if compressed { (lo / 10, hi / 10) } else { (lo, hi) };
        FaultPlan { down_cut, up_cut: (lo, hi), ..Self::cuts(seed, 1, 1) }
    }

    /// This plan with requests cut every `lo`–`hi` bytes instead.
    pub fn requests_cut_every(self, range: (u64, u64)) -> Self {
        FaultPlan { up_cut: range, ..self }
    }

    /// The plan a setting names (`SQLTUNNEL_FAULT_CUTS`): `ci` ([`Self::for_run`]), `LO-HI`
    /// in KB ([`Self::every`]), or `none` (no cuts, stalls only).
    pub fn from_setting(setting: &str, seed: u64, compressed: bool) -> Option<Self> {
        match setting.trim() {
            "ci" => Some(Self::for_run(seed, compressed)),
            "none" => Some(Self::every(seed, (u64::MAX, u64::MAX), false)),
            range => {
                let (lo, hi) = range.split_once('-')?;
                let kb = |v: &str| v.trim().parse::<f64>().ok().map(|v| (v * 1000.0) as u64);
                Some(Self::every(seed, (kb(lo)?, kb(hi)?), compressed))
            }
        }
    }

    /// Where cuts fall, in words: `answers cut every 2 KB–198 KB, requests every 0.4 KB–39.6 KB`.
    pub fn describe(&self) -> String {
        let size = |b: u64| match b {
            ..1_000_000 => format!("{} KB", b as f64 / 1e3),
            _ => format!("{:.1} MB", b as f64 / 1e6),
        };
        let range = |(lo, hi): (u64, u64)| match lo {
            u64::MAX => "never".to_owned(),
            _ => format!("every {}–{}", size(lo), size(hi)),
        };
        format!("answers cut {}, requests {}", range(self.down_cut), range(self.up_cut))
    }

    /// A plan with a cut on average every `mean_down` bytes of answers and `mean_up` bytes of
    /// requests, half resets, and short stalls on one piece in fifty.
    pub fn cuts(seed: u64, mean_down: u64, mean_up: u64) -> Self {
        FaultPlan {
            seed,
            down_cut: (mean_down / 50, mean_down * 2 - mean_down / 50),
            up_cut: (mean_up / 50, mean_up * 2 - mean_up / 50),
            reset_share: 0.5,
            stall_chance: 0.02,
            max_stall: Duration::from_millis(150),
        }
    }
}

/// What the proxy did so far.
#[derive(Debug, Default)]
pub struct FaultCounts {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections cut by a reset.
    pub resets: AtomicU64,
    /// Connections cut by a close.
    pub closes: AtomicU64,
    /// Pieces stalled.
    pub stalls: AtomicU64,
    /// Bytes passed towards the client.
    pub down_bytes: AtomicU64,
}

impl FaultCounts {
    /// Cuts of either kind.
    pub fn cuts(&self) -> u64 {
        self.resets.load(Ordering::Relaxed) + self.closes.load(Ordering::Relaxed)
    }
}

/// A running fault proxy; stops (closing what it relays) when dropped.
pub struct FaultProxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// What it did.
    pub counts: Arc<FaultCounts>,
    /// While false, connections pass untouched (cuts and stalls off).
    armed: Arc<AtomicBool>,
    stop: CancellationToken,
}

impl FaultProxy {
    /// Relays each connection of `listener` to `target`, faulted by `plan`, on a thread of
    /// its own: like a network, it never waits for the clients' work (a blob hashed, a packet
    /// compressed) on the test's runtime.
    pub fn serve(listener: TcpListener, target: SocketAddr, plan: FaultPlan) -> FaultProxy {
        let port = listener.local_addr().expect("addr").port();
        let listener = listener.into_std().expect("the proxy's listener");
        let counts = Arc::new(FaultCounts::default());
        let armed = Arc::new(AtomicBool::new(true));
        let stop = CancellationToken::new();
        let seeds = Arc::new(Mutex::new(SmallRng::seed_from_u64(plan.seed)));
        let (counts2, armed2, stop2) = (counts.clone(), armed.clone(), stop.clone());
        let relay_all = async move {
            let listener = TcpListener::from_std(listener).expect("the proxy's listener");
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    () = stop2.cancelled() => return,
                };
                let Ok((client, _)) = accepted else { continue };
                counts2.connections.fetch_add(1, Ordering::Relaxed);
                let rng = SmallRng::seed_from_u64(seeds.lock().expect("seeds").random());
                let conn = Faulted { plan, rng, counts: counts2.clone(), armed: armed2.clone() };
                tokio::spawn(conn.relay(client, target));
            }
        };
        // Its relays end with its runtime, when it stops.
        std::thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the proxy's runtime");
                runtime.block_on(relay_all);
            })
            .expect("the proxy's thread");
        FaultProxy { port, counts, armed, stop }
    }

    /// Starts on a free port.
    pub async fn start(target: SocketAddr, plan: FaultPlan) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fault proxy");
        Self::serve(listener, target, plan)
    }

    /// Turns the faults on or off (connections already cut stay cut).
    pub fn arm(&self, on: bool) {
        self.armed.store(on, Ordering::Release);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// One relayed connection and its draws.
struct Faulted {
    plan: FaultPlan,
    rng: SmallRng,
    counts: Arc<FaultCounts>,
    armed: Arc<AtomicBool>,
}

/// Which way a piece goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Up,
    Down,
}

impl Faulted {
    fn draw(&mut self, (lo, hi): (u64, u64)) -> u64 {
        self.rng.random_range(lo..=hi.max(lo))
    }

    async fn relay(mut self, mut client: TcpStream, target: SocketAddr) {
        let Ok(mut server) = TcpStream::connect(target).await else { return };
        drop((client.set_nodelay(true), server.set_nodelay(true)));
        let mut budget_up = self.draw(self.plan.up_cut);
        let mut budget_down = self.draw(self.plan.down_cut);
        let (mut up_buf, mut down_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
        loop {
            let (way, n) = tokio::select! {
                r = client.read(&mut up_buf) => (Way::Up, r),
                r = server.read(&mut down_buf) => (Way::Down, r),
            };
            let n = match n {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let armed = self.armed.load(Ordering::Acquire);
            if armed && self.rng.random_bool(self.plan.stall_chance) {
                self.counts.stalls.fetch_add(1, Ordering::Relaxed);
                let ms = self.rng.random_range(0..=self.plan.max_stall.as_millis() as u64);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            let (budget, piece, to) = match way {
                Way::Up => (&mut budget_up, &up_buf[..n], &mut server),
                Way::Down => (&mut budget_down, &down_buf[..n], &mut client),
            };
            let pass = if armed { (n as u64).min(*budget) as usize } else { n };
            if to.write_all(&piece[..pass]).await.is_err() {
                break;
            }
            if way == Way::Down {
                self.counts.down_bytes.fetch_add(pass as u64, Ordering::Relaxed);
            }
            if pass < n || (armed && pass as u64 == *budget) {
                let reset = self.rng.random_bool(self.plan.reset_share);
                cut(client, server, reset, &self.counts).await;
                return;
            }
            if armed {
                *budget -= pass as u64;
            }
        }
        drop((client.shutdown().await, server.shutdown().await));
    }
}

/// Cuts both legs: a reset (SO_LINGER 0) or a close.
async fn cut(mut client: TcpStream, mut server: TcpStream, reset: bool, counts: &FaultCounts) {
    if reset {
        counts.resets.fetch_add(1, Ordering::Relaxed);
        drop((client.set_zero_linger(), server.set_zero_linger()));
    } else {
        counts.closes.fetch_add(1, Ordering::Relaxed);
        drop((client.shutdown().await, server.shutdown().await));
    }
}
