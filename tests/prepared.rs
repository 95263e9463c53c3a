//! Server-side prepared statements (binary protocol) through the tunnel equal a direct
//! connection's: parameters of every type, binary rows of every column type, errors, and
//! statement handles that stay independent and can be closed without a round trip.

use e2e::scripts::TYPES_SCRIPT;
use e2e::{Answer, Tunnel, direct, exec_answer, within};
use mysql_async::Value;
use mysql_async::prelude::Queryable;

fn params() -> Vec<Value> {
    vec![
        Value::NULL,
        Value::Int(-42),
        Value::UInt(u64::MAX),
        Value::Double(-1.5e300),
        Value::Float(2.5),
        Value::Bytes(b"caf\xc3\xa9 \x00\xff".to_vec()),
        Value::Bytes(Vec::new()),
        Value::Date(2024, 2, 29, 23, 59, 58, 123_456),
        Value::Date(0, 0, 0, 0, 0, 0, 0),
        Value::Time(true, 2, 3, 4, 5, 6),
        Value::Time(false, 0, 0, 0, 0, 0),
    ]
}

#[tokio::test]
async fn parameters_and_binary_rows_match_direct() {
    within(120, async {
        let tunnel = Tunnel::start().await;
        let (mut d, mut t) = (direct().await, tunnel.connect().await);
        let sql = "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?";
        assert_eq!(exec_answer(&mut d, sql, params()).await, exec_answer(&mut t, sql, params()).await);
        // Every column type as a binary row: build the table, then read it with a statement.
        for setup in &TYPES_SCRIPT[..4] {
            d.query_drop(*setup).await.expect("setup");
        }
        for sql in [
            "SELECT * FROM all_types ORDER BY id",
            "SELECT * FROM all_types WHERE id = 1 AND c_varchar LIKE ?",
            "SELECT CAST('-838:59:59.5' AS TIME(1)), CAST('26:00:01' AS TIME), TIMESTAMP('2024-01-01 00:00:00.000001'), 1.5e0, 12345678901234567890",
            "UPDATE all_types SET c_tiny = c_tiny WHERE c_varchar LIKE ?",
            "SELEC 1",
            "SELECT * FROM no_such_table WHERE id = ?",
        ] {
            let params = if sql.contains('?') { vec![Value::Bytes(b"h%".to_vec())] } else { Vec::new() };
            let a = exec_answer(&mut d, sql, params.clone()).await;
            let b = exec_answer(&mut t, sql, params).await;
            assert_eq!(a, b, "answers differ for {sql}");
        }
        let a = exec_answer(&mut t, "SELECT * FROM all_types ORDER BY id", Vec::new()).await;
        let Answer::Ok { sets, .. } = a else { panic!("select failed") };
        assert_eq!(sets[0].0.len(), 28);
        d.query_drop("DROP TABLE all_types").await.expect("drop");
    })
    .await;
}

#[tokio::test]
async fn statements_are_independent_and_close_without_a_round_trip() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let mut t = tunnel.connect().await;
        let a = t.prep("SELECT ? + 1").await.expect("prepare a");
        let b = t.prep("SELECT ? + 1").await.expect("prepare b");
        assert_ne!(a.id(), b.id(), "the same SQL twice gives two statements");
        t.close(a).await.expect("close a");
        // The close is pipelined with this execute; b still works, a is gone upstream.
        let two: Option<i64> = t.exec_first(&b, (1,)).await.expect("execute b");
        assert_eq!(two, Some(2));
        let count: Option<(String, u64)> =
            t.query_first("SHOW SESSION STATUS LIKE 'Prepared_stmt_count'").await.expect("status");
        let global: Option<(String, u64)> =
            t.query_first("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").await.expect("global");
        assert!(count.is_some() && global.is_some());
        let stmts: Vec<(u64,)> = t.exec(&b, (41,)).await.expect("again");
        assert_eq!(stmts, vec![(42,)]);
    })
    .await;
}
