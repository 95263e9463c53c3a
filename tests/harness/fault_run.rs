//! A seeded random fault run: a tunnel whose sidecar reaches the transport through the fault
//! proxy, several clients running a mixed workload (autocommit inserts with unique ids,
//! counter updates, transactions, large and medium selects, prepared statements, LOAD DATA
//! LOCAL files, reconnections), and the invariants checked against a direct connection afterwards: every
//! answer as the server gives it, every acknowledged write there exactly once, each session's
//! state intact, no client error while the transport held the session.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql_async::Opts;
use mysql_async::prelude::Queryable;

use crate::fault_workload::{Client, Outcome};
use crate::faults::{FaultPlan, FaultProxy};
use crate::{Tunnel, direct, mysql_port, transport_yaml};

/// What a run does.
#[derive(Debug, Clone, Copy)]
pub struct RunPlan {
    /// The faults.
    pub faults: FaultPlan,
    /// Clients running at once.
    pub clients: usize,
    /// Operations per client.
    pub operations: usize,
    /// zstd answers between the halves.
    pub compressed: bool,
    /// Logins relayed to the server (else checked by the sidecar's `users` entry).
    pub passthrough: bool,
    /// Requests carried on WebSocket streams (`transport.stream: on`), else one HTTP request
    /// each (`off`).
    pub stream: bool,
}

impl RunPlan {
    /// How the run's tunnel carries what: `plain requests, passthrough logins`…
    pub fn describe(&self) -> String {
        format!(
            "{} {}, {} logins",
            if self.compressed { "zstd" } else { "plain" },
            if self.stream { "streams" } else { "requests" },
            if self.passthrough { "passthrough" } else { "listed" }
        )
    }
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Report {
    /// Operations completed.
    pub operations: u64,
    /// Connections the fault proxy cut.
    pub cuts: u64,
    /// Pieces it stalled.
    pub stalls: u64,
    /// Operations that failed at the client (each a failure of the promise: the transport
    /// held every session throughout).
    pub client_errors: Vec<String>,
    /// Answers that differ from what the server gives.
    pub garbled: Vec<String>,
    /// Acknowledged writes missing from the database, or present twice.
    pub writes_lost_or_doubled: Vec<String>,
    /// What the transport still held once the clients had quit and the faults stopped,
    /// beyond what a sidecar keeps for its next sessions (streams stuck on dead connections).
    pub left_behind: Vec<String>,
    /// Answer bytes that passed the proxy towards the sidecar.
    pub bytes_down: u64,
    /// How long the run took.
    pub elapsed: Duration,
}

impl Report {
    /// One line of figures.
    pub fn summary(&self, seed: u64) -> String {
        format!(
            "seed {seed}: {} operations, {} cuts, {} stalls, {:.1} MB of answers in {:.1} s; {} client errors, {} garbled, {} writes lost or doubled",
            self.operations,
            self.cuts,
            self.stalls,
            self.bytes_down as f64 / 1e6,
            self.elapsed.as_secs_f64(),
            self.client_errors.len(),
            self.garbled.len(),
            self.writes_lost_or_doubled.len()
        )
    }

    /// Empty when every invariant held, else what broke (the first few of each).
    pub fn failures(&self) -> String {
        let mut out = String::new();
        for (what, list) in [
            ("client errors", &self.client_errors),
            ("garbled answers", &self.garbled),
            ("writes lost or doubled", &self.writes_lost_or_doubled),
            ("left behind", &self.left_behind),
        ] {
            if !list.is_empty() {
                let _ =
                    writeln!(out, "{} {what}, first: {:?}", list.len(), &list[..list.len().min(5)]);
            }
        }
        out
    }
}

/// Runs the workload through a faulted tunnel and checks it.
pub async fn run(plan: RunPlan) -> Report {
    let started = Instant::now();
    let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let transport_addr = listener.local_addr().expect("addr");
    let proxy = FaultProxy::start(transport_addr, plan.faults).await;
    let transport = transport_yaml(mysql_port())
        .replace("session_timeout: 30s\n", "session_timeout: 60s\nheartbeat_interval: 1s\n");
    let url = format!("http://127.0.0.1:{}/", proxy.port);
    let compression = if plan.compressed { "on" } else { "off" };
    let stream = if plan.stream { "on" } else { "off" };
    let link = format!(
        "listen: 127.0.0.1:0\ntransport:\n  url: {url}\n  token: {}\n  connect_timeout: 2s\n  compression: {compression}\n  stream: {stream}\n",
        crate::TOKEN
    );
    let sidecar = if plan.passthrough {
        link
    } else {
        format!(
            "{link}users:\n  - name: {}\n    password: {}\n    upstream: main\n",
            crate::USER,
            crate::PASSWORD
        )
    };
    let tunnel = Tunnel::start_with(listener, &transport, &sidecar).await;
    // Runs of one seed may go on at once: each its own names.
    let carrier = if plan.stream { "s" } else { "r" };
    let run_tag =
        format!("{:x}_{}{carrier}", plan.faults.seed, if plan.compressed { "z" } else { "p" });
    let table = prepare_tables(&run_tag).await;
    let files = std::env::temp_dir().join(format!("sqltunnel-faults-{run_tag}"));
    std::fs::create_dir_all(&files).expect("file dir");
    let paths: Vec<_> = (0..plan.clients).map(|c| files.join(format!("client-{c}.csv"))).collect();
    let handler = mysql_async::WhiteListFsHandler::new(paths.clone());
    let opts = Opts::from(
        crate::opts(tunnel.sidecar.port(), Some(crate::DATABASE))
            .local_infile_handler(Some(handler)),
    );
    let clients = (0..plan.clients).map(|client| {
        let seed = plan.faults.seed ^ (client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let opts = opts.clone();
        let file = paths[client].clone();
        tokio::spawn(Client::new(client, seed, table.clone(), file).run(opts, plan.operations))
    });
    let mut report = Report::default();
    let mut outcomes = Vec::new();
    for handle in clients.collect::<Vec<_>>() {
        outcomes.push(handle.await.expect("client task"));
    }
    proxy.arm(false);
    for outcome in &outcomes {
        report.operations += outcome.operations;
        report.client_errors.extend(outcome.errors.iter().cloned());
        report.garbled.extend(outcome.garbled.iter().cloned());
    }
    report.writes_lost_or_doubled = check_writes(&table, &outcomes).await;
    report.left_behind = left_behind(tunnel.transport.port()).await;
    report.cuts = proxy.counts.cuts();
    report.stalls = proxy.counts.stalls.load(Ordering::Relaxed);
    report.bytes_down = proxy.counts.down_bytes.load(Ordering::Relaxed);
    report.elapsed = started.elapsed();
    drop(tunnel);
    drop(std::fs::remove_dir_all(&files));
    report
}

/// Streams the transport still holds beyond a sidecar's idle pool (32), 10 s after the clients
/// quit: a stream whose answer was taken over by a resume must end, not wait forever.
async fn left_behind(port: u16) -> Vec<String> {
    const IDLE_POOL: u64 = 32;
    let started = Instant::now();
    loop {
        let open = crate::http::metric(port, Some(crate::TOKEN), "sqltunnel_streams_open").await;
        if open <= IDLE_POOL {
            return Vec::new();
        }
        if started.elapsed() > Duration::from_secs(10) {
            return vec![format!("{open} streams open, more than a sidecar keeps ({IDLE_POOL})")];
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates the run's tables (named by its tag); answers their common prefix.
async fn prepare_tables(tag: &str) -> String {
    let table = format!("faults_{tag}");
    let mut d = direct().await;
    for sql in [
        format!("DROP TABLE IF EXISTS {table}_ids, {table}_counters"),
        format!("CREATE TABLE {table}_ids (id BIGINT PRIMARY KEY, client INT NOT NULL)"),
        format!("CREATE TABLE {table}_counters (client INT PRIMARY KEY, n BIGINT NOT NULL)"),
    ] {
        d.query_drop(sql).await.expect("prepare fault tables");
    }
    table
}

/// Compares the database with what the clients were told.
async fn check_writes(table: &str, outcomes: &[Outcome]) -> Vec<String> {
    let mut d = direct().await;
    let mut wrong = Vec::new();
    for outcome in outcomes {
        let client = outcome.client;
        let ids: Vec<u64> = d
            .exec(format!("SELECT id FROM {table}_ids WHERE client = ? ORDER BY id"), (client,))
            .await
            .expect("ids");
        let mut told = outcome.inserted.clone();
        told.sort_unstable();
        let doubtful = &outcome.doubtful_ids;
        let unexpected: Vec<_> = ids
            .iter()
            .filter(|id| told.binary_search(id).is_err() && !doubtful.contains(id))
            .collect();
        let missing: Vec<_> = told.iter().filter(|id| ids.binary_search(id).is_err()).collect();
        if !unexpected.is_empty() || !missing.is_empty() {
            wrong.push(format!(
                "client {client}: ids missing {missing:?}, not acknowledged {unexpected:?}"
            ));
        }
        let n: Option<u64> = d
            .exec_first(format!("SELECT n FROM {table}_counters WHERE client = ?"), (client,))
            .await
            .expect("counter");
        let n = n.unwrap_or(0);
        let (low, high) = (outcome.counted, outcome.counted + outcome.doubtful_counts);
        if n < low || n > high {
            wrong.push(format!(
                "client {client}: counter {n}, told {low} (up to {high} with failed ones)"
            ));
        }
    }
    wrong
}
