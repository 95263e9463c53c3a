//! The database side of a fault run: its tables and procedure, made before the clients start,
//! and the check afterwards, over a direct connection, that every write a client was told about
//! is there exactly once (ids, counter increments, blobs by length and SHA-1), that none it was
//! not told about is, and that a failed one is there at most once.

use mysql_async::prelude::Queryable;

use crate::direct;
use crate::fault_workload::{Blob, Outcome};

/// Creates the run's tables and procedure (named by its tag); answers their common prefix.
pub async fn prepare_tables(tag: &str) -> String {
    let table = format!("faults_{tag}");
    let mut d = direct().await;
    for sql in [
        format!("DROP TABLE IF EXISTS {table}_ids, {table}_counters, {table}_blobs"),
        format!("CREATE TABLE {table}_ids (id BIGINT PRIMARY KEY, client INT NOT NULL)"),
        format!("CREATE TABLE {table}_counters (client INT PRIMARY KEY, n BIGINT NOT NULL)"),
        // No unique key: a blob written twice is two rows.
        format!(
            "CREATE TABLE {table}_blobs (id BIGINT NOT NULL, client INT NOT NULL, body LONGBLOB NOT NULL, KEY (id))"
        ),
        format!("DROP PROCEDURE IF EXISTS {table}_results"),
        format!(
            "CREATE PROCEDURE {table}_results(n INT) BEGIN \
             SELECT seq FROM seq_1_to_1000 WHERE seq <= n; \
             SELECT n, REPEAT('y', n); \
             SELECT COUNT(*) FROM seq_1_to_1000 WHERE seq <= n; END"
        ),
    ] {
        d.query_drop(sql).await.expect("prepare fault tables");
    }
    table
}

/// Drops what [`prepare_tables`] made.
pub async fn drop_tables(table: &str) {
    let mut d = direct().await;
    d.query_drop(format!("DROP TABLE IF EXISTS {table}_ids, {table}_counters, {table}_blobs"))
        .await
        .expect("drop fault tables");
    d.query_drop(format!("DROP PROCEDURE IF EXISTS {table}_results")).await.expect("drop");
}

/// Compares the database with what the clients were told: the writes lost, doubled or not
/// acknowledged, and the blobs stored other than written (garbled writes).
pub async fn check_writes(table: &str, outcomes: &[Outcome]) -> (Vec<String>, Vec<String>) {
    let mut d = direct().await;
    let (mut wrong, mut garbled) = (Vec::new(), Vec::new());
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
        check_blobs(&mut d, table, outcome, &mut wrong, &mut garbled).await;
    }
    (wrong, garbled)
}

/// Each acknowledged blob there once and whole, each failed one at most once and whole if
/// there, no other.
async fn check_blobs(
    d: &mut mysql_async::Conn,
    table: &str,
    outcome: &Outcome,
    wrong: &mut Vec<String>,
    garbled: &mut Vec<String>,
) {
    let client = outcome.client;
    let stored: Vec<(u64, u64, u64, String)> = d
        .exec(
            format!("SELECT id, COUNT(*), LENGTH(body), SHA1(body) FROM {table}_blobs WHERE client = ? GROUP BY id, LENGTH(body), SHA1(body)"),
            (client,),
        )
        .await
        .expect("blobs");
    let find = |id: u64| -> Option<(&Blob, bool)> {
        let told = outcome.blobs.iter().find(|b| b.id == id).map(|b| (b, true));
        told.or_else(|| outcome.doubtful_blobs.iter().find(|b| b.id == id).map(|b| (b, false)))
    };
    let mut seen = std::collections::HashMap::<u64, u64>::new();
    for (id, count, len, sha1) in &stored {
        *seen.entry(*id).or_default() += count;
        match find(*id) {
            None => wrong.push(format!("client {client}: blob {id} not written by it is there")),
            Some((blob, _)) if (blob.len, &blob.sha1) != (*len, sha1) => garbled.push(format!(
                "client {client}: blob {id} of {} bytes stored as {len} bytes, SHA-1 {sha1}",
                blob.len
            )),
            Some(_) => {}
        }
    }
    for (id, times) in &seen {
        if *times > 1 {
            wrong.push(format!("client {client}: blob {id} stored {times} times"));
        }
    }
    for blob in &outcome.blobs {
        if !seen.contains_key(&blob.id) {
            wrong.push(format!("client {client}: acknowledged blob {} is missing", blob.id));
        }
    }
}
