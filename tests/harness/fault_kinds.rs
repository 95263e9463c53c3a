//! The operations of a fault run's mysql_async client (`fault_workload.rs`), each checked as
//! it is answered against what the server gives for it, and settled (acknowledged or doubtful)
//! for the check against the database afterwards: autocommit inserts, counter updates,
//! transactions, large and medium selects, prepared statements (once, and one reused),
//! CALL of a procedure with several result sets, multi-statement batches, `exec_batch`,
//! LOAD DATA LOCAL, a session check, blob inserts and reads.

use std::fmt::Write as _;

use mysql_async::prelude::{FromRow, Queryable};
use mysql_async::{Conn, Error, Row};
use rand::RngExt;
use sha1::{Digest, Sha1};

use crate::fault_workload::{Blob, Client};

/// The rows of the large select: `seq` and 50 `x`.
const LARGE_ROWS: u64 = 20_000;

impl Client {
    pub(crate) async fn insert(&mut self, c: &mut Conn) -> Result<(), Error> {
        let (id, client, table) = (self.fresh_id(), self.outcome.client, self.table.clone());
        self.will_insert(id);
        let done =
            c.exec_drop(format!("INSERT INTO {table}_ids VALUES (?, ?)"), (id, client)).await;
        self.settle(done.is_ok());
        done
    }

    pub(crate) async fn counter(&mut self, c: &mut Conn) -> Result<(), Error> {
        let (client, table) = (self.outcome.client, self.table.clone());
        self.will_count();
        let done = c
            .exec_drop(
                format!(
                    "INSERT INTO {table}_counters VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1"
                ),
                (client,),
            )
            .await;
        self.settle(done.is_ok());
        done
    }

    pub(crate) async fn transaction(&mut self, c: &mut Conn) -> Result<(), Error> {
        let id = self.fresh_id();
        self.will_insert(id);
        self.will_count();
        let done = self.transaction_of(c, id).await;
        self.settle(done.is_ok());
        done
    }

    async fn transaction_of(&mut self, c: &mut Conn, id: u64) -> Result<(), Error> {
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

    pub(crate) async fn large_select(&mut self, c: &mut Conn) -> Result<(), Error> {
        let rows: Vec<(u64, String)> = typed(
            c.query(format!("SELECT seq, REPEAT('x', 50) FROM seq_1_to_{LARGE_ROWS}")).await?,
        );
        let good = rows.len() as u64 == LARGE_ROWS
            && rows.iter().enumerate().all(|(i, (s, x))| {
                *s == i as u64 + 1 && x.len() == 50 && x.bytes().all(|b| b == b'x')
            });
        if !good {
            self.garbled(format!("large select: {} rows", rows.len()));
        }
        Ok(())
    }

    pub(crate) async fn medium_select(&mut self, c: &mut Conn) -> Result<(), Error> {
        let (n, width) = (self.rng.random_range(1..4000u64), self.rng.random_range(0..300u64));
        let rows: Vec<(u64, Option<String>)> = typed(
            c.query(format!("SELECT seq, REPEAT(CHAR(65 + seq % 26), {width}) FROM seq_1_to_{n}"))
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
            self.garbled(format!("medium select of {n} rows × {width}: {} rows", rows.len()));
        }
        Ok(())
    }

    pub(crate) async fn prepared_select(&mut self, c: &mut Conn) -> Result<(), Error> {
        let n = self.rng.random_range(1..2000u64);
        let rows: Vec<(u64, u64)> =
            typed(c.exec("SELECT seq, seq * seq FROM seq_1_to_100000 WHERE seq <= ?", (n,)).await?);
        let good = rows.len() as u64 == n
            && rows.iter().enumerate().all(|(i, (s, sq))| *s == i as u64 + 1 && *sq == s * s);
        if !good {
            self.garbled(format!("prepared select of {n}: {} rows", rows.len()));
        }
        Ok(())
    }

    /// One statement prepared, executed 2–5 times with other parameters, then closed.
    pub(crate) async fn prepared_reused(&mut self, c: &mut Conn) -> Result<(), Error> {
        let stmt = c
            .prep("SELECT seq, CONCAT('p', seq) FROM seq_1_to_100000 WHERE seq BETWEEN ? AND ?")
            .await?;
        for _ in 0..self.rng.random_range(2..6) {
            let from = self.rng.random_range(1..90_000u64);
            let to = from + self.rng.random_range(0..3000u64);
            let rows: Vec<(u64, String)> = typed(c.exec(&stmt, (from, to)).await?);
            let good = rows.len() as u64 == to - from + 1
                && rows
                    .iter()
                    .zip(from..)
                    .all(|((s, p), want)| *s == want && *p == format!("p{want}"));
            if !good {
                self.garbled(format!("reused statement, {from}..={to}: {} rows", rows.len()));
            }
        }
        c.close(stmt).await
    }

    /// `CALL` of the run's procedure: three result sets and the call's own OK, over the text or
    /// the binary protocol by a draw.
    pub(crate) async fn call(&mut self, c: &mut Conn) -> Result<(), Error> {
        let n = self.rng.random_range(1..1000u64);
        let call = format!("CALL {}_results(?)", self.table);
        let sets = if self.rng.random_bool(0.5) {
            all_sets(c.query_iter(call.replace('?', &n.to_string())).await?).await?
        } else {
            all_sets(c.exec_iter(call, (n,)).await?).await?
        };
        let first: Vec<u64> = sets.first().map(|s| typed(s.clone())).unwrap_or_default();
        let second: Vec<(u64, String)> = sets.get(1).map(|s| typed(s.clone())).unwrap_or_default();
        let third: Vec<u64> = sets.get(2).map(|s| typed(s.clone())).unwrap_or_default();
        let good = first.iter().copied().eq(1..=n)
            && second == [(n, "y".repeat(n as usize))]
            && third == [n]
            && sets.iter().skip(3).all(Vec::is_empty);
        if !good {
            self.garbled(format!("CALL of {n}: {} result sets", sets.len()));
        }
        Ok(())
    }

    /// Several statements in one query: 2–5 inserts, a counter and a read of what they wrote.
    pub(crate) async fn multi_statement_batch(&mut self, c: &mut Conn) -> Result<(), Error> {
        let (table, client) = (self.table.clone(), self.outcome.client);
        let ids: Vec<u64> = (0..self.rng.random_range(2..6)).map(|_| self.fresh_id()).collect();
        ids.iter().for_each(|id| self.will_insert(*id));
        self.will_count();
        let mut sql = String::new();
        for id in &ids {
            let _ = write!(sql, "INSERT INTO {table}_ids VALUES ({id}, {client});");
        }
        let (first, last) = (ids[0], ids[ids.len() - 1]);
        let _ = write!(
            sql,
            "INSERT INTO {table}_counters VALUES ({client}, 1) ON DUPLICATE KEY UPDATE n = n + 1;\
             SELECT COUNT(*) FROM {table}_ids WHERE id BETWEEN {first} AND {last}"
        );
        let done = match c.query_iter(sql).await {
            Ok(result) => all_sets(result).await,
            Err(e) => Err(e),
        };
        self.settle(done.is_ok());
        let sets = done?;
        let count: Vec<u64> = sets.last().map(|s| typed(s.clone())).unwrap_or_default();
        let good = sets.len() == ids.len() + 2
            && sets[..ids.len() + 1].iter().all(Vec::is_empty)
            && count == [ids.len() as u64];
        if !good {
            self.garbled(format!("batch of {} inserts: {} sets, {count:?}", ids.len(), sets.len()));
        }
        Ok(())
    }

    /// mysql_async's `exec_batch`: one prepared insert executed for 2–20 ids.
    pub(crate) async fn exec_batch(&mut self, c: &mut Conn) -> Result<(), Error> {
        let (table, client) = (self.table.clone(), self.outcome.client);
        let ids: Vec<u64> = (0..self.rng.random_range(2..21)).map(|_| self.fresh_id()).collect();
        ids.iter().for_each(|id| self.will_insert(*id));
        let done = c
            .exec_batch(
                format!("INSERT INTO {table}_ids VALUES (?, ?)"),
                ids.iter().map(|id| (*id, client)),
            )
            .await;
        self.settle(done.is_ok());
        done
    }

    /// A file of 1 to 1,500 ids (up to about 20 KB), loaded once.
    pub(crate) async fn load_data(&mut self, c: &mut Conn) -> Result<(), Error> {
        let (table, client) = (self.table.clone(), self.outcome.client);
        let rows = self.rng.random_range(1..1500);
        let ids: Vec<u64> = (0..rows).map(|_| self.fresh_id()).collect();
        ids.iter().for_each(|id| self.will_insert(*id));
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
        self.settle(loaded);
        done
    }

    pub(crate) async fn session_check(&mut self, c: &mut Conn) -> Result<(), Error> {
        let client = self.outcome.client as u64;
        let (who, id): (Option<u64>, u64) =
            c.query_first("SELECT @client, CONNECTION_ID()").await?.unwrap_or_default();
        if who != Some(client) || id == 0 {
            self.garbled(format!("session state: @client = {who:?}"));
        }
        Ok(())
    }

    /// 1–4 MB of random bytes, as a prepared statement's parameter or a hex literal.
    pub(crate) async fn blob_insert(&mut self, c: &mut Conn) -> Result<(), Error> {
        let (table, client) = (self.table.clone(), self.outcome.client);
        let mut body = vec![0u8; self.rng.random_range(1_000_000..=4_000_000)];
        self.rng.fill(&mut body[..]);
        let blob = Blob { id: self.fresh_id(), len: body.len() as u64, sha1: sha1_hex(&body) };
        self.will_write(blob.clone());
        let insert = format!("INSERT INTO {table}_blobs (id, client, body) VALUES");
        let done = if self.rng.random_bool(0.5) {
            c.exec_drop(format!("{insert} (?, ?, ?)"), (blob.id, client, body)).await
        } else {
            c.query_drop(format!("{insert} ({}, {client}, x'{}')", blob.id, hex(&body))).await
        };
        self.settle(done.is_ok());
        done
    }

    /// One of the blobs written and acknowledged, read back whole.
    pub(crate) async fn blob_read(&mut self, c: &mut Conn) -> Result<(), Error> {
        let blobs = &self.outcome.blobs;
        let blob = blobs[self.rng.random_range(0..blobs.len())].clone();
        let select = format!("SELECT body FROM {}_blobs WHERE id = {}", self.table, blob.id);
        let bodies: Vec<Vec<u8>> = c.query(select).await?;
        let read: Vec<(u64, String)> =
            bodies.iter().map(|b| (b.len() as u64, sha1_hex(b))).collect();
        if read != [(blob.len, blob.sha1.clone())] {
            let lens: Vec<usize> = bodies.iter().map(Vec::len).collect();
            self.garbled(format!("blob {} of {} bytes read back as {lens:?}", blob.id, blob.len));
        }
        Ok(())
    }
}

/// The SHA-1 of `bytes` in lowercase hex, as MariaDB's `SHA1()` gives it.
pub fn sha1_hex(bytes: &[u8]) -> String {
    hex(&Sha1::digest(bytes))
}

/// `bytes` in lowercase hex.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digits =
        bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]);
    String::from_utf8(digits.collect()).expect("hex digits")
}

/// Every result set of an answer, in order (an OK is an empty one).
async fn all_sets(
    mut result: mysql_async::QueryResult<'_, '_, impl mysql_async::prelude::Protocol>,
) -> Result<Vec<Vec<Row>>, Error> {
    let mut sets = Vec::new();
    while !result.is_empty() {
        sets.push(result.collect::<Row>().await?);
    }
    Ok(sets)
}

/// Rows converted to `T`, stopping at the first that does not convert (a garbled row, which
/// the caller sees as a short answer).
pub fn typed<T: FromRow>(rows: Vec<Row>) -> Vec<T> {
    rows.into_iter().map_while(|row| mysql_async::from_row_opt(row).ok()).collect()
}
