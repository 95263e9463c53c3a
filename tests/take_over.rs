//! A deploy loses no session: a new transport started with `--take-over` takes the running
//! one's listener and sessions through `take_over_socket`, and the old one exits. With 200
//! sessions (idle ones with a variable, a temporary table and a prepared statement, 20 in
//! transactions holding row locks, 10 parked behind a frozen sidecar, 20 reading large
//! answers and 10 running statements meanwhile), each session keeps its upstream connection,
//! variables, temporary table and transaction, no client sees an error, `/v1/ready` answers
//! ready throughout, and the new process holds as many descriptors and as much memory as the
//! old one did with the same sessions at work; then the new process is taken over in turn.
//! Both carriers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use e2e::http::{metric, raw_request};
use e2e::processes::{Proc, ProcTunnel, free_port, wait_port};
use e2e::{Carrier, DATABASE, TOKEN, direct, on_both_carriers, opts};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Statement};

const SESSIONS: usize = 200;
/// Sessions 0..20 hold a row lock in an open transaction.
const IN_TRANSACTION: usize = 20;
/// Sessions 20..40 read large answers during the take-over.
const READING: std::ops::Range<usize> = 20..40;
/// Sessions 40..50 run a statement through the take-over.
const RUNNING: std::ops::Range<usize> = 40..50;
/// Sessions 190..200 are parked: their sidecar is frozen (SIGSTOP) through the take-over.
const PARKED: std::ops::Range<usize> = 190..200;
/// The large answer's bytes.
const LARGE: usize = 1 << 20;

/// A session and what it should still hold.
struct Kept {
    conn: Conn,
    thread: u64,
    prepared: Statement,
}

/// Opens session `i` and gives it state: a variable, a temporary table, a prepared statement,
/// and for the first ones a row lock in an open transaction.
async fn open(port: u16, i: usize, table: &str) -> Kept {
    let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("connect");
    let thread: u64 = conn.query_first("SELECT CONNECTION_ID()").await.ok().flatten().unwrap_or(0);
    conn.query_drop(format!("SET @kept = {i}")).await.expect("variable");
    conn.query_drop("CREATE TEMPORARY TABLE kept_here (n INT)").await.expect("temporary table");
    conn.query_drop(format!("INSERT INTO kept_here VALUES ({i})")).await.expect("insert");
    let prepared = conn.prep("SELECT ? + 1").await.expect("prepare");
    if i < IN_TRANSACTION {
        conn.query_drop("START TRANSACTION").await.expect("begin");
        let sql = format!("SELECT v FROM {table} WHERE id = {i} FOR UPDATE");
        let _: Option<i64> = conn.query_first(sql).await.expect("lock");
        let sql = format!("UPDATE {table} SET v = v + 1 WHERE id = {i}");
        conn.query_drop(sql).await.expect("update");
    }
    Kept { conn, thread, prepared }
}

/// Checks session `i` holds what [`open`] gave it, on the same upstream connection.
async fn check(kept: &mut Kept, i: usize) {
    let conn = &mut kept.conn;
    let thread: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await.expect("id");
    assert_eq!(thread, Some(kept.thread), "session {i} keeps its upstream connection");
    let var: Option<i64> = conn.query_first("SELECT @kept").await.expect("variable");
    assert_eq!(var, Some(i as i64), "session {i} keeps its variable");
    let n: Option<i64> = conn.query_first("SELECT n FROM kept_here").await.expect("temp");
    assert_eq!(n, Some(i as i64), "session {i} keeps its temporary table");
    let plus: Option<i64> = conn.exec_first(&kept.prepared, (i,)).await.expect("prepared");
    assert_eq!(plus, Some(i as i64 + 1), "session {i} keeps its prepared statement");
    let open: Option<i64> = conn.query_first("SELECT @@in_transaction").await.expect("txn");
    assert_eq!(open, Some(i64::from(i < IN_TRANSACTION)), "session {i}'s transaction");
}

/// Takes `old` over with a new process and waits for the old one to exit.
async fn take_over(old: &mut Proc, tag: &str) -> Proc {
    let next = old.start_again("transport", &["--take-over"], tag);
    assert!(old.exits_within(Duration::from_secs(30)).await, "the old transport exits");
    next.log_grows("take-over done", 0).await;
    let log = std::fs::read_to_string(&next.log).unwrap_or_default();
    assert!(log.contains("failed=0"), "every moved session registered:\n{log}");
    next
}

async fn a_take_over_keeps_every_session(carrier: Carrier) {
    let table = format!("take_over_rows_{}", carrier.name());
    let mut d = direct().await;
    d.query_drop(format!("CREATE OR REPLACE TABLE {table} (id INT PRIMARY KEY, v INT)"))
        .await
        .expect("table");
    let rows: Vec<String> = (0..IN_TRANSACTION).map(|i| format!("({i}, 0)")).collect();
    d.query_drop(format!("INSERT INTO {table} VALUES {}", rows.join(","))).await.expect("rows");
    let socket = std::env::temp_dir().join(format!(
        "take-over-{}-{}.sock",
        std::process::id(),
        carrier.name()
    ));
    let socket_line = format!("take_over_socket: {}\n", socket.display());
    let limits = "max_sessions_per_token: 400\nmax_streams_per_token: 400\nmax_connections_per_client: 1000\n";
    // Sessions of a silent sidecar park after session_timeout.
    let edit = |t: String| {
        let t = t.replace("session_timeout: 30s", "session_timeout: 4s\nheartbeat_interval: 1s");
        format!("{t}{socket_line}{limits}log:\n  level: transport::takeover=debug,info\n")
    };
    let keep_alive = |s: String| format!("{s}heartbeat_interval: 1s\n");
    let mut tunnel = ProcTunnel::start_on(carrier, "take-over", edit, keep_alive).await;
    let (port, transport_port) = (tunnel.sidecar_port, tunnel.transport_port);
    // A second sidecar, frozen through the take-over: a laptop asleep.
    let asleep_port = free_port();
    let listen = format!("127.0.0.1:{asleep_port}");
    let asleep = tunnel.sidecar.start_again("sidecar", &["--listen", &listen], "asleep");
    wait_port(asleep_port).await;
    let mut sessions = Vec::new();
    for batch in (0..SESSIONS).collect::<Vec<_>>().chunks(25) {
        let at = |i: usize| if PARKED.contains(&i) { asleep_port } else { port };
        let opened = batch.iter().map(|&i| open(at(i), i, &table));
        sessions.extend(futures_util::future::join_all(opened).await);
    }
    asleep.signal("STOP");
    let parked = async {
        while metric(transport_port, Some(TOKEN), "sqltunnel_parked_sessions").await < 10 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), parked).await.expect("10 sessions park");
    let parked_before = metric(transport_port, Some(TOKEN), "sqltunnel_parked_sessions").await;
    assert_eq!(parked_before, 10, "the frozen sidecar's sessions park, and only they");

    let mode = std::fs::metadata(&socket).map(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o777
    });
    assert_eq!(mode.ok(), Some(0o600), "the take-over socket is the owner's only");

    // The readers and the running statements go on through the take-over.
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicU64::new(0));
    let mut busy = Vec::new();
    for i in (READING.start..RUNNING.end).rev() {
        let mut kept = sessions.remove(i);
        let (stop, answers) = (stop.clone(), answers.clone());
        busy.push((
            i,
            tokio::spawn(async move {
                if RUNNING.contains(&i) {
                    let r: Option<i64> =
                        kept.conn.query_first(format!("SELECT SLEEP(2) + {i}")).await?;
                    assert_eq!(r, Some(i as i64), "session {i}'s long statement");
                    return Ok(kept);
                }
                while !stop.load(Ordering::Relaxed) {
                    let r: Option<Vec<u8>> =
                        kept.conn.query_first(format!("SELECT REPEAT('x', {LARGE})")).await?;
                    assert_eq!(r.map(|r| r.len()), Some(LARGE), "session {i}'s large answer");
                    answers.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, mysql_async::Error>(kept)
            }),
        ));
    }
    // Readiness is asked throughout, on a new connection each time.
    let readiness = tokio::spawn({
        let stop = stop.clone();
        async move {
            let (mut asked, mut not_ready) = (0, Vec::new());
            let request = "GET /v1/ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
            while !stop.load(Ordering::Relaxed) {
                let (status, _) = raw_request(transport_port, request).await;
                asked += 1;
                if status != 200 {
                    not_ready.push(status);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (asked, not_ready)
        }
    });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let before = answers.load(Ordering::Relaxed);
    // The process that ran from the start, with these sessions at work.
    let (descriptors_before, resident_before) =
        (tunnel.transport.open_fds(), tunnel.transport.rss_kib());
    let started = Instant::now();
    let mut next = take_over(&mut tunnel.transport, "next").await;
    let took = started.elapsed();
    let parked_after = metric(transport_port, Some(TOKEN), "sqltunnel_parked_sessions").await;
    assert_eq!(parked_after, 10, "the parked sessions moved parked");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let (asked, not_ready) = readiness.await.expect("readiness task");
    assert!(asked > 10 && not_ready.is_empty(), "ready throughout: {asked} asked, {not_ready:?}");
    asleep.signal("CONT");
    let after = answers.load(Ordering::Relaxed);
    let mut returned = Vec::new();
    for (i, task) in busy {
        let kept = task.await.expect("task").unwrap_or_else(|e| panic!("session {i}: {e}"));
        returned.push((i, kept));
    }
    returned.sort_by_key(|(i, _)| *i);
    for (i, kept) in returned {
        sessions.insert(i, kept);
    }
    println!(
        "{}: {SESSIONS} sessions taken over in {took:?}; large answers read: {before} before, {after} by the end",
        carrier.name()
    );
    assert!(after > before, "large answers went on being read");
    for (i, kept) in sessions.iter_mut().enumerate() {
        check(kept, i).await;
    }
    // As many descriptors as the process that ran from the start had with the same sessions
    // (each session's upstream socket, and its stream or kept-alive connection).
    let (descriptors_after, resident_after) = (next.open_fds(), next.rss_kib());
    println!(
        "descriptors: {descriptors_before} before the take-over, {descriptors_after} after; resident memory: {resident_before} KiB before, {resident_after} KiB after"
    );
    // Memory as that process's, within a quarter and 8 MiB (the allocator's noise).
    let most = resident_before + resident_before / 4 + 8 * 1024;
    assert!(
        resident_after <= most,
        "resident {resident_before} KiB before, {resident_after} after"
    );
    let slack = descriptors_before / 10 + 5;
    assert!(
        descriptors_after.abs_diff(descriptors_before) <= slack,
        "descriptors {descriptors_before} before, {descriptors_after} after"
    );
    // The row locks held: the rows still read 0 outside; committed, 1.
    let sql = format!("SELECT COUNT(*) FROM {table} WHERE v = 0");
    let untouched: Option<u64> = d.query_first(&sql).await.expect("outside");
    assert_eq!(untouched, Some(IN_TRANSACTION as u64), "the transactions are still open");
    for kept in sessions.iter_mut().take(IN_TRANSACTION) {
        kept.conn.query_drop("COMMIT").await.expect("commit");
    }
    let committed: Option<u64> = d.query_first(&sql).await.expect("outside");
    assert_eq!(committed, Some(0), "each transaction committed its row");

    // The new process can be taken over in turn (its own socket replaced the old one's).
    let mut third = take_over(&mut next, "third").await;
    for (i, kept) in sessions.iter_mut().enumerate() {
        let thread: Option<u64> =
            kept.conn.query_first("SELECT CONNECTION_ID()").await.expect("after the second");
        assert_eq!(thread, Some(kept.thread), "session {i} after a second take-over");
    }
    for kept in sessions {
        kept.conn.disconnect().await.expect("quit");
    }
    third.kill();
}

on_both_carriers!(a_take_over_keeps_every_session);
