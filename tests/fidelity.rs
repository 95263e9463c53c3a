//! Through the tunnel, `mysql_async` sees exactly what a direct connection sees: column
//! metadata, row bytes, OK fields, errors, transactions.

use e2e::scripts::{DML_SCRIPT, ERROR_SCRIPT, TYPES_SCRIPT};
use e2e::{Tunnel, assert_same_answers, compare_script, direct, within};
use mysql_async::prelude::Queryable;

#[tokio::test]
async fn every_type_and_its_metadata_match_direct() {
    within(120, async {
        let tunnel = Tunnel::start().await;
        let (mut d, mut t) = (direct().await, tunnel.connect().await);
        let (direct_answers, tunnel_answers) = compare_script(&mut d, &mut t, TYPES_SCRIPT).await;
        assert_same_answers(TYPES_SCRIPT, &direct_answers, &tunnel_answers);
        // The comparison is not vacuous: the big select really returned both rows, 28 columns.
        let e2e::Answer::Ok { sets, .. } = &tunnel_answers[4] else {
            panic!("select failed: {:?}", tunnel_answers[4])
        };
        assert_eq!(sets[0].0.len(), 28);
        assert_eq!(sets[0].1.len(), 2);
        let blob = sets[0].1[0][19].as_ref().expect("blob not null");
        assert_eq!(blob, &(0..=255u8).collect::<Vec<_>>());
    })
    .await;
}

#[tokio::test]
async fn ok_packets_match_direct() {
    within(120, async {
        let tunnel = Tunnel::start().await;
        let (mut d, mut t) = (direct().await, tunnel.connect().await);
        let (direct_answers, tunnel_answers) = compare_script(&mut d, &mut t, DML_SCRIPT).await;
        assert_same_answers(DML_SCRIPT, &direct_answers, &tunnel_answers);
        let e2e::Answer::Ok { ok, .. } = &tunnel_answers[2] else { panic!("insert failed") };
        assert_eq!(
            (ok.0, ok.1, ok.3.as_str()),
            (3, Some(1), "Records: 3  Duplicates: 0  Warnings: 0")
        );
        let e2e::Answer::Ok { ok, .. } = &tunnel_answers[7] else { panic!("insert failed") };
        assert_eq!(ok.2, 1, "one truncation warning");
    })
    .await;
}

#[tokio::test]
async fn errors_match_direct() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let (mut d, mut t) = (direct().await, tunnel.connect().await);
        let (direct_answers, tunnel_answers) = compare_script(&mut d, &mut t, ERROR_SCRIPT).await;
        assert_same_answers(ERROR_SCRIPT, &direct_answers, &tunnel_answers);
        let codes: Vec<u16> = tunnel_answers
            .iter()
            .filter_map(|a| match a {
                e2e::Answer::Err { code, .. } => Some(*code),
                e2e::Answer::Ok { .. } => None,
            })
            .collect();
        assert_eq!(codes, vec![1064, 1146, 3100, 1242, 1049]);
    })
    .await;
}

#[tokio::test]
async fn a_transaction_stays_on_one_upstream_session() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let mut t = tunnel.connect().await;
        let mut d = direct().await;
        t.query_drop("CREATE TABLE IF NOT EXISTS tx_probe (id INT PRIMARY KEY) ENGINE=InnoDB")
            .await
            .expect("create");
        t.query_drop("DELETE FROM tx_probe").await.expect("clean");
        t.query_drop("BEGIN").await.expect("begin");
        t.query_drop("INSERT INTO tx_probe VALUES (1)").await.expect("insert");
        let inside: u64 =
            t.query_first("SELECT COUNT(*) FROM tx_probe").await.expect("count").unwrap_or(0);
        let outside: u64 =
            d.query_first("SELECT COUNT(*) FROM tx_probe").await.expect("count").unwrap_or(9);
        assert_eq!((inside, outside), (1, 0), "the insert is visible only inside the transaction");
        let in_trans = t.last_ok_packet().map(|ok| ok.status_flags().bits() & 1);
        assert_eq!(in_trans, Some(1), "SERVER_STATUS_IN_TRANS is relayed");
        t.query_drop("ROLLBACK").await.expect("rollback");
        let after: u64 =
            t.query_first("SELECT COUNT(*) FROM tx_probe").await.expect("count").unwrap_or(9);
        assert_eq!(after, 0);
        let id_direct: u64 =
            d.query_first("SELECT CONNECTION_ID()").await.expect("id").unwrap_or(0);
        let id_tunnel: u64 =
            t.query_first("SELECT CONNECTION_ID()").await.expect("id").unwrap_or(0);
        assert_ne!(id_direct, id_tunnel);
        t.query_drop("DROP TABLE tx_probe").await.expect("drop");
    })
    .await;
}

#[tokio::test]
async fn many_sessions_run_side_by_side() {
    within(120, async {
        let tunnel = Tunnel::start().await;
        let mut tasks = Vec::new();
        for i in 0..20u64 {
            let mut conn = tunnel.connect().await;
            tasks.push(tokio::spawn(async move {
                conn.query_drop(format!("SET @mine = {i}")).await.expect("set");
                for _ in 0..20 {
                    let got: u64 =
                        conn.query_first("SELECT @mine").await.expect("select").unwrap_or(999);
                    assert_eq!(got, i, "session variables never cross sessions");
                }
                conn.disconnect().await.expect("quit");
            }));
        }
        for task in tasks {
            task.await.expect("session task");
        }
    })
    .await;
}

#[tokio::test]
async fn kill_uses_the_handshake_connection_id() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let mut victim = tunnel.connect().await;
        let mut killer = tunnel.connect().await;
        let handshake_id = victim.id();
        let upstream_id: Option<u32> =
            victim.query_first("SELECT CONNECTION_ID()").await.expect("id");
        assert_eq!(Some(handshake_id), upstream_id, "the greeting's id is the server's");
        let sleeper = tokio::spawn(async move {
            let started = std::time::Instant::now();
            let result = victim.query_drop("SELECT SLEEP(60)").await;
            (result, started.elapsed(), victim)
        });
        e2e::wait_running(u64::from(handshake_id), "SLEEP(60)").await;
        killer.query_drop(format!("KILL QUERY {handshake_id}")).await.expect("kill query");
        let (result, elapsed, mut victim) = sleeper.await.expect("sleeper");
        match result {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1317, "{}", e.message),
            // MariaDB may also end SLEEP early with result 1 instead of an error.
            Ok(()) => {}
            Err(other) => panic!("unexpected {other}"),
        }
        assert!(
            elapsed < std::time::Duration::from_secs(2),
            "cancelled within a second or so: {elapsed:?}"
        );
        let alive: Option<u8> =
            victim.query_first("SELECT 1").await.expect("KILL QUERY keeps the connection");
        assert_eq!(alive, Some(1));
        match killer.query_drop("KILL QUERY 999999").await {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!((e.code, e.message.as_str()), (1094, "Unknown thread id: 999999"))
            }
            other => panic!("expected 1094, got {other:?}"),
        }
    })
    .await;
}

/// Session state visible after COM_RESET_CONNECTION, on `conn`.
async fn state_after_reset(conn: &mut mysql_async::Conn) -> Vec<e2e::Answer> {
    conn.query_drop("CREATE TABLE IF NOT EXISTS reset_probe (id INT) ENGINE=InnoDB")
        .await
        .expect("create");
    conn.query_drop("SET @v = 1, SESSION sql_mode = 'ANSI'").await.expect("vars");
    conn.query_drop("CREATE TEMPORARY TABLE reset_tmp (x INT)").await.expect("temp");
    conn.query_drop("BEGIN").await.expect("begin");
    conn.query_drop("INSERT INTO reset_probe VALUES (1)").await.expect("insert");
    assert!(conn.reset().await.expect("COM_RESET_CONNECTION"), "the server side supports it");
    let mut answers = Vec::new();
    for sql in [
        "SELECT @v, @@autocommit, DATABASE(), @@sql_mode, @@character_set_client, @@collation_connection",
        "SELECT * FROM reset_tmp",
        "SELECT COUNT(*) FROM reset_probe",
    ] {
        answers.push(e2e::answer_of(conn, sql).await);
    }
    conn.query_drop("DROP TABLE reset_probe").await.expect("drop");
    answers
}

#[tokio::test]
async fn com_reset_connection_resets_the_upstream_session_as_direct() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let direct_state = state_after_reset(&mut direct().await).await;
        let tunnel_state = state_after_reset(&mut tunnel.connect().await).await;
        assert_eq!(direct_state, tunnel_state);
        assert!(
            matches!(&tunnel_state[1], e2e::Answer::Err { code: 1146, .. }),
            "temporary table gone"
        );
    })
    .await;
}

#[tokio::test]
async fn packets_of_16_mib_and_more_cross_in_both_directions() {
    within(180, async {
        let tunnel = Tunnel::start().await;
        let (mut d, mut t) = (direct().await, tunnel.connect().await);
        // A row payload of exactly 0xFFFFFF bytes (4-byte length prefix + 16,777,211) needs the
        // empty trailing packet; a larger one spans two packets.
        for n in [16_777_211u64, 20_000_000] {
            let sql = format!("SELECT REPEAT('x', {n}) AS big, {n} AS n");
            let (a, b) = compare_script(&mut d, &mut t, &[&sql]).await;
            assert_same_answers(&[&sql], &a, &b);
            let e2e::Answer::Ok { sets, .. } = &b[0] else { panic!("select failed: {:?}", b[0]) };
            assert_eq!(sets[0].1[0][0].as_ref().map(Vec::len), Some(n as usize));
        }
        // Client → server: a COM_QUERY whose payload is exactly 0xFFFFFF bytes, and a bigger one.
        for len in [16_777_214usize, 17_000_000] {
            let filler = len - "SELECT LENGTH('')".len();
            let sql = format!("SELECT LENGTH('{}')", "y".repeat(filler));
            assert_eq!(sql.len() + 1, len + 1);
            let (a, b) = compare_script(&mut d, &mut t, &[&sql]).await;
            assert_eq!(a, b, "answers differ for a {len}-byte query");
        }
    })
    .await;
}

#[tokio::test]
async fn non_utf8_sql_reaches_the_upstream_byte_for_byte() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let mut results = Vec::new();
        for mut conn in [direct().await, tunnel.connect().await] {
            conn.query_drop("SET NAMES latin1").await.expect("latin1");
            conn.query_drop(
                "CREATE TABLE IF NOT EXISTS latin_probe (v VARCHAR(10) CHARACTER SET latin1)",
            )
            .await
            .expect("create");
            conn.query_drop("DELETE FROM latin_probe").await.expect("clean");
            // Byte 0xE9 is "é" in latin1 and not valid UTF-8 on its own.
            conn.query_drop(&b"INSERT INTO latin_probe VALUES ('caf\xe9')"[..])
                .await
                .expect("insert latin1 bytes");
            let hex: Option<String> =
                conn.query_first("SELECT HEX(v) FROM latin_probe").await.expect("read");
            let raw: Option<Vec<u8>> =
                conn.query_first(&b"SELECT 'd\xe9j\xe0'"[..]).await.expect("select latin1 literal");
            results.push((hex, raw));
            conn.query_drop("DROP TABLE latin_probe").await.expect("drop");
        }
        assert_eq!(results[0], results[1]);
        assert_eq!(results[1].0.as_deref(), Some("636166E9"), "stored as latin1 é");
        assert_eq!(results[1].1.as_deref(), Some(&b"d\xe9j\xe0"[..]));
    })
    .await;
}

const MULTI_RESULT_SCRIPT: &[&str] = &[
    "DROP PROCEDURE IF EXISTS two_sets",
    "CREATE PROCEDURE two_sets() BEGIN SELECT 1 AS a, 'x' AS b; SELECT 2 AS c UNION SELECT 3; END",
    "CALL two_sets()",
    "SELECT 1; SELECT 'second', NULL; DO 1; SELECT 3",
    "SELECT 1; SELEC 2; SELECT 3",
    "BEGIN; SELECT 1; COMMIT",
    "DROP PROCEDURE two_sets",
];

#[tokio::test]
async fn multiple_result_sets_match_direct() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let (mut d, mut t) = (direct().await, tunnel.connect().await);
        let (a, b) = compare_script(&mut d, &mut t, MULTI_RESULT_SCRIPT).await;
        assert_same_answers(MULTI_RESULT_SCRIPT, &a, &b);
        let e2e::Answer::Ok { sets, .. } = &b[2] else { panic!("CALL failed: {:?}", b[2]) };
        assert_eq!(sets.len(), 2, "CALL returned two result sets");
    })
    .await;
}

#[tokio::test]
async fn multiple_result_sets_are_byte_identical_for_clients_without_deprecate_eof() {
    within(60, async {
        use e2e::raw::RawClient;
        let tunnel = Tunnel::start().await;
        let mut d = RawClient::login(e2e::mysql_port(), e2e::USER, e2e::PASSWORD, e2e::DATABASE).await;
        let mut t = RawClient::login(tunnel.sidecar.port(), e2e::USER, e2e::PASSWORD, e2e::DATABASE).await;
        d.command_all(b"\x03DROP PROCEDURE IF EXISTS raw_two_sets").await;
        d.command_all(b"\x03CREATE PROCEDURE raw_two_sets() BEGIN SELECT 1 AS a, 'x' AS b; SELECT 2 AS c UNION SELECT 3; END").await;
        for sql in [
            &b"\x03CALL raw_two_sets()"[..],
            b"\x03SELECT '', NULL, 1",
            b"\x03SELECT * FROM information_schema.ENGINES WHERE 1 = 0",
            b"\x03SELECT 1; SELECT 'two', 2; DO 3",
            b"\x03SELECT 1; SELEC 2",
            b"\x03SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'mysql'",
            b"\x03BEGIN",
            b"\x03SELECT 1 UNION SELECT 2",
            b"\x03COMMIT",
        ] {
            let direct = d.command_all(sql).await;
            let through = t.command_all(sql).await;
            assert_eq!(direct, through, "packets differ for {:?}", String::from_utf8_lossy(sql));
        }
        d.command_all(b"\x03DROP PROCEDURE raw_two_sets").await;
    })
    .await;
}

#[tokio::test]
async fn com_change_user_switches_login_and_resets_the_session() {
    within(60, async {
        let tunnel = Tunnel::start_custom(&e2e::transport_yaml(e2e::mysql_port()), |url| {
            format!(
                "{}  - name: reporter\n    password: rep-pw\n    upstream: main\n    upstream_user: app\n    upstream_password: app-pw\n",
                e2e::sidecar_yaml(url, e2e::TOKEN)
            )
        })
        .await;
        let mut t = tunnel.connect().await;
        t.query_drop("SET @before = 1").await.expect("set");
        let old_id: Option<u64> = t.query_first("SELECT CONNECTION_ID()").await.expect("id");
        let wrong = mysql_async::ChangeUserOpts::default().with_user(Some("reporter".into())).with_pass(Some("nope".into()));
        match t.change_user(wrong).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1045),
            other => panic!("expected 1045, got {other:?}"),
        }
        let opts = mysql_async::ChangeUserOpts::default()
            .with_user(Some("reporter".into()))
            .with_pass(Some("rep-pw".into()))
            .with_db_name(Some("mysql".into()));
        t.change_user(opts).await.expect("change user");
        let state: Option<(Option<u32>, Option<String>, u64)> =
            t.query_first("SELECT @before, DATABASE(), CONNECTION_ID()").await.expect("state");
        let (before, db, new_id) = state.expect("row");
        assert_eq!((before, db.as_deref()), (None, Some("mysql")), "a fresh session on the new login's database");
        assert_eq!(Some(new_id), old_id, "the same connection, as on a server");
    })
    .await;
}

#[tokio::test]
async fn client_found_rows_changes_affected_rows_as_direct() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let mut answers = Vec::new();
        for found_rows in [false, true] {
            for port in [e2e::mysql_port(), tunnel.sidecar.port()] {
                let opts = e2e::opts(port, Some(e2e::DATABASE)).client_found_rows(found_rows);
                let mut c = mysql_async::Conn::new(opts).await.expect("connect");
                c.query_drop("CREATE TABLE IF NOT EXISTS found_probe (id INT PRIMARY KEY, v INT)")
                    .await
                    .expect("create");
                c.query_drop("REPLACE INTO found_probe VALUES (1, 5)").await.expect("row");
                c.query_drop("UPDATE found_probe SET v = 5 WHERE id = 1").await.expect("update");
                answers.push((found_rows, port == e2e::mysql_port(), c.affected_rows()));
            }
        }
        assert_eq!(
            answers.iter().map(|a| a.2).collect::<Vec<_>>(),
            vec![0, 0, 1, 1],
            "{answers:?}"
        );
        direct().await.query_drop("DROP TABLE found_probe").await.expect("drop");
    })
    .await;
}

#[tokio::test]
async fn the_handshake_character_set_is_applied_upstream() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let sql = "SELECT @@character_set_client, @@character_set_results, @@collation_connection, @@max_allowed_packet";
        for charset in ["latin1", "utf8mb4", "binary"] {
            let args = [&format!("--default-character-set={charset}")[..], "--batch", "-e", sql];
            let d = e2e::cli::mariadb_async(e2e::mysql_port(), e2e::USER, e2e::PASSWORD, &args).await;
            let t = e2e::cli::mariadb_async(tunnel.sidecar.port(), e2e::USER, e2e::PASSWORD, &args).await;
            assert!(d.success && t.success, "{} {}", d.stderr, t.stderr);
            assert_eq!(d.stdout, t.stdout, "for {charset}");
        }
    })
    .await;
}
