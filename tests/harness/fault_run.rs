//! A seeded random fault run: a tunnel whose sidecar reaches the transport through the fault
//! proxy, several mysql_async clients running a mixed workload (`fault_kinds.rs`), compressed
//! or not, and a PyMySQL client running its own (`fault_python.rs`), and the invariants checked
//! against a direct connection afterwards (`fault_check.rs`): every answer as the server gives
//! it, every acknowledged write there exactly once, each session's state intact, no client
//! error while the transport held the session.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql_async::Opts;

use crate::fault_check::{check_writes, drop_tables, prepare_tables};
use crate::fault_python::PythonClient;
use crate::fault_takeovers::TakeOvers;
use crate::fault_workload::Client;
use crate::faults::{FaultPlan, FaultProxy};
use crate::{Tunnel, mysql_port, transport_yaml};

/// What a run does.
#[derive(Debug, Clone, Copy)]
pub struct RunPlan {
    /// The faults.
    pub faults: FaultPlan,
    /// mysql_async clients running at once.
    pub clients: usize,
    /// A PyMySQL client runs beside them.
    pub python: bool,
    /// Blob inserts (1–4 MB) and reads are part of every client's mix.
    pub blobs: bool,
    /// Operations per client.
    pub operations: usize,
    /// zstd answers between the halves.
    pub compressed: bool,
    /// Logins relayed to the server (else checked by the sidecar's `users` entry).
    pub passthrough: bool,
    /// Requests carried on WebSocket streams (`transport.stream: on`), else one HTTP request
    /// each (`off`).
    pub stream: bool,
    /// A new transport takes the running one over every so often (milliseconds, drawn from
    /// this range).
    pub take_overs: Option<(u64, u64)>,
    /// Sessions left idle after a 3 MB answer, under a share of the resume budget that their
    /// kept answers nearly fill ([`IDLE_SHARE`]): the running steps keep theirs only by taking
    /// the idle ones' room.
    pub idle_sessions: usize,
}

/// The identity's share of the resume budget in a run with idle sessions (16 MiB: four idle
/// sessions keep 12 MB of it).
pub const IDLE_SHARE: u64 = 16 << 20;

impl RunPlan {
    /// How the run's tunnel carries what: `plain requests, passthrough logins`…
    pub fn describe(&self) -> String {
        format!(
            "{} {}, {} logins{}{}{}",
            if self.compressed { "zstd" } else { "plain" },
            if self.stream { "streams" } else { "requests" },
            if self.passthrough { "passthrough" } else { "listed" },
            if self.python { ", PyMySQL too" } else { "" },
            if self.blobs { ", blobs" } else { "" },
            if self.take_overs.is_some() { ", take-overs" } else { "" }
        ) + &if self.idle_sessions > 0 {
            format!(", {} idle sessions holding 12 of a 16 MiB resume share", self.idle_sessions)
        } else {
            String::new()
        }
    }
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Report {
    /// Operations completed.
    pub operations: u64,
    /// Of them, the PyMySQL client's.
    pub python_operations: u64,
    /// Blob inserts acknowledged, and their bytes.
    pub blobs: (u64, u64),
    /// Operations by kind.
    pub kinds: std::collections::BTreeMap<String, u64>,
    /// The slowest operation of each kind.
    pub slowest: std::collections::BTreeMap<String, Duration>,
    /// Connections the fault proxy cut.
    pub cuts: u64,
    /// Pieces it stalled.
    pub stalls: u64,
    /// Take-overs begun.
    pub take_overs: u64,
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
            "seed {seed}: {} operations ({} PyMySQL), {} blobs of {:.1} MB, {} cuts, {} stalls, {} take-overs, {:.1} MB of answers in {:.1} s; {} client errors, {} garbled, {} writes lost or doubled",
            self.operations,
            self.python_operations,
            self.blobs.0,
            self.blobs.1 as f64 / 1e6,
            self.cuts,
            self.stalls,
            self.take_overs,
            self.bytes_down as f64 / 1e6,
            self.elapsed.as_secs_f64(),
            self.client_errors.len(),
            self.garbled.len(),
            self.writes_lost_or_doubled.len()
        )
    }

    /// The operations by kind, on one line: `insert 210, insert (compressed) 190, …`.
    pub fn kinds(&self) -> String {
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        kinds.join(", ")
    }

    /// The slowest operation of each kind, on one line: `insert 0.4 s, blob insert 12.1 s, …`.
    pub fn slowest(&self) -> String {
        let slowest = self.slowest.iter().map(|(k, d)| format!("{k} {:.1} s", d.as_secs_f64()));
        slowest.collect::<Vec<_>>().join(", ")
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
    let mut transport = transport_yaml(mysql_port())
        .replace("session_timeout: 30s\n", "session_timeout: 60s\nheartbeat_interval: 1s\n");
    if plan.idle_sessions > 0 {
        transport.push_str(&format!("max_resume_bytes_per_token: {IDLE_SHARE}\n"));
    }
    // Runs of one seed may go on at once (a replay of it in every test): each its own names.
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let run_tag = format!("{:x}_{}_{run}", plan.faults.seed, std::process::id());
    let socket = TakeOvers::socket_for(&run_tag);
    if plan.take_overs.is_some() {
        // The listener the first transport was given, for the later ones to take over.
        transport.push_str(&format!(
            "take_over_socket: {}\nlisten: {transport_addr}\nshutdown_grace: 3s\n",
            socket.display()
        ));
        transport = transport.replacen("listen: 127.0.0.1:0\n", "", 1);
    }
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
    let take_overs =
        plan.take_overs.map(|every| TakeOvers::start(&transport, socket, plan.faults.seed, every));
    let table = prepare_tables(&run_tag).await;
    let files = std::env::temp_dir().join(format!("sqltunnel-faults-{run_tag}"));
    std::fs::create_dir_all(&files).expect("file dir");
    let paths: Vec<_> = (0..plan.clients).map(|c| files.join(format!("client-{c}.csv"))).collect();
    let handler = mysql_async::WhiteListFsHandler::new(paths.clone());
    let opts = Opts::from(
        crate::opts(tunnel.sidecar.port(), Some(crate::DATABASE))
            .local_infile_handler(Some(handler)),
    );
    let idle = idle_sessions(opts.clone(), plan.idle_sessions).await;
    let seed_of = move |client: usize| {
        plan.faults.seed ^ (client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    };
    let mut clients: Vec<_> = (0..plan.clients)
        .map(|client| {
            let (opts, file) = (opts.clone(), paths[client].clone());
            let me = Client::new(client, seed_of(client), table.clone(), file, plan.blobs);
            tokio::spawn(me.run(opts, plan.operations))
        })
        .collect();
    if plan.python {
        let (client, table, file) = (plan.clients, table.clone(), files.join("python.csv"));
        let port = tunnel.sidecar.port();
        let seed = seed_of(client);
        clients.push(tokio::spawn(async move {
            let operations = plan.operations;
            let python = PythonClient {
                client,
                seed,
                port,
                table: &table,
                file: &file,
                operations,
                blobs: plan.blobs,
            };
            python.run().await
        }));
    }
    let mut report = Report::default();
    let mut outcomes = Vec::new();
    for handle in clients {
        outcomes.push(handle.await.expect("client task"));
    }
    proxy.arm(false);
    drop(idle);
    report.take_overs = take_overs.as_ref().map_or(0, TakeOvers::begun);
    for outcome in &outcomes {
        report.operations += outcome.operations;
        report.client_errors.extend(outcome.errors.iter().cloned());
        report.garbled.extend(outcome.garbled.iter().cloned());
        report.blobs.0 += outcome.blobs.len() as u64;
        report.blobs.1 += outcome.blobs.iter().map(|b| b.len).sum::<u64>();
        for (kind, n) in &outcome.kinds {
            *report.kinds.entry(kind.clone()).or_default() += n;
        }
        for (kind, took) in &outcome.slowest {
            let slowest = report.slowest.entry(kind.clone()).or_default();
            *slowest = (*slowest).max(*took);
        }
    }
    report.python_operations = if plan.python { outcomes[plan.clients].operations } else { 0 };
    let (wrong, garbled_writes) = check_writes(&table, &outcomes).await;
    report.writes_lost_or_doubled = wrong;
    report.garbled.extend(garbled_writes);
    report.left_behind = left_behind(tunnel.transport.port()).await;
    report.cuts = proxy.counts.cuts();
    report.stalls = proxy.counts.stalls.load(Ordering::Relaxed);
    report.bytes_down = proxy.counts.down_bytes.load(Ordering::Relaxed);
    report.elapsed = started.elapsed();
    drop(take_overs);
    drop(tunnel);
    drop(std::fs::remove_dir_all(&files));
    // What broke stays in the database to look at.
    if report.failures().is_empty() {
        drop_tables(&table).await;
    }
    report
}

/// `n` sessions, each left idle after a 3 MB answer (read whole: through the faults, resumed).
async fn idle_sessions(opts: Opts, n: usize) -> Vec<mysql_async::Conn> {
    use mysql_async::prelude::Queryable;
    let mut idle = Vec::new();
    for _ in 0..n {
        let mut conn = mysql_async::Conn::new(opts.clone()).await.expect("an idle session");
        let sql = "SELECT REPEAT('x', 1000000) FROM seq_1_to_3";
        let rows: Vec<String> = conn.query(sql).await.expect("its 3 MB answer");
        assert_eq!(rows.iter().map(String::len).sum::<usize>(), 3_000_000);
        idle.push(conn);
    }
    idle
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
