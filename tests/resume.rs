//! Surviving a dropped connection between the sidecar and the transport (a Wi-Fi change, a
//! short sleep, a proxy restart): the shaping proxy between them cuts every connection while
//! the client is idle, mid-command and mid-answer. The client's MySQL connection carries on:
//! session variables, temporary tables and the open transaction survive, the upstream thread
//! is the same, and no statement runs twice (the upstream's own counters say so). A session
//! that really is gone gives a clear error, not a hang; so does a resume with no window. A real
//! nginx restarted mid-command is survived the same way. Each over a stream and over requests.

use std::time::{Duration, Instant};

use e2e::nginx::{Nginx, example_config};
use e2e::shaper::{Shape, Shaper, tunnel_through};
use e2e::{
    Carrier, TOKEN, Tunnel, mysql_port, on_both_carriers, sidecar_yaml, transport_yaml, within,
};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// A tunnel whose sidecar reaches the transport on `carrier` through a shaping proxy;
/// `session_timeout` and `heartbeat_interval` for the transport.
async fn through_shaper(carrier: Carrier, shape: Shape, timeouts: &str) -> (Tunnel, Shaper) {
    let transport = transport_yaml(mysql_port()).replace("session_timeout: 30s\n", timeouts);
    tunnel_through(shape, &transport, carrier.setting()).await
}

const TIMEOUTS: &str = "session_timeout: 30s\nheartbeat_interval: 1s\n";

/// A session with a variable, a temporary table with one row, and an open transaction; its
/// upstream thread id.
async fn prepare_state(conn: &mut Conn) -> u64 {
    conn.query_drop("SET @kept = 42").await.expect("set");
    conn.query_drop("CREATE TEMPORARY TABLE kept (v INT) ENGINE=InnoDB").await.expect("temp");
    conn.query_drop("BEGIN").await.expect("begin");
    conn.query_drop("INSERT INTO kept VALUES (1)").await.expect("insert");
    conn.query_first("SELECT CONNECTION_ID()").await.expect("id").expect("row")
}

/// Asserts the state of [`prepare_state`] is intact, on the same upstream thread.
async fn assert_state(conn: &mut Conn, thread: u64, rows: u64) {
    let (kept, count, id, in_tx): (u32, u64, u64, u32) = conn
        .query_first("SELECT @kept, (SELECT COUNT(*) FROM kept), CONNECTION_ID(), @@in_transaction")
        .await
        .expect("state query")
        .expect("row");
    assert_eq!((kept, count, id, in_tx), (42, rows, thread, 1), "the session's state survived");
}

/// The upstream's count of a statement kind on this session.
async fn session_counter(conn: &mut Conn, name: &str) -> u64 {
    let row: Option<(String, u64)> =
        conn.query_first(format!("SHOW SESSION STATUS LIKE '{name}'")).await.expect("status");
    row.map_or(0, |r| r.1)
}

/// Runs a 2 s `INSERT … SELECT` on a session with state, and `disruption` half a second into
/// it; asserts the answer arrived, the state survived and the statement ran once upstream.
async fn slow_insert_survives<F: std::future::Future>(conn: &mut Conn, disruption: F) -> F::Output {
    let thread = prepare_state(conn).await;
    let inserts = session_counter(conn, "Com_insert_select").await;
    let slow = conn.query_drop("INSERT INTO kept SELECT 2 FROM (SELECT SLEEP(2)) AS s");
    let disrupted = async {
        // Mid-command: once the server runs it.
        e2e::wait_running(thread, "INSERT INTO kept SELECT 2").await;
        disruption.await
    };
    let (outcome, out) = tokio::join!(slow, disrupted);
    outcome.expect("the command's answer arrived after the disruption");
    assert_state(conn, thread, 2).await;
    let after = session_counter(conn, "Com_insert_select").await;
    assert_eq!(after - inserts, 1, "the statement ran once upstream");
    conn.query_drop("COMMIT").await.expect("commit");
    out
}

on_both_carriers!(a_cut_while_idle_leaves_the_session_as_it_was);
async fn a_cut_while_idle_leaves_the_session_as_it_was(carrier: Carrier) {
    within(60, async {
        let (tunnel, shaper) = through_shaper(carrier, Shape::default(), TIMEOUTS).await;
        let mut conn = tunnel.connect().await;
        let thread = prepare_state(&mut conn).await;
        let before = shaper.connections();
        shaper.cut();
        assert_state(&mut conn, thread, 1).await;
        assert!(shaper.connections() > before, "a new connection was made after the cut");
        conn.query_drop("COMMIT").await.expect("commit");
    })
    .await;
}

on_both_carriers!(a_cut_mid_command_neither_loses_nor_repeats_it);
async fn a_cut_mid_command_neither_loses_nor_repeats_it(carrier: Carrier) {
    within(60, async {
        let (tunnel, shaper) = through_shaper(carrier, Shape::default(), TIMEOUTS).await;
        let mut conn = tunnel.connect().await;
        slow_insert_survives(&mut conn, async { shaper.cut() }).await;
    })
    .await;
}

on_both_carriers!(a_cut_while_a_command_is_written_upstream_neither_loses_nor_repeats_it);
async fn a_cut_while_a_command_is_written_upstream_neither_loses_nor_repeats_it(carrier: Carrier) {
    within(90, async {
        // The transport reaches MariaDB at 16 Mbit/s: a 12 MB statement takes 6 s to go upstream
        // (socket buffers take a few MB at once), and the cut comes while the transport writes it.
        let mysql = format!("127.0.0.1:{}", mysql_port()).parse().expect("addr");
        let slow = Shape { bits_per_second: Some(16_000_000), ..Shape::default() };
        let upstream = Shaper::start(mysql, slow).await;
        let transport = transport_yaml(upstream.port).replace("session_timeout: 30s\n", TIMEOUTS);
        let (tunnel, shaper) =
            tunnel_through(Shape::default(), &transport, carrier.setting()).await;
        let mut conn = tunnel.connect().await;
        let thread = prepare_state(&mut conn).await;
        let inserts = session_counter(&mut conn, "Com_insert_select").await;
        let filler = "x".repeat(12_000_000);
        let big = format!("INSERT INTO kept SELECT 2 FROM DUAL WHERE LENGTH('{filler}') > 0");
        let written_before = upstream.bytes_up();
        let insert = conn.query_drop(big);
        let cut = async {
            while upstream.bytes_up() < written_before + 1_000_000 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            shaper.cut();
        };
        let (outcome, ()) = tokio::join!(insert, cut);
        outcome.expect("the command's answer arrived after the cut");
        let written = upstream.bytes_up() - written_before;
        assert_state(&mut conn, thread, 2).await;
        let after = session_counter(&mut conn, "Com_insert_select").await;
        assert_eq!(after - inserts, 1, "the statement ran once upstream");
        assert!(written < 16_000_000, "the statement was written upstream once: {written} bytes");
        conn.query_drop("COMMIT").await.expect("commit");
    })
    .await;
}

on_both_carriers!(a_cut_mid_answer_resumes_the_answer_where_it_broke);
async fn a_cut_mid_answer_resumes_the_answer_where_it_broke(carrier: Carrier) {
    within(90, async {
        // 16 Mbit/s: the answer (about 2.5 MB) takes more than a second to pass.
        let shape = Shape { bits_per_second: Some(16_000_000), ..Shape::default() };
        let (tunnel, shaper) = through_shaper(carrier, shape, TIMEOUTS).await;
        let mut conn = tunnel.connect().await;
        let thread = prepare_state(&mut conn).await;
        let selects = session_counter(&mut conn, "Com_select").await;
        let big = conn.query::<u64, _>("SELECT seq FROM seq_1_to_250000");
        let cutter = shaper.cut_after(500_000);
        let (rows, at_cut) = tokio::join!(big, cutter);
        let rows = rows.expect("the whole answer arrived");
        assert_eq!(rows.len(), 250_000);
        assert!(rows.iter().enumerate().all(|(i, v)| *v == i as u64 + 1), "every row, in order");
        assert!(shaper.bytes_down() > at_cut + 20_000, "the cut came mid-answer: {at_cut} bytes");
        let after = session_counter(&mut conn, "Com_select").await;
        assert_eq!(after - selects, 1, "the SELECT ran once (this SHOW is not counted)");
        assert_state(&mut conn, thread, 1).await;
        conn.query_drop("COMMIT").await.expect("commit");
    })
    .await;
}

on_both_carriers!(a_session_gone_during_an_outage_is_a_clear_error);
async fn a_session_gone_during_an_outage_is_a_clear_error(carrier: Carrier) {
    within(60, async {
        // Parking off: the idle session expires too (tests/expiry.rs parks it).
        let timeouts = "session_timeout: 2s\nheartbeat_interval: 500ms\npark_timeout: 0s\n";
        let (tunnel, shaper) = through_shaper(carrier, Shape::default(), timeouts).await;
        let mut idle = tunnel.connect().await;
        let mut busy = tunnel.connect().await;
        let thread: Option<u64> = busy.query_first("SELECT CONNECTION_ID()").await.expect("id");
        let slow = busy.query_drop("SELECT SLEEP(2)");
        let outage = async {
            // The outage begins while the statement runs upstream.
            e2e::wait_running(thread.expect("id"), "SLEEP(2)").await;
            shaper.refuse(true);
            shaper.cut();
            tokio::time::sleep(Duration::from_secs(4)).await;
            shaper.refuse(false);
        };
        let started = Instant::now();
        let (outcome, ()) = tokio::join!(slow, outage);
        let error = outcome.expect_err("the session expired during the outage").to_string();
        assert!(error.contains("Lost connection"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(15), "an error, not a hang");
        let error = idle.query_drop("SELECT 1").await.expect_err("expired").to_string();
        assert!(error.contains("expired"), "{error}");
        // The turn parked by the cut did not outlive its session: the upstream thread is gone.
        let mut d = e2e::direct().await;
        let gone = Instant::now();
        loop {
            let left: Option<u64> = d
                .exec_first(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?",
                    (thread,),
                )
                .await
                .expect("processlist");
            if left == Some(0) {
                break;
            }
            assert!(gone.elapsed() < Duration::from_secs(10), "the upstream connection lingers");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // New sessions work.
        let mut fresh = tunnel.connect().await;
        let one: Option<u8> = fresh.query_first("SELECT 1").await.expect("fresh session");
        assert_eq!(one, Some(1));
    })
    .await;
}

on_both_carriers!(without_a_resume_window_a_cut_mid_answer_is_a_clear_error);
async fn without_a_resume_window_a_cut_mid_answer_is_a_clear_error(carrier: Carrier) {
    cut_without_room(carrier, "resume_window: 0\n").await;
}

on_both_carriers!(without_room_in_the_resume_budget_a_cut_mid_answer_is_a_clear_error);
async fn without_room_in_the_resume_budget_a_cut_mid_answer_is_a_clear_error(carrier: Carrier) {
    cut_without_room(carrier, "max_resume_bytes: 0\n").await;
}

/// A cut mid-answer where the transport kept nothing of the answer: a clear error at once.
async fn cut_without_room(carrier: Carrier, setting: &str) {
    within(60, async {
        let shape = Shape { bits_per_second: Some(16_000_000), ..Shape::default() };
        let timeouts = format!("{TIMEOUTS}{setting}");
        let (tunnel, shaper) = through_shaper(carrier, shape, &timeouts).await;
        let mut conn = tunnel.connect().await;
        let big = conn.query::<u64, _>("SELECT seq FROM seq_1_to_250000");
        let cutter = shaper.cut_after(500_000);
        let started = Instant::now();
        let (rows, _) = tokio::join!(big, cutter);
        let error = rows.expect_err("not resumable").to_string();
        assert!(error.contains("could not be resumed"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(15), "an error, not a hang");
    })
    .await;
}

on_both_carriers!(an_nginx_restart_mid_command_is_survived);
async fn an_nginx_restart_mid_command_is_survived(carrier: Carrier) {
    within(90, async {
        let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let transport_port = listener.local_addr().expect("addr").port();
        let port = Nginx::port();
        let nginx = Nginx::start(&example_config(&[transport_port], port), port).await;
        let url = format!("http://127.0.0.1:{port}/db-tunnel/");
        let transport = transport_yaml(mysql_port()).replace("session_timeout: 30s\n", TIMEOUTS);
        let sidecar = carrier.sidecar(&sidecar_yaml(&url, TOKEN));
        let tunnel = Tunnel::start_with(listener, &transport, &sidecar).await;
        let mut conn = tunnel.connect().await;
        let restart = async {
            tokio::task::spawn_blocking(move || drop(nginx)).await.expect("stop nginx");
            Nginx::start(&example_config(&[transport_port], port), port).await
        };
        let _nginx = slow_insert_survives(&mut conn, restart).await;
    })
    .await;
}
