//! The workload of a random fault run: one client's mixed operations over mysql_async, drawn
//! from its own seed (each connection compressed or not, by a draw), each checked as it is
//! answered, and what the client was told (for the check against the database afterwards).
//! The operations themselves are in `fault_kinds.rs`.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Compression, Conn, Opts, OptsBuilder};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// Longest an operation may take before it counts as a hang: a bound for hangs, not a speed
/// check (benchmarks measure speed).
const OPERATION_LIMIT: Duration = Duration::from_secs(30);
/// A blob's: a statement of up to 8 MB (4 MB in hex) whose requests are cut every 2-400 KB
/// resumes from the last whole part each time, over 20 to 60 new connections. Under the tests'
/// load (four fault runs at once on two cores, debug builds) one took 35 s, moving on all the
/// time (seed 20261201).
const BLOB_LIMIT: Duration = Duration::from_secs(90);

/// What one client did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Which client (its ids start at this times 10^9).
    pub client: usize,
    /// Operations done.
    pub operations: u64,
    /// Operations that failed at the client.
    pub errors: Vec<String>,
    /// Answers that differ from what the server gives.
    pub garbled: Vec<String>,
    /// Ids whose insert was acknowledged.
    pub inserted: Vec<u64>,
    /// Ids whose insert failed: they may or may not be there.
    pub doubtful_ids: Vec<u64>,
    /// Counter increments acknowledged.
    pub counted: u64,
    /// Increments whose outcome is unknown.
    pub doubtful_counts: u64,
    /// Blobs whose insert was acknowledged.
    pub blobs: Vec<Blob>,
    /// Blobs whose insert failed: there at most once, and whole if there.
    pub doubtful_blobs: Vec<Blob>,
    /// Operations done by kind (compressed connections' apart).
    pub kinds: std::collections::BTreeMap<String, u64>,
    /// The slowest operation of each kind that was answered.
    pub slowest: std::collections::BTreeMap<String, Duration>,
}

/// A blob a client wrote: its id, length and SHA-1 (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Its row's id.
    pub id: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The SHA-1 of its bytes, as MariaDB's `SHA1()` writes it.
    pub sha1: String,
}

/// One client of the run.
pub struct Client {
    pub(crate) rng: SmallRng,
    pub(crate) table: String,
    /// The file its LOAD DATA LOCAL reads.
    pub(crate) file: std::path::PathBuf,
    pub(crate) outcome: Outcome,
    next_id: u64,
    /// Blob inserts and reads are part of the mix.
    pub(crate) blobs_on: bool,
    /// The connection in use speaks the compressed protocol.
    pub(crate) compressed: bool,
    /// Writes of the running operation, not yet settled.
    pending: Pending,
}

/// Writes an operation is about to make: settled as acknowledged or in doubt once its answer
/// comes, in doubt if none comes in time.
#[derive(Default)]
struct Pending {
    ids: Vec<u64>,
    counts: u64,
    blobs: Vec<Blob>,
}

impl Client {
    /// Client number `client`, drawing from `seed`, writing to the tables named `table…` and
    /// loading `file`; with blob operations when `blobs_on`.
    pub fn new(
        client: usize,
        seed: u64,
        table: String,
        file: std::path::PathBuf,
        blobs_on: bool,
    ) -> Self {
        let outcome = Outcome { client, ..Outcome::default() };
        let next_id = client as u64 * 1_000_000_000;
        let rng = SmallRng::seed_from_u64(seed);
        let pending = Pending::default();
        Client { rng, table, file, outcome, next_id, blobs_on, compressed: false, pending }
    }

    /// Runs `operations` operations (connecting again when told to), then quits.
    pub async fn run(mut self, opts: Opts, operations: usize) -> Outcome {
        let client = self.outcome.client;
        let mut conn = None;
        for op in 0..operations {
            let mut c = match conn.take() {
                Some(c) => c,
                None => match self.connect(&opts).await {
                    Ok(c) => c,
                    Err(e) => {
                        let how = self.how();
                        self.outcome
                            .errors
                            .push(format!("client {client} op {op}: connect{how}: {e}"));
                        continue;
                    }
                },
            };
            let kind = self.draw();
            let how = self.how();
            *self.outcome.kinds.entry(format!("{kind}{how}")).or_default() += 1;
            let limit = if kind.starts_with("blob") { BLOB_LIMIT } else { OPERATION_LIMIT };
            let began = std::time::Instant::now();
            let result = tokio::time::timeout(limit, self.operation(kind, &mut c)).await;
            self.settle(false);
            let Ok(result) = result else {
                self.outcome.errors.push(format!(
                    "client {client} op {op} {kind}{how}: no answer within {limit:?}"
                ));
                continue;
            };
            let slowest = self.outcome.slowest.entry(format!("{kind}{how}")).or_default();
            *slowest = (*slowest).max(began.elapsed());
            self.outcome.operations += 1;
            match result {
                Ok(()) if kind == "reconnect" => drop(c.disconnect().await),
                Ok(()) => conn = Some(c),
                Err(e) => {
                    self.outcome.errors.push(format!("client {client} op {op} {kind}{how}: {e}"))
                }
            }
        }
        if let Some(c) = conn {
            drop(c.disconnect().await);
        }
        self.outcome
    }

    /// Connects, compressed or not by a draw, and marks the session as this client's.
    async fn connect(&mut self, opts: &Opts) -> Result<Conn, mysql_async::Error> {
        self.compressed = self.rng.random_bool(0.5);
        // The compressed protocol, the client's own packets in it sent as they are: the sidecar
        // compresses the answers, whose framing across resumes is what the run tests.
        // mysql_common 0.37 cuts one compressed packet in a few thousand short (its buffer
        // sized to the data; the server hangs up on it, directly too, the sidecar answers
        // 1157), so it is not asked to deflate (tests/client_compression.rs does, briefly).
        let compression = self.compressed.then(Compression::none);
        let opts = OptsBuilder::from_opts(opts.clone()).compression(compression);
        let mut conn = Conn::new(opts).await?;
        conn.query_drop(format!("SET @client = {}", self.outcome.client)).await?;
        Ok(conn)
    }

    /// How the connection speaks, for an error's line.
    fn how(&self) -> &'static str {
        if self.compressed { " (compressed)" } else { "" }
    }

    /// The kind of the next operation, drawn from the mix.
    fn draw(&mut self) -> &'static str {
        match self.rng.random_range(0..100u32) {
            0..22 => "insert",
            22..36 => "counter",
            36..45 => "transaction",
            45..53 => "large select",
            53..61 => "medium select",
            61..66 => "prepared select",
            66..70 => "prepared statement reused",
            70..74 => "CALL with several results",
            74..78 => "multi-statement batch",
            78..81 => "exec_batch",
            81..84 => "LOAD DATA LOCAL",
            84..85 => "session check",
            85..89 if self.blobs_on => "blob insert",
            85..89 => "insert",
            89..92 if self.blobs_on && !self.outcome.blobs.is_empty() => "blob read",
            89..96 => "medium select",
            _ => "reconnect",
        }
    }

    /// Runs one operation of `kind`.
    async fn operation(&mut self, kind: &str, c: &mut Conn) -> Result<(), mysql_async::Error> {
        match kind {
            "insert" => self.insert(c).await,
            "counter" => self.counter(c).await,
            "transaction" => self.transaction(c).await,
            "large select" => self.large_select(c).await,
            "medium select" => self.medium_select(c).await,
            "prepared select" => self.prepared_select(c).await,
            "prepared statement reused" => self.prepared_reused(c).await,
            "CALL with several results" => self.call(c).await,
            "multi-statement batch" => self.multi_statement_batch(c).await,
            "exec_batch" => self.exec_batch(c).await,
            "LOAD DATA LOCAL" => self.load_data(c).await,
            "session check" => self.session_check(c).await,
            "blob insert" => self.blob_insert(c).await,
            "blob read" => self.blob_read(c).await,
            _ => Ok(()),
        }
    }

    pub(crate) fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// An insert of `id` the operation is about to make.
    pub(crate) fn will_insert(&mut self, id: u64) {
        self.pending.ids.push(id);
    }

    /// A counter increment the operation is about to make.
    pub(crate) fn will_count(&mut self) {
        self.pending.counts += 1;
    }

    /// A blob the operation is about to write.
    pub(crate) fn will_write(&mut self, blob: Blob) {
        self.pending.blobs.push(blob);
    }

    /// The writes the operation was about to make, acknowledged (`ok`) or in doubt. After
    /// each operation, whatever it left unsettled (it timed out) is in doubt.
    pub(crate) fn settle(&mut self, ok: bool) {
        let Pending { ids, counts, blobs } = std::mem::take(&mut self.pending);
        let o = &mut self.outcome;
        if ok {
            o.inserted.extend(ids);
            o.counted += counts;
            o.blobs.extend(blobs);
        } else {
            o.doubtful_ids.extend(ids);
            o.doubtful_counts += counts;
            o.doubtful_blobs.extend(blobs);
        }
    }

    pub(crate) fn garbled(&mut self, what: String) {
        self.outcome.garbled.push(format!("client {}: {what}", self.outcome.client));
    }
}
