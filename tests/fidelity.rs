//! Through the tunnel, `mysql_async` sees exactly what a direct connection sees: column
//! metadata, row bytes, OK fields, errors, transactions.

use e2e::{Tunnel, assert_same_answers, compare_script, direct, within};
use mysql_async::prelude::Queryable;

/// Every column type, NULLs, empty strings, utf8mb4, and all 256 byte values in a BLOB.
const TYPES_SCRIPT: &[&str] = &[
    "DROP TABLE IF EXISTS all_types",
    "CREATE TABLE all_types (
        id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        c_empty VARCHAR(10) NOT NULL DEFAULT '',
        c_tiny TINYINT, c_small SMALLINT UNSIGNED, c_medium MEDIUMINT, c_big BIGINT UNSIGNED,
        c_float FLOAT, c_double DOUBLE, c_decimal DECIMAL(20,6),
        c_date DATE, c_time TIME(3), c_datetime DATETIME(6), c_ts TIMESTAMP NULL, c_year YEAR,
        c_char CHAR(5), c_varchar VARCHAR(200) CHARACTER SET utf8mb4, c_binary BINARY(4), c_varbinary VARBINARY(16),
        c_text TEXT, c_blob BLOB, c_mediumblob MEDIUMBLOB, c_longtext LONGTEXT,
        c_enum ENUM('a','b'), c_set SET('x','y'), c_bit BIT(10), c_json JSON,
        c_geom POINT NULL, c_latin VARCHAR(10) CHARACTER SET latin1, KEY (c_tiny)
    )",
    "INSERT INTO all_types (c_empty, c_tiny, c_small, c_medium, c_big, c_float, c_double, c_decimal, c_date, c_time,
        c_datetime, c_ts, c_year, c_char, c_varchar, c_binary, c_varbinary, c_text, c_blob, c_mediumblob, c_longtext,
        c_enum, c_set, c_bit, c_json, c_geom, c_latin) VALUES
     ('', -128, 65535, -8388608, 18446744073709551615, 1.5, -2.25e100, -12345678901234.123456, '2024-02-29', '-838:59:59.000',
      '2024-12-31 23:59:59.999999', '2024-01-01 00:00:01', 2155, 'ab', 'héllo wörld 😀 日本', x'00ff0102', x'', 'text', x'00', x'ff', REPEAT('long', 1000),
      'b', 'x,y', b'1010101010', '{\"k\": [1, 2, null]}', POINT(1, 2), 'café'),
     ('', NULL, NULL, NULL, NULL, NULL, NULL, NULL, '0000-00-00', '00:00:00', '0000-00-00 00:00:00', NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "UPDATE all_types SET c_blob = (SELECT CAST(GROUP_CONCAT(CHAR(seq USING binary) ORDER BY seq SEPARATOR '') AS BINARY) FROM seq_0_to_255) WHERE id = 1",
    "SELECT * FROM all_types ORDER BY id",
    "SELECT c_empty, id FROM all_types",
    "SELECT '', NULL, 0, '' AS e, -0.0, 1e308, CAST(1 AS DECIMAL(65,30)), X'00', _utf8mb4'🙂', _latin1 x'e9'",
    "SELECT LENGTH(c_blob), MD5(c_blob), HEX(c_blob) FROM all_types WHERE id = 1",
    "SELECT t1.id AS alias_id, t2.c_varchar FROM all_types t1 JOIN all_types t2 ON t1.id = t2.id",
    "SELECT COUNT(*), SUM(c_tiny), MAX(c_datetime), GROUP_CONCAT(c_set) FROM all_types",
    "SELECT * FROM all_types WHERE 1 = 0",
    "SHOW COLUMNS FROM all_types",
    "SELECT * FROM information_schema.COLUMNS WHERE TABLE_NAME = 'all_types' ORDER BY ORDINAL_POSITION",
    "DROP TABLE all_types",
];

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

const DML_SCRIPT: &[&str] = &[
    "DROP TABLE IF EXISTS dml",
    "CREATE TABLE dml (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(3), n INT NOT NULL DEFAULT 0)",
    "INSERT INTO dml (v) VALUES ('a'), ('b'), ('c')",
    "INSERT INTO dml (v) VALUES ('d')",
    "UPDATE dml SET n = n + 1 WHERE id <= 2",
    "UPDATE dml SET n = 1 WHERE id = 1",
    "SET sql_mode = ''",
    "INSERT INTO dml (v) VALUES ('toolong'), ('x')",
    "SHOW WARNINGS",
    "INSERT INTO dml (id, v) VALUES (1, 'z') ON DUPLICATE KEY UPDATE v = 'z'",
    "REPLACE INTO dml (id, v) VALUES (2, 'r')",
    "DELETE FROM dml WHERE id > 4",
    "ALTER TABLE dml ADD COLUMN extra INT",
    "SELECT LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS()",
    "SET @u = 5",
    "SELECT @u, @@autocommit, @@sql_mode",
    "SELECT * FROM dml ORDER BY id",
    "SELECT 1 FROM dml FOR UPDATE",
    "DROP TABLE dml",
];

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

const ERROR_SCRIPT: &[&str] = &[
    "SELEC 1",
    "SELECT * FROM no_such_table",
    "SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 3100, MESSAGE_TEXT = 'custom failure ü'",
    "SELECT 1 FROM DUAL WHERE (SELECT 1 UNION SELECT 2) = 1",
    "USE no_such_database",
    "SELECT 'still fine after errors'",
];

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
