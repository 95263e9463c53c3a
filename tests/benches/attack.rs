//! The door under sustained attack, measured: a legitimate client (a real sidecar, a new login
//! and `SELECT 1` each time, as a person opening a connection) against a transport at the
//! shipped limits, with no attack and under each attack in turn, interleaved over rounds in
//! a rotating order. Each attack runs in a process of its own (this program again, with
//! `--attacker`), from another address than the client's, so that it takes a fair share of the
//! machine rather than the client's own threads. Prints, per attack, the median and 95th
//! percentile of the client's login + query, its rate, and their ratios to no attack measured
//! in the same round; failures, if any.
//! Usage: `cargo bench -p e2e --bench attack -- [ROUNDS] [SECONDS] [FLOOD_PER_SECOND]` (MariaDB
//! at SQLTUNNEL_TEST_MYSQL_PORT; `scripts/bench.sh attack` runs it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use e2e::TOKEN;
use e2e::door::{Legit, attacker_connect, logged_in_session, read_head, transport_with};
use tokio::io::AsyncWriteExt;

/// What runs against the door while the client works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attack {
    None,
    /// Requests without a token, as fast as `rate` allows, a new connection each.
    TokenlessFlood,
    /// Wrong tokens from 64 connections at once, each sent again as soon as it is answered.
    Guessing,
    /// 16 chunked bodies trickled a byte a second on logged-in sessions, renewed as they fail.
    Trickle,
    /// 2,000 connections that send nothing.
    Silent,
}

/// One attack's run: the client's times, their count, its failures and its rate.
struct Measured {
    attack: Attack,
    times: Vec<Duration>,
    failures: Vec<String>,
    per_second: f64,
}

const ATTACKS: [Attack; 5] =
    [Attack::None, Attack::TokenlessFlood, Attack::Guessing, Attack::Trickle, Attack::Silent];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench").peekable();
    if args.peek().map(String::as_str) == Some("--attacker") {
        let mut rest = args.skip(1);
        let (attack, port, rate, count) = (rest.next(), rest.next(), rest.next(), rest.next());
        let attack = ATTACKS.into_iter().find(|a| Some(format!("{a:?}")) == attack);
        let (Some(attack), Some(port), Some(rate), Some(count)) =
            (attack, port.and_then(|p| p.parse().ok()), rate.and_then(|r| r.parse().ok()), count)
        else {
            eprintln!("usage: attack --attacker KIND PORT RATE COUNT_FILE");
            std::process::exit(2);
        };
        return attacker(attack, port, rate, count.into()).await;
    }
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let rate: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    println!(
        "attack bench: {rounds} rounds of {seconds} s per attack, tokenless flood at {rate}/s"
    );
    let (transport, port) = transport_with("attack-bench", "").await;
    let legit = Legit::start(port).await;
    legit.login_and_query().await.expect("the client works");
    let mut results: Vec<Measured> = Vec::new();
    for round in 0..rounds {
        for i in 0..ATTACKS.len() {
            let attack = ATTACKS[(i + round) % ATTACKS.len()];
            let count =
                std::env::temp_dir().join(format!("sqltunnel-attack-{}.count", std::process::id()));
            drop(std::fs::remove_file(&count));
            let mut child = (attack != Attack::None).then(|| {
                std::process::Command::new(std::env::current_exe().expect("this program"))
                    .args([
                        "--attacker",
                        &format!("{attack:?}"),
                        &port.to_string(),
                        &rate.to_string(),
                    ])
                    .arg(&count)
                    .spawn()
                    .expect("the attacker starts")
            });
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let sent_before = read_count(&count);
            let (mut times, mut failures) = (Vec::new(), Vec::new());
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(seconds) {
                match legit.login_and_query().await {
                    Ok(t) => times.push(t),
                    Err(e) => failures.push(e),
                }
            }
            let per_second = times.len() as f64 / started.elapsed().as_secs_f64();
            let sent = read_count(&count).saturating_sub(sent_before);
            let attack_rate = sent as f64 / started.elapsed().as_secs_f64();
            if let Some(child) = child.as_mut() {
                drop(child.kill());
                drop(child.wait());
            }
            let n = times.len();
            println!(
                "round {round} {attack:?}: {n} logins, median {:.2} ms, {per_second:.0}/s, {} failures, attack {attack_rate:.0} requests/s",
                ms(percentile(&mut times.clone(), 50)),
                failures.len()
            );
            results.push(Measured { attack, times, failures, per_second });
            // What the attack left ends before the next (silent sockets, trickled bodies).
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }
    println!(
        "\n| attack | median login + query | p95 | logins/s | median vs none | rate vs none | failures |"
    );
    println!("|---|---|---|---|---|---|---|");
    let summary = |attack: Attack| {
        let mine: Vec<_> = results.iter().filter(|r| r.attack == attack).collect();
        let mut all: Vec<Duration> = mine.iter().flat_map(|r| r.times.clone()).collect();
        let mut rates: Vec<f64> = mine.iter().map(|r| r.per_second).collect();
        rates.sort_by(f64::total_cmp);
        let failures: usize = mine.iter().map(|r| r.failures.len()).sum();
        (
            percentile(&mut all.clone(), 50),
            percentile(&mut all, 95),
            rates[rates.len() / 2],
            failures,
        )
    };
    let (none_median, _, none_rate, _) = summary(Attack::None);
    let mut broken = false;
    for attack in ATTACKS {
        let (median, p95, rate, failures) = summary(attack);
        println!(
            "| {attack:?} | {:.2} ms | {:.2} ms | {rate:.0} | {:.2} | {:.2} | {failures} |",
            ms(median),
            ms(p95),
            median.as_secs_f64() / none_median.as_secs_f64(),
            rate / none_rate
        );
        broken |= failures > 0;
    }
    for r in &results {
        for f in r.failures.iter().take(3) {
            println!("{:?}: {f}", r.attack);
        }
    }
    println!(
        "transport: {} KiB resident, {} descriptors",
        transport.rss_kib(),
        transport.open_fds()
    );
    if broken {
        std::process::exit(1);
    }
}

/// An attacker's process: runs `attack` until killed, writing how many requests it sent to
/// `count` as it goes.
async fn attacker(attack: Attack, port: u16, rate: u64, count: std::path::PathBuf) {
    let (stop, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let _tasks = start(attack, port, rate, stop, sent.clone()).await;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(std::fs::write(&count, sent.load(Ordering::Relaxed).to_string()));
    }
}

/// The count an attacker wrote (0 before it wrote one).
fn read_count(path: &std::path::Path) -> u64 {
    std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(times: &mut [Duration], p: usize) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    times.sort();
    times[(times.len() - 1) * p / 100]
}

/// Starts `attack` at the transport on `port`; its tasks stop at `stop` (or are aborted).
async fn start(
    attack: Attack,
    port: u16,
    rate: u64,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    match attack {
        Attack::None => {}
        Attack::TokenlessFlood => {
            let loops = 64u64;
            let gap = Duration::from_micros(1_000_000 * loops / rate.max(1));
            for _ in 0..loops {
                let (stop, sent) = (stop.clone(), sent.clone());
                tasks.push(tokio::spawn(async move {
                    let mut tick = tokio::time::interval(gap);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    while !stop.load(Ordering::Relaxed) {
                        tick.tick().await;
                        let Ok(mut s) = attacker_connect(port).await else { continue };
                        let req =
                            "POST /v1/relay HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}";
                        if s.write_all(req.as_bytes()).await.is_ok() {
                            sent.fetch_add(1, Ordering::Relaxed);
                            drop(read_head(&mut s, Duration::from_secs(5)).await);
                        }
                    }
                }));
            }
        }
        Attack::Guessing => {
            for i in 0..64u64 {
                let (stop, sent) = (stop.clone(), sent.clone());
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut s) = attacker_connect(port).await else { continue };
                        loop {
                            let guess = format!("GET /v1/ready HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer guess-{i}-{:032x}\r\n\r\n", sent.load(Ordering::Relaxed));
                            if s.write_all(guess.as_bytes()).await.is_err() {
                                break;
                            }
                            sent.fetch_add(1, Ordering::Relaxed);
                            if read_head(&mut s, Duration::from_secs(5)).await.is_none() {
                                break;
                            }
                        }
                    }
                }));
            }
        }
        Attack::Trickle => {
            for _ in 0..16 {
                let (stop, sent) = (stop.clone(), sent.clone());
                let id = logged_in_session(port).await;
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let head = format!("POST /v1/sessions/{id}/command HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n");
                        let Ok(mut s) = attacker_connect(port).await else { continue };
                        drop(s.write_all(head.as_bytes()).await);
                        sent.fetch_add(1, Ordering::Relaxed);
                        while s.write_all(b"1\r\nx\r\n").await.is_ok() {
                            if read_head(&mut s, Duration::from_secs(1)).await.is_some() || stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                    }
                }));
            }
        }
        Attack::Silent => {
            let mut held = Vec::new();
            for _ in 0..2000 {
                if let Ok(s) = attacker_connect(port).await {
                    held.push(s);
                }
            }
            sent.fetch_add(held.len() as u64, Ordering::Relaxed);
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                drop(held);
            }));
        }
    }
    tasks
}
