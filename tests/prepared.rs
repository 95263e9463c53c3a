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
        let session_closes = "SHOW SESSION STATUS LIKE 'Com_stmt_close'";
        let before: Option<(String, u64)> = t.query_first(session_closes).await.expect("status");
        t.close(a).await.expect("close a");
        // The close rides on this execute; b still works, a is gone upstream.
        let two: Option<i64> = t.exec_first(&b, (1,)).await.expect("execute b");
        assert_eq!(two, Some(2));
        let after: Option<(String, u64)> = t.query_first(session_closes).await.expect("status");
        assert_eq!(
            after.map(|r| r.1),
            before.map(|r| r.1 + 1),
            "exactly one statement closed upstream"
        );
        let stmts: Vec<(u64,)> = t.exec(&b, (41,)).await.expect("again");
        assert_eq!(stmts, vec![(42,)]);
    })
    .await;
}

/// PREPARE, SEND_LONG_DATA (two chunks per parameter, no answers), EXECUTE; every packet read.
async fn long_data_exchange(c: &mut e2e::raw::RawClient) -> Vec<Vec<u8>> {
    c.write_command(b"\x16SELECT LENGTH(?), MD5(?)").await;
    let prepared = c.read().await;
    assert_eq!(prepared[0], 0, "prepare OK: {prepared:?}");
    let stmt = [prepared[1], prepared[2], prepared[3], prepared[4]];
    let mut answer = Vec::new();
    for _ in 0..6 {
        answer.push(c.read().await); // 2 parameter and 2 column definitions, each list + EOF
    }
    for param in [0u8, 1] {
        for chunk in [&[0xabu8; 40_000][..], b"tail \x00\xff"] {
            let mut p = vec![0x18];
            p.extend_from_slice(&stmt);
            p.extend_from_slice(&[param, 0]);
            p.extend_from_slice(chunk);
            c.write_command(&p).await;
        }
    }
    let mut exec = vec![0x17];
    exec.extend_from_slice(&stmt);
    exec.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 0xfc, 0, 0xfc, 0]);
    c.write_command(&exec).await;
    for _ in 0..6 {
        answer.push(c.read().await); // column count, 2 definitions, EOF, the row, EOF
    }
    answer
}

#[tokio::test]
async fn long_data_rides_with_the_execute() {
    within(60, async {
        use e2e::raw::RawClient;
        let tunnel = Tunnel::start().await;
        let mut d =
            RawClient::login(e2e::mysql_port(), e2e::USER, e2e::PASSWORD, e2e::DATABASE).await;
        let mut t =
            RawClient::login(tunnel.sidecar.port(), e2e::USER, e2e::PASSWORD, e2e::DATABASE).await;
        let direct = long_data_exchange(&mut d).await;
        let through = long_data_exchange(&mut t).await;
        // The EOF statuses after definitions are the tunnel's last known ones (README).
        assert_eq!(direct.len(), through.len());
        for (i, (a, b)) in direct.iter().zip(&through).enumerate() {
            if a.first() == Some(&0xfe) && a.len() == 5 {
                continue;
            }
            assert_eq!(a, b, "packet {i} differs");
        }
        let row = &through[10];
        let length = u32::from_le_bytes(row[2..6].try_into().expect("LONG"));
        assert_eq!(length, 40_007, "both chunks of the long data arrived: {row:?}");
    })
    .await;
}
