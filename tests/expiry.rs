//! Sessions whose sidecar went away. A laptop that sleeps (its sidecar stopped, its
//! connections cut) for ten session timeouts finds an idle session as it was (parked, not
//! closed), while a session with a transaction open ended at `session_timeout`, its locks
//! freed. A statement left running when its sidecar was killed mid-query is ended upstream
//! (`KILL QUERY` through the upstream's `admin_user`) once the session expires, not left to run
//! for as long as the server cares to, over a stream as over requests.

use std::time::{Duration, Instant};

use e2e::http::metric;
use e2e::processes::{Proc, ProcTunnel, wait_port};
use e2e::shaper::{Shape, Shaper};
use e2e::{
    Carrier, DATABASE, PASSWORD, TOKEN, USER, direct, mysql_port, on_both_carriers, opts,
    sidecar_yaml, within,
};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// Threads of the server running `needle`, as the processlist shows them.
async fn running(direct: &mut Conn, needle: &str) -> Vec<u64> {
    direct
        .exec(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND INFO NOT LIKE '%PROCESSLIST%'",
            (format!("%{needle}%"),),
        )
        .await
        .expect("processlist")
}

on_both_carriers!(a_statement_left_by_a_killed_sidecar_is_killed_when_its_session_expires);
/// A sidecar killed while its statement runs: the statement is gone from the processlist
/// within `session_timeout` + 2 s. The transport's heartbeat is left at its default (10 s): no
/// answer byte is written while the statement runs, so over a stream only the end of the
/// sidecar's connection, noticed at once, parks the turn in time.
async fn a_statement_left_by_a_killed_sidecar_is_killed_when_its_session_expires(carrier: Carrier) {
    within(90, async {
        let admin = format!("    admin_user: {USER}\n    admin_password: {PASSWORD}\n    address:");
        let timeout = ("session_timeout: 30s", "session_timeout: 3s");
        let mut t = ProcTunnel::start_on(
            carrier,
            "orphan",
            |t| t.replace("    address:", &admin).replace(timeout.0, timeout.1),
            // Passthrough: the transport has no credentials of the session's own.
            |s| s[..s.find("users:").unwrap_or(s.len())].to_owned(),
        )
        .await;
        let mut client = Conn::new(opts(t.sidecar_port, Some(DATABASE))).await.expect("tunnel");
        // BENCHMARK is not interrupted by a closed socket: only a kill ends it early. (Named
        // by this process: one a failed run left running is not this one.)
        let run = format!("{}-{}", carrier.name(), std::process::id());
        let needle = format!("BENCHMARK(200000000, MD5('orphan-{run}'))");
        let statement = client.query_drop(format!("SELECT {needle}"));
        let mut d = direct().await;
        let watch = async {
            let start = Instant::now();
            while running(&mut d, &needle).await.is_empty() {
                assert!(start.elapsed() < Duration::from_secs(10), "the statement never ran");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            outcome = statement => panic!("the statement ended before its sidecar was killed: {outcome:?}"),
            () = watch => {}
        }
        t.sidecar.kill();
        let killed = Instant::now();
        loop {
            let threads = running(&mut d, &needle).await;
            if threads.is_empty() {
                break;
            }
            // session_timeout (3 s) + 2 s; a statement left would run for minutes.
            if killed.elapsed() >= Duration::from_secs(5) {
                for id in threads {
                    drop(d.query_drop(format!("KILL QUERY {id}")).await);
                }
                panic!("{carrier:?}: the orphaned statement still runs");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        println!(
            "{carrier:?}: the orphaned statement ended {:?} after its sidecar was killed",
            killed.elapsed()
        );
    })
    .await;
}

/// Waits until the transport's metric `name` reads `want` (at most `limit`).
async fn metric_reaches(port: u16, name: &str, want: u64, limit: Duration) {
    let start = Instant::now();
    while metric(port, Some(TOKEN), name).await != want {
        assert!(start.elapsed() < limit, "{name} never reached {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_laptop_that_sleeps_finds_its_idle_session_as_it_was() {
    within(120, async {
        // The transport in-process, the sidecar a process (it is stopped) behind a proxy that
        // cuts its connections.
        let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let transport_port = listener.local_addr().expect("addr").port();
        let yaml = e2e::transport_yaml(mysql_port())
            .replace("session_timeout: 30s\n", "session_timeout: 2s\nheartbeat_interval: 500ms\n");
        let config: transport::TransportConfig = common::config::parse_yaml(&yaml).expect("yaml");
        let shutdown = tokio_util::sync::CancellationToken::new();
        tokio::spawn(transport::run(listener, config, shutdown.clone()));
        let shaper = Shaper::start(([127, 0, 0, 1], transport_port).into(), Shape::default()).await;
        let sidecar_port = e2e::processes::free_port();
        let sidecar_yaml = sidecar_yaml(&format!("http://127.0.0.1:{}/", shaper.port), TOKEN)
            .replace("127.0.0.1:0", &format!("127.0.0.1:{sidecar_port}"));
        let sidecar = Proc::start("sidecar", &sidecar_yaml, "sleep");
        wait_port(sidecar_port).await;

        let mut d = direct().await;
        d.query_drop("CREATE TABLE IF NOT EXISTS park_locks (id INT PRIMARY KEY)")
            .await
            .expect("table");
        d.query_drop("INSERT IGNORE INTO park_locks VALUES (1)").await.expect("row");
        let mut idle = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("idle");
        idle.query_drop("SET @kept = 42").await.expect("set");
        let thread: Option<u64> = idle.query_first("SELECT CONNECTION_ID()").await.expect("id");
        let mut in_tx = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("tx");
        in_tx.query_drop("BEGIN").await.expect("begin");
        in_tx.query_drop("SELECT id FROM park_locks WHERE id = 1 FOR UPDATE").await.expect("lock");

        // The laptop sleeps: the sidecar stops and its connections break.
        sidecar.signal("STOP");
        shaper.refuse(true);
        shaper.cut();
        let slept = Instant::now();
        // The session with a transaction ends at session_timeout (2 s, a second look and a
        // tick later), and its lock is free; the idle one is parked.
        metric_reaches(transport_port, "sqltunnel_parked_sessions", 1, Duration::from_secs(6))
            .await;
        metric_reaches(transport_port, "sqltunnel_sessions_open", 1, Duration::from_secs(6)).await;
        d.query_drop("SET SESSION innodb_lock_wait_timeout = 1").await.expect("set");
        d.query_drop("BEGIN").await.expect("begin");
        d.query_drop("SELECT id FROM park_locks WHERE id = 1 FOR UPDATE")
            .await
            .expect("the expired session's lock was freed");
        d.query_drop("ROLLBACK").await.expect("rollback");
        println!("the transaction's lock was free {:?} into the sleep", slept.elapsed());
        // Ten session timeouts asleep.
        tokio::time::sleep(Duration::from_secs(20).saturating_sub(slept.elapsed())).await;
        shaper.refuse(false);
        sidecar.signal("CONT");

        let (kept, id): (Option<u32>, Option<u64>) = idle
            .query_first("SELECT @kept, CONNECTION_ID()")
            .await
            .expect("the parked session answers")
            .expect("row");
        assert_eq!((kept, id), (Some(42), thread), "the same session, variables and thread");
        metric_reaches(transport_port, "sqltunnel_parked_sessions", 0, Duration::from_secs(5))
            .await;
        let error =
            in_tx.query_drop("SELECT 1").await.expect_err("the transaction's session ended");
        let text = error.to_string();
        // As from a server that closed the connection (2013 in the mariadb CLI).
        let lost = ["expired", "Lost connection", "connection closed"];
        assert!(lost.iter().any(|l| text.contains(l)), "{text}");
        shutdown.cancel();
        drop(sidecar);
    })
    .await;
}
