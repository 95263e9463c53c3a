//! A seeded random fault run: a tunnel whose sidecar reaches the transport through the fault
//! proxy, several clients running a mixed workload (autocommit inserts with unique ids,
//! counter updates, transactions, large and medium selects, prepared statements, LOAD DATA
//! LOCAL files, reconnections), and the invariants checked against a direct connection afterwards: every
//! answer as the server gives it, every acknowledged write there exactly once, each session's
//! state intact, no client error while the transport held the session.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

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
        ] {
            if !list.is_empty() {
                let _ =
                    writeln!(out, "{} {what}, first: {:?}", list.len(), &list[..list.len().min(5)]);
            }
        }
        out
    }
}

/// The rows of the large select: `seq` and 50 `x`.
const LARGE_ROWS: u64 = 20_000;

/// Longest an operation may take before it counts as a hang.
const OPERATION_LIMIT: Duration = Duration::from_secs(30);

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
    let link = format!(
        "listen: 127.0.0.1:0\ntransport:\n  url: {url}\n  token: {}\n  connect_timeout: 2s\n  compression: {compression}\n",
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
    // Runs of one seed may go on at once (with and without compression): each its own names.
    let run_tag = format!("{:x}_{}", plan.faults.seed, if plan.compressed { "z" } else { "p" });
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
    report.cuts = proxy.counts.cuts();
    report.stalls = proxy.counts.stalls.load(Ordering::Relaxed);
    report.bytes_down = proxy.counts.down_bytes.load(Ordering::Relaxed);
    report.elapsed = started.elapsed();
    drop(tunnel);
    drop(std::fs::remove_dir_all(&files));
    report
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

/// What one client did.
#[derive(Debug, Default)]
struct Outcome {
    client: usize,
    operations: u64,
    errors: Vec<String>,
    garbled: Vec<String>,
    /// Ids whose insert was acknowledged.
    inserted: Vec<u64>,
    /// Ids whose insert failed: they may or may not be there.
    doubtful_ids: Vec<u64>,
    /// Counter increments acknowledged.
    counted: u64,
    /// Increments whose outcome is unknown.
    doubtful_counts: u64,
}

/// One client of the run.
struct Client {
    rng: SmallRng,
    table: String,
    /// The file its LOAD DATA LOCAL reads.
    file: std::path::PathBuf,
    outcome: Outcome,
    next_id: u64,
}

impl Client {
    fn new(client: usize, seed: u64, table: String, file: std::path::PathBuf) -> Self {
        let outcome = Outcome { client, ..Outcome::default() };
        let next_id = client as u64 * 1_000_000_000;
        Client { rng: SmallRng::seed_from_u64(seed), table, file, outcome, next_id }
    }

    async fn run(mut self, opts: Opts, operations: usize) -> Outcome {
        let client = self.outcome.client;
        let mut conn = None;
        for op in 0..operations {
            let mut c = match conn.take() {
                Some(c) => c,
                None => match self.connect(&opts).await {
                    Ok(c) => c,
                    Err(e) => {
                        self.outcome.errors.push(format!("client {client} op {op}: connect: {e}"));
                        continue;
                    }
                },
            };
            let result = tokio::time::timeout(OPERATION_LIMIT, self.operation(&mut c)).await;
            let Ok(result) = result else {
                self.outcome
                    .errors
                    .push(format!("client {client} op {op}: no answer within {OPERATION_LIMIT:?}"));
                continue;
            };
            self.outcome.operations += 1;
            match result {
                Ok(Step::Keep) => conn = Some(c),
                Ok(Step::Reconnect) => drop(c.disconnect().await),
                Err(e) => self.outcome.errors.push(format!("client {client} op {op}: {e}")),
            }
        }
        if let Some(c) = conn {
            drop(c.disconnect().await);
        }
        self.outcome
    }

    async fn connect(&mut self, opts: &Opts) -> Result<Conn, mysql_async::Error> {
        let mut conn = Conn::new(opts.clone()).await?;
        conn.query_drop(format!("SET @client = {}", self.outcome.client)).await?;
        Ok(conn)
    }

    async fn operation(&mut self, c: &mut Conn) -> Result<Step, mysql_async::Error> {
        let table = self.table.clone();
        let client = self.outcome.client;
        match self.rng.random_range(0..100u32) {
            0..30 => {
                let id = self.fresh_id();
                let done = c
                    .exec_drop(format!("INSERT INTO {table}_ids VALUES (?, ?)"), (id, client))
                    .await;
                self.settle_insert(id, done.is_ok());
                done?;
            }
            30..50 => {
                let done = c
                    .exec_drop(
                        format!("INSERT INTO {table}_counters VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1"),
                        (client,),
                    )
                    .await;
                self.settle_count(done.is_ok());
                done?;
            }
            50..62 => {
                let id = self.fresh_id();
                let done = self.transaction(c, id).await;
                self.settle_insert(id, done.is_ok());
                self.settle_count(done.is_ok());
                done?;
            }
            62..75 => {
                let rows: Vec<(u64, String)> = typed(
                    c.query(format!("SELECT seq, REPEAT('x', 50) FROM seq_1_to_{LARGE_ROWS}"))
                        .await?,
                );
                let good = rows.len() as u64 == LARGE_ROWS
                    && rows.iter().enumerate().all(|(i, (s, x))| {
                        *s == i as u64 + 1 && x.len() == 50 && x.bytes().all(|b| b == b'x')
                    });
                if !good {
                    self.garbled(format!("large select: {} rows", rows.len()));
                }
            }
            75..88 => {
                let (n, width) =
                    (self.rng.random_range(1..4000u64), self.rng.random_range(0..300u64));
                let rows: Vec<(u64, Option<String>)> = typed(
                    c.query(format!(
                        "SELECT seq, REPEAT(CHAR(65 + seq % 26), {width}) FROM seq_1_to_{n}"
                    ))
                    .await?,
                );
                let good = rows.len() as u64 == n
                    && rows.iter().enumerate().all(|(i, (s, text))| {
                        let letter = (b'A' + ((i as u64 + 1) % 26) as u8) as char;
                        *s == i as u64 + 1
                            && text.as_deref().is_some_and(|t| {
                                t.len() as u64 == width && t.chars().all(|ch| ch == letter)
                            })
                    });
                if !good {
                    self.garbled(format!(
                        "medium select of {n} rows × {width}: {} rows",
                        rows.len()
                    ));
                }
            }
            88..95 => {
                let n = self.rng.random_range(1..2000u64);
                let rows: Vec<(u64, u64)> = typed(
                    c.exec("SELECT seq, seq * seq FROM seq_1_to_100000 WHERE seq <= ?", (n,))
                        .await?,
                );
                let good = rows.len() as u64 == n
                    && rows
                        .iter()
                        .enumerate()
                        .all(|(i, (s, sq))| *s == i as u64 + 1 && *sq == s * s);
                if !good {
                    self.garbled(format!("prepared select of {n}: {} rows", rows.len()));
                }
            }
            95..97 => {
                // A file of 1 to 1,500 ids (up to about 20 KB), loaded once.
                let rows = self.rng.random_range(1..1500);
                let ids: Vec<u64> = (0..rows).map(|_| self.fresh_id()).collect();
                let text: String = ids.iter().map(|id| format!("{id},{client}\n")).collect();
                std::fs::write(&self.file, text).expect("write the file");
                let done = c
                    .query_drop(format!(
                        "LOAD DATA LOCAL INFILE '{}' INTO TABLE {table}_ids FIELDS TERMINATED BY ','",
                        self.file.display()
                    ))
                    .await;
                let loaded = done.is_ok() && c.affected_rows() == rows;
                if done.is_ok() && !loaded {
                    self.garbled(format!("a load of {rows} rows affected {}", c.affected_rows()));
                }
                for id in ids {
                    self.settle_insert(id, loaded);
                }
                done?;
            }
            97..98 => {
                let (who, id): (Option<u64>, u64) =
                    c.query_first("SELECT @client, CONNECTION_ID()").await?.unwrap_or_default();
                if who != Some(client as u64) || id == 0 {
                    self.garbled(format!("session state: @client = {who:?}"));
                }
            }
            _ => return Ok(Step::Reconnect),
        }
        Ok(Step::Keep)
    }

    async fn transaction(&mut self, c: &mut Conn, id: u64) -> Result<(), mysql_async::Error> {
        let (table, client) = (self.table.clone(), self.outcome.client);
        c.query_drop("BEGIN").await?;
        c.exec_drop(format!("INSERT INTO {table}_ids VALUES (?, ?)"), (id, client)).await?;
        c.exec_drop(
            format!("INSERT INTO {table}_counters VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1"),
            (client,),
        )
        .await?;
        let seen: Option<u64> =
            c.exec_first(format!("SELECT COUNT(*) FROM {table}_ids WHERE id = ?"), (id,)).await?;
        if seen != Some(1) {
            self.garbled(format!("transaction does not see its own insert of {id}"));
        }
        c.query_drop("COMMIT").await
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn settle_insert(&mut self, id: u64, ok: bool) {
        if ok { self.outcome.inserted.push(id) } else { self.outcome.doubtful_ids.push(id) }
    }

    fn settle_count(&mut self, ok: bool) {
        if ok { self.outcome.counted += 1 } else { self.outcome.doubtful_counts += 1 }
    }

    fn garbled(&mut self, what: String) {
        self.outcome.garbled.push(format!("client {}: {what}", self.outcome.client));
    }
}

/// Rows converted to `T`, stopping at the first that does not convert (a garbled row, which
/// the caller sees as a short answer).
fn typed<T: mysql_async::prelude::FromRow>(rows: Vec<mysql_async::Row>) -> Vec<T> {
    rows.into_iter().map_while(|row| mysql_async::from_row_opt(row).ok()).collect()
}

/// What the client does after an operation.
enum Step {
    Keep,
    Reconnect,
}
