//! Session lifecycle: a silent sidecar's session expires (its row locks are released), while
//! heartbeats keep idle sessions alive and long commands' answers coming, a long-running
//! command is never expired, and a stalled transport forgives the silence it caused; a frozen
//! one is a clear error, not a hang. Each over a stream and over requests.

use std::time::{Duration, Instant};

use e2e::http::metric;
use e2e::processes::{ProcTunnel, free_port};
use e2e::{
    Carrier, DATABASE, TOKEN, Tunnel, direct, mysql_port, on_both_carriers, opts, sidecar_yaml,
    within,
};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// An in-process tunnel on `carrier` with a short session timeout and the given sidecar
/// heartbeat.
async fn short_lived_tunnel(carrier: Carrier, session_timeout: &str, heartbeat: &str) -> Tunnel {
    // Parking off: a silent idle session expires (tests/expiry.rs parks it).
    let transport = e2e::transport_yaml(mysql_port()).replace(
        "session_timeout: 30s",
        &format!("session_timeout: {session_timeout}\npark_timeout: 0s"),
    );
    Tunnel::start_custom(&transport, |url| {
        format!("{}heartbeat_interval: {heartbeat}\n", carrier.sidecar(&sidecar_yaml(url, TOKEN)))
    })
    .await
}

/// The real binaries on `carrier` with a 2 s session timeout and a 500 ms sidecar heartbeat.
async fn short_lived_procs(carrier: Carrier, tag: &str) -> ProcTunnel {
    ProcTunnel::start_on(
        carrier,
        tag,
        |t| t.replace("session_timeout: 30s", "session_timeout: 2s"),
        |s| format!("{s}heartbeat_interval: 500ms\n"),
    )
    .await
}

async fn upstream_ids(conn: &mut Conn) -> Vec<u64> {
    conn.query("SELECT ID FROM information_schema.PROCESSLIST").await.expect("processlist")
}

on_both_carriers!(killed_sidecar_session_expires_and_its_locks_are_released);
async fn killed_sidecar_session_expires_and_its_locks_are_released(carrier: Carrier) {
    within(120, async {
        let ProcTunnel { transport: _transport, mut sidecar, sidecar_port, .. } =
            short_lived_procs(carrier, "expire").await;

        // Each carrier's own table: both run at once.
        let table = format!("lock_probe_{}", carrier.name());
        let mut d = direct().await;
        d.query_drop(format!(
            "CREATE TABLE IF NOT EXISTS {table} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"
        ))
        .await
        .expect("create");
        d.query_drop(format!("REPLACE INTO {table} VALUES (1, 0)")).await.expect("row");
        let mut t = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("tunnel");
        let upstream_id: u64 =
            t.query_first("SELECT CONNECTION_ID()").await.expect("id").unwrap_or(0);
        t.query_drop("BEGIN").await.expect("begin");
        t.query_drop(format!("UPDATE {table} SET v = 1 WHERE id = 1")).await.expect("lock the row");
        // Heartbeats keep the session well past its timeout while the sidecar lives.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            upstream_ids(&mut d).await.contains(&upstream_id),
            "session kept alive by heartbeats"
        );

        sidecar.kill();
        let start = Instant::now();
        d.query_drop("SET SESSION innodb_lock_wait_timeout = 30").await.expect("set");
        d.query_drop(format!("UPDATE {table} SET v = 2 WHERE id = 1"))
            .await
            .expect("the row lock is released once the session expires");
        let waited = start.elapsed();
        assert!(waited < Duration::from_secs(20), "lock released after {waited:?}");
        let v: i32 = d
            .query_first(format!("SELECT v FROM {table} WHERE id = 1"))
            .await
            .expect("read")
            .unwrap_or(-1);
        assert_eq!(v, 2, "the dead session's update was rolled back");
        let mut gone = false;
        for _ in 0..50 {
            if !upstream_ids(&mut d).await.contains(&upstream_id) {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(gone, "the upstream connection of the expired session is closed");
        d.query_drop(format!("DROP TABLE {table}")).await.expect("drop");
    })
    .await;
}

on_both_carriers!(heartbeats_keep_an_idle_session_alive);
async fn heartbeats_keep_an_idle_session_alive(carrier: Carrier) {
    within(60, async {
        let tunnel = short_lived_tunnel(carrier, "1s", "200ms").await;
        let mut t = tunnel.connect().await;
        t.query_drop("SET @kept = 42").await.expect("set");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let kept: Option<u32> = t.query_first("SELECT @kept").await.expect("session still there");
        assert_eq!(kept, Some(42));
    })
    .await;
}

on_both_carriers!(heartbeats_carry_a_long_command_past_the_silence_limit);
async fn heartbeats_carry_a_long_command_past_the_silence_limit(carrier: Carrier) {
    within(60, async {
        // The sidecar takes 1 s without a byte (its floor over three 200 ms heartbeats) for a
        // dead transport: only heartbeats carry these statements through.
        let transport = format!("{}heartbeat_interval: 200ms\n", e2e::transport_yaml(mysql_port()));
        let metrics = free_port();
        let tunnel = Tunnel::start_custom(&transport, |url| {
            format!(
                "{}metrics_listen: 127.0.0.1:{metrics}\n",
                carrier.sidecar(&sidecar_yaml(url, TOKEN))
            )
        })
        .await;
        let connects = || metric(metrics, None, "sqltunnel_sidecar_transport_connects_total");
        let mut t = tunnel.connect().await;
        t.query_drop("DO 1").await.expect("first");
        let before = connects().await;
        // Each turn puts the heartbeat off; the long ones find it due, again and again. (A
        // silence would not fail them: the sidecar would reconnect and resume the step.)
        for sql in ["SELECT SLEEP(2.5)", "SELECT 1", "SELECT SLEEP(1.5)", "SELECT SLEEP(1.5)"] {
            t.query_drop(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        assert_eq!(connects().await, before, "the sidecar reconnected: it heard silence");
    })
    .await;
}

on_both_carriers!(a_command_longer_than_the_timeout_is_not_expired);
async fn a_command_longer_than_the_timeout_is_not_expired(carrier: Carrier) {
    within(60, async {
        // Heartbeats effectively off: only "a running command is not silence" protects it.
        let tunnel = short_lived_tunnel(carrier, "1s", "1h").await;
        let mut t = tunnel.connect().await;
        t.query_drop("SET @kept = 7").await.expect("set");
        let slept: Option<u32> = t.query_first("SELECT SLEEP(3)").await.expect("long query");
        assert_eq!(slept, Some(0));
        let kept: Option<u32> =
            t.query_first("SELECT @kept").await.expect("same session after the long query");
        assert_eq!(kept, Some(7));
    })
    .await;
}

on_both_carriers!(an_expired_session_is_a_lost_connection_and_reconnecting_works);
async fn an_expired_session_is_a_lost_connection_and_reconnecting_works(carrier: Carrier) {
    within(60, async {
        let tunnel = short_lived_tunnel(carrier, "1s", "1h").await;
        let mut t = tunnel.connect().await;
        t.query_drop("SELECT 1").await.expect("first");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let err = t.query_drop("SELECT 1").await.expect_err("the session expired");
        let text = err.to_string();
        assert!(
            text.contains("1158")
                || text.to_lowercase().contains("lost")
                || text.contains("closed")
                || text.contains("Io"),
            "{text}"
        );
        let mut again = tunnel.connect().await;
        let one: Option<u8> = again.query_first("SELECT 1").await.expect("a new connection works");
        assert_eq!(one, Some(1));
    })
    .await;
}

on_both_carriers!(the_sidecar_closes_clients_whose_session_is_gone);
async fn the_sidecar_closes_clients_whose_session_is_gone(carrier: Carrier) {
    within(60, async {
        // The transport expires the session (heartbeats slower than the timeout); the next
        // heartbeat learns it is gone and the sidecar closes the client connection itself.
        let tunnel = short_lived_tunnel(carrier, "1s", "1500ms").await;
        let mut raw =
            e2e::raw::RawClient::login(tunnel.sidecar.port(), e2e::USER, e2e::PASSWORD, DATABASE)
                .await;
        assert!(!raw.closed_by_server().await, "open while the session lives");
        tokio::time::sleep(Duration::from_millis(3500)).await;
        assert!(
            raw.closed_by_server().await,
            "the sidecar closed the client without being asked anything"
        );
    })
    .await;
}

on_both_carriers!(a_stalled_transport_does_not_expire_live_sessions);
async fn a_stalled_transport_does_not_expire_live_sessions(carrier: Carrier) {
    within(60, async {
        let ProcTunnel { transport, sidecar: _sidecar, sidecar_port, .. } =
            short_lived_procs(carrier, "stall").await;
        let mut t = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("tunnel");
        let id: Option<u64> = t.query_first("SELECT CONNECTION_ID()").await.expect("id");
        // Stopped for longer than the session timeout, as a stalled host or a debugger would.
        transport.signal("STOP");
        tokio::time::sleep(Duration::from_millis(3500)).await;
        transport.signal("CONT");
        // The reaper wakes late, and says it forgives the stall, before anything is asked.
        transport.log_grows("stalled", 0).await;
        let again: Option<u64> = t.query_first("SELECT CONNECTION_ID()").await.expect("alive");
        assert_eq!(again, id, "the same session, on the same upstream connection");
        let log = std::fs::read_to_string(&transport.log).expect("log");
        assert!(!log.contains("session expired"), "{log}");
        assert!(log.contains("stalled"), "the stall is logged: {log}");
    })
    .await;
}

on_both_carriers!(a_frozen_transport_is_a_clear_error_within_three_heartbeats);
async fn a_frozen_transport_is_a_clear_error_within_three_heartbeats(carrier: Carrier) {
    within(60, async {
        let ProcTunnel { transport, sidecar: _sidecar, sidecar_port, .. } = ProcTunnel::start_on(
            carrier,
            "frozen",
            |t| format!("{t}heartbeat_interval: 500ms\n"),
            |s| s,
        )
        .await;
        let mut t = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("tunnel");
        t.query_drop("DO 1").await.expect("works");

        transport.signal("STOP");
        let started = Instant::now();
        let err = t.query_drop("SELECT 1").await.expect_err("a frozen transport answers nothing");
        let waited = started.elapsed();
        assert!(err.to_string().contains("transport"), "names the transport: {err}");
        // Three heartbeat intervals of silence (1.5 s), not a hang.
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        let login = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect_err("no login");
        let text = login.to_string();
        assert!(text.contains("transport") && !text.contains("client protocol"), "{text}");

        transport.signal("CONT");
        let mut again = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("login again");
        again.query_drop("DO 1").await.expect("works again");
    })
    .await;
}
