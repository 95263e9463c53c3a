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
        assert_ne!(Some(handshake_id), upstream_id, "ids differ: the sidecar translates KILL");
        let sleeper = tokio::spawn(async move {
            let started = std::time::Instant::now();
            let result = victim.query_drop("SELECT SLEEP(60)").await;
            (result, started.elapsed(), victim)
        });
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
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
