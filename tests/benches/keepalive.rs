//! Keep-alive long polls against session ends: one identity keeps 50 logged-in sessions and
//! POLLS long polls listing them (each waits up to the heartbeat interval, 25 s here); another ends ENDS sessions of its own (logged in through the
//! transport, then killed from a direct connection, so that the transport's idle watch ends
//! them). Prints the transport's CPU time per session end with no poll waiting and with POLLS
//! waiting, interleaved ROUNDS times, and their medians: sessions ending elsewhere should cost
//! a waiting poll nothing. Speed is printed, never asserted; exits non-zero when a poll
//! answered before its time.
//! Usage: `cargo bench -p e2e --bench keepalive -- [ROUNDS] [POLLS] [ENDS]` (release binaries,
//! MariaDB at SQLTUNNEL_TEST_MYSQL_PORT; `scripts/bench.sh keepalive` runs it).

use std::collections::HashSet;
use std::time::Duration;

use e2e::door::{logged_in_session_as, transport_with};
use e2e::http::call;
use e2e::{DATABASE, PASSWORD, USER, mysql_port};
use mysql_async::prelude::Queryable;

const ALICE: &str = "alice-T0ken-4Gh7Jk2Lm9Np5Qr8";
const BOB: &str = "bob-T0ken-6Vb3Nm8Xc1Zs4Df7";
/// Sessions of the identity whose polls wait.
const WATCHED: usize = 50;
/// Sessions ended at once (within `max_sessions_per_token`, 100).
const BATCH: usize = 80;

fn arg(n: usize, default: usize) -> usize {
    std::env::args().nth(n).and_then(|a| a.parse().ok()).unwrap_or(default)
}

/// Nanoseconds process `pid`'s threads have run so far (the scheduler's count, finer than the
/// 10 ms ticks of `/proc/PID/stat`).
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The ids of `app`'s connections to the server other than `direct`'s own.
async fn connection_ids(direct: &mut mysql_async::Conn) -> HashSet<u64> {
    let sql = "SELECT id FROM information_schema.processlist WHERE user = 'app' AND id <> CONNECTION_ID()";
    direct.query(sql).await.expect("processlist").into_iter().collect()
}

/// Ends `ends` sessions of bob's (opened and logged in through the transport at `port`, in
/// batches within his `max_sessions_per_token`, then killed upstream); the transport's CPU
/// time in ms meanwhile (the logins' excluded).
async fn end_sessions(port: u16, pid: u32, direct: &mut mysql_async::Conn, ends: usize) -> f64 {
    let mut ns = 0;
    for batch in (0..ends).collect::<Vec<_>>().chunks(BATCH) {
        let before = connection_ids(direct).await;
        for _ in batch {
            logged_in_session_as(port, BOB).await;
        }
        let opened: Vec<u64> = connection_ids(direct).await.difference(&before).copied().collect();
        let started = cpu_ns(pid);
        for id in &opened {
            direct.query_drop(format!("KILL {id}")).await.expect("kill");
        }
        // The idle watch ends each session as its upstream closes.
        tokio::time::sleep(Duration::from_secs(1)).await;
        ns += cpu_ns(pid) - started;
    }
    ns as f64 / 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let (rounds, polls, ends) = (arg(1, 3), arg(2, 200), arg(3, 240));
    let extra = format!(
        "heartbeat_interval: 25s\nidentities:\n  - name: alice\n    token: {ALICE}\n    upstreams: [main]\n  - name: bob\n    token: {BOB}\n    upstreams: [main]\n"
    );
    let (transport, port) = transport_with("bench-keepalive", &extra).await;
    let pid = transport.pid();
    let mut watched = Vec::new();
    for _ in 0..WATCHED {
        watched.push(logged_in_session_as(port, ALICE).await);
    }
    let list = serde_json::json!({ "sessions": watched, "wait_ms": 25_000 }).to_string();
    let refresh = serde_json::json!({ "sessions": watched }).to_string();
    let url = format!("mysql://{USER}:{PASSWORD}@127.0.0.1:{}/{DATABASE}", mysql_port());
    let mut direct = mysql_async::Conn::from_url(url).await.expect("a direct connection");
    let (mut idle, mut waiting) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alice's sessions heard from (they would expire after `session_timeout`, 30 s).
        let (status, _, gone) = call(port, ALICE, "POST", "/v1/keepalive", &refresh).await;
        assert!(status == 200 && !gone.contains("\"gone\":[\""), "{status} {gone}");
        idle.push(end_sessions(port, pid, &mut direct, ends).await / ends as f64);
        let pending: Vec<_> = (0..polls)
            .map(|_| {
                let list = list.clone();
                tokio::spawn(async move { call(port, ALICE, "POST", "/v1/keepalive", &list).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        waiting.push(end_sessions(port, pid, &mut direct, ends).await / ends as f64);
        let answered = pending.iter().filter(|p| p.is_finished()).count();
        println!(
            "round {round}: {ends} session ends, transport CPU per end: {:.3} ms with no poll waiting, {:.3} ms with {polls} waiting",
            idle[round], waiting[round]
        );
        if answered > 0 {
            eprintln!(
                "{answered} of the {polls} polls answered while none of their sessions ended"
            );
            std::process::exit(1);
        }
        pending.iter().for_each(tokio::task::JoinHandle::abort);
    }
    println!(
        "median transport CPU per session end: {:.3} ms with no poll waiting, {:.3} ms with {polls} waiting",
        median(idle),
        median(waiting)
    );
    drop(transport);
}
