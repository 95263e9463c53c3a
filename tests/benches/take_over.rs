//! Take-over benchmark: through the real binaries, 8 connections run point selects and 2 read
//! a 4 MB answer over and over, for SECONDS without a take-over, then SECONDS with a new
//! transport taking the running one over every 2 s, interleaved ROUNDS times on the same
//! sessions. Prints, for each phase, point selects and large answers per second and the
//! longest a single command took (its stall), then the medians and the throughput ratios.
//! Exits non-zero when a command failed.
//! Usage: `cargo bench -p e2e --bench take_over -- [ROUNDS] [SECONDS]` (release binaries,
//! MariaDB at SQLTUNNEL_TEST_MYSQL_PORT; `scripts/bench.sh take-over` runs it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use e2e::processes::ProcTunnel;
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// Bytes of the large answer.
const LARGE: usize = 4 << 20;
/// Between two take-overs.
const EVERY: Duration = Duration::from_secs(2);

/// What the workers did in one phase.
#[derive(Default)]
struct Counters {
    selects: AtomicU64,
    large: AtomicU64,
    longest_select_us: AtomicU64,
    longest_large_us: AtomicU64,
    errors: AtomicU64,
    running: AtomicBool,
}

/// One phase's figures.
#[derive(Clone, Copy)]
struct Phase {
    selects_per_s: f64,
    large_per_s: f64,
    longest_select: Duration,
    longest_large: Duration,
    take_overs: u32,
}

/// Runs commands on `conn` while `counters.running`, timing each.
async fn work(mut conn: Conn, large: bool, counters: Arc<Counters>, stop: Arc<AtomicBool>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if !counters.running.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let started = Instant::now();
        let ok = if large {
            let sql = format!("SELECT REPEAT('x', {LARGE})");
            let r: Result<Option<Vec<u8>>, _> = conn.query_first(sql).await;
            r.is_ok_and(|r| r.is_some_and(|r| r.len() == LARGE))
        } else {
            n += 1;
            let sql = format!("SELECT seq FROM seq_1_to_100000 WHERE seq = {}", n % 100_000 + 1);
            let r: Result<Option<u64>, _> = conn.query_first(sql).await;
            r.is_ok_and(|r| r == Some(n % 100_000 + 1))
        };
        let took = started.elapsed().as_micros() as u64;
        let longest = if large { &counters.longest_large_us } else { &counters.longest_select_us };
        longest.fetch_max(took, Ordering::Relaxed);
        match (ok, large) {
            (false, _) => drop(counters.errors.fetch_add(1, Ordering::Relaxed)),
            (true, true) => drop(counters.large.fetch_add(1, Ordering::Relaxed)),
            (true, false) => drop(counters.selects.fetch_add(1, Ordering::Relaxed)),
        }
    }
}

/// One phase of `seconds`, with take-overs or not.
async fn phase(tunnel: &mut ProcTunnel, counters: &Counters, seconds: u64, take: bool) -> Phase {
    let all = [&counters.selects, &counters.large];
    for c in all.into_iter().chain([&counters.longest_select_us, &counters.longest_large_us]) {
        c.store(0, Ordering::Relaxed);
    }
    let started = Instant::now();
    counters.running.store(true, Ordering::Relaxed);
    let mut take_overs = 0;
    while started.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(EVERY.min(Duration::from_secs(seconds))).await;
        if take && started.elapsed() < Duration::from_secs(seconds) {
            let next = tunnel.transport.start_again("transport", &["--take-over"], "next");
            let exited = tunnel.transport.exits_within(Duration::from_secs(30)).await;
            assert!(exited, "the old transport did not exit");
            tunnel.transport = next;
            take_overs += 1;
        }
    }
    counters.running.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    Phase {
        selects_per_s: counters.selects.load(Ordering::Relaxed) as f64 / elapsed,
        large_per_s: counters.large.load(Ordering::Relaxed) as f64 / elapsed,
        longest_select: Duration::from_micros(counters.longest_select_us.load(Ordering::Relaxed)),
        longest_large: Duration::from_micros(counters.longest_large_us.load(Ordering::Relaxed)),
        take_overs,
    }
}

fn show(name: &str, p: Phase) -> String {
    format!(
        "{name}: {:.0} point selects/s (longest {:.0} ms), {:.2} large answers/s (longest {:.0} ms), {} take-overs",
        p.selects_per_s,
        p.longest_select.as_secs_f64() * 1e3,
        p.large_per_s,
        p.longest_large.as_secs_f64() * 1e3,
        p.take_overs
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<u64> =
        std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect::<Vec<_>>();
    let rounds = args.first().copied().unwrap_or(3) as usize;
    let seconds = args.get(1).copied().unwrap_or(10);
    let socket = std::env::temp_dir().join(format!("bench-take-over-{}.sock", std::process::id()));
    let extra = format!("take_over_socket: {}\nmax_sessions_per_token: 100\n", socket.display());
    let mut tunnel = ProcTunnel::start("bench-take-over", |t| format!("{t}{extra}"), |s| s).await;
    let (counters, stop) = (Arc::new(Counters::default()), Arc::new(AtomicBool::new(false)));
    let mut workers = Vec::new();
    for i in 0..10 {
        let opts = e2e::opts(tunnel.sidecar_port, Some(e2e::DATABASE));
        let conn = Conn::new(opts).await.expect("connect");
        workers.push(tokio::spawn(work(conn, i >= 8, counters.clone(), stop.clone())));
    }
    println!(
        "take-over bench: 8 point-select connections and 2 reading {} MB answers, {rounds} rounds of {seconds} s without and {seconds} s with a take-over every {} s",
        LARGE >> 20,
        EVERY.as_secs()
    );
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let a = phase(&mut tunnel, &counters, seconds, false).await;
        let b = phase(&mut tunnel, &counters, seconds, true).await;
        println!("round {round}: {}; {}", show("without", a), show("with", b));
        without.push(a);
        with.push(b);
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        drop(w.await);
    }
    let m = |v: &[Phase], f: fn(&Phase) -> f64| median(v.iter().map(f).collect());
    let (sa, sb) = (m(&without, |p| p.selects_per_s), m(&with, |p| p.selects_per_s));
    let (la, lb) = (m(&without, |p| p.large_per_s), m(&with, |p| p.large_per_s));
    let worst = |v: &[Phase], f: fn(&Phase) -> Duration| {
        v.iter().map(|p| f(p).as_secs_f64() * 1e3).fold(0.0, f64::max)
    };
    println!(
        "medians: point selects/s {sa:.0} without, {sb:.0} with (ratio {:.2}); large answers/s {la:.2} without, {lb:.2} with (ratio {:.2})",
        sb / sa,
        lb / la,
    );
    println!(
        "longest point select: {:.0} ms without, {:.0} ms with take-overs; longest large answer: {:.0} ms without, {:.0} ms with",
        worst(&without, |p| p.longest_select),
        worst(&with, |p| p.longest_select),
        worst(&without, |p| p.longest_large),
        worst(&with, |p| p.longest_large),
    );
    let errors = counters.errors.load(Ordering::Relaxed);
    println!("client errors: {errors}");
    drop(std::fs::remove_file(&socket));
    if errors > 0 {
        std::process::exit(1);
    }
}
