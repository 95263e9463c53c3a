//! The workload of a random fault run: one client's mixed operations, drawn from its own seed,
//! each checked as it is answered, and what the client was told (for the check against the
//! database afterwards).

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// The rows of the large select: `seq` and 50 `x`.
const LARGE_ROWS: u64 = 20_000;

/// Longest an operation may take before it counts as a hang.
const OPERATION_LIMIT: Duration = Duration::from_secs(30);

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
}

/// One client of the run.
pub struct Client {
    rng: SmallRng,
    table: String,
    /// The file its LOAD DATA LOCAL reads.
    file: std::path::PathBuf,
    outcome: Outcome,
    next_id: u64,
}

impl Client {
    /// Client number `client`, drawing from `seed`, writing to the tables named `table…` and
    /// loading `file`.
    pub fn new(client: usize, seed: u64, table: String, file: std::path::PathBuf) -> Self {
        let outcome = Outcome { client, ..Outcome::default() };
        let next_id = client as u64 * 1_000_000_000;
        Client { rng: SmallRng::seed_from_u64(seed), table, file, outcome, next_id }
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
