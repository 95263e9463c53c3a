//! The MySQL compressed protocol between a client and the sidecar (CLIENT_COMPRESS, zlib):
//! offered when the server offers it, spoken both ways after the login, with answers as a
//! direct compressed connection gets them, from a byte to 40 MB: single rows around the
//! server's 16 KiB buffer and past 16 MiB, an incompressible blob, many small rows, several
//! result sets, prepared statements, errors, a LOAD DATA LOCAL file (compressed by the client),
//! with `mysql_async` and the `mariadb` CLI. `framing.rs`: the compressed packets themselves
//! against the server's; `clients.rs`: mysql-connector-python, node mysql2 and both
//! Connector/J drivers; `broken.rs`: compressed packets a server refuses.

#[path = "client_compression/broken.rs"]
mod broken;
#[path = "client_compression/clients.rs"]
mod clients;
#[path = "client_compression/framing.rs"]
mod framing;

use e2e::cli::mariadb_async;
use e2e::{
    DATABASE, PASSWORD, Tunnel, USER, answer_of, assert_same_answers, exec_answer, mysql_port,
    opts, within,
};
use mysql_async::prelude::Queryable;
use mysql_async::{Compression, Conn};

/// Answers from a byte to 40 MB, each a statement of its own.
const ANSWERS: &[&str] = &[
    "SELECT 1",
    "SELECT REPEAT('x', 16380), 7",
    "SELECT REPEAT('x', 200000), 7",
    "SELECT REPEAT('x', 5000000), 7",
    "SELECT REPEAT('x', 17000000), 7",
    "SELECT REPEAT('x', 40000000), 7",
    "SELECT b FROM zblob_clients",
    "SELECT seq, REPEAT('x', 100) FROM seq_1_to_20000",
    "SELECT seq, REPEAT('x', 100) FROM seq_1_to_100000",
    "SELECT 1; SELECT REPEAT('y', 70000); SELECT seq FROM seq_1_to_3000",
    "SELECT no_such_column",
];

/// The table [`ANSWERS`] reads a blob from: 1 MB that deflate does not shrink (its compressed
/// packets are sent as they are), made once per test process.
async fn blob_table() {
    static MADE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    MADE.get_or_init(|| async {
        let mut c = Conn::new(opts(mysql_port(), Some(DATABASE))).await.expect("login");
        for sql in [
            "CREATE OR REPLACE TABLE zblob_clients (b LONGBLOB)",
            "SET SESSION group_concat_max_len = 1073741824",
            "INSERT INTO zblob_clients \
             SELECT GROUP_CONCAT(UNHEX(SHA2(seq, 512)) SEPARATOR '') FROM seq_1_to_16000",
        ] {
            c.query_drop(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        c.disconnect().await.expect("quit");
    })
    .await;
}

async fn compressed(port: u16) -> Conn {
    let opts = opts(port, Some(DATABASE)).compression(Compression::fast());
    Conn::new(opts).await.expect("a compressed login")
}

#[tokio::test]
async fn mysql_async_with_compression_gets_what_it_gets_directly() {
    within(180, async {
        blob_table().await;
        let tunnel = Tunnel::start_passthrough("").await;
        let mut direct = compressed(mysql_port()).await;
        let mut through = compressed(tunnel.sidecar.port()).await;
        let mut answers = (Vec::new(), Vec::new());
        for sql in ANSWERS {
            answers.0.push(answer_of(&mut direct, sql).await);
            answers.1.push(answer_of(&mut through, sql).await);
        }
        assert_same_answers(ANSWERS, &answers.0, &answers.1);
        let prepared = "SELECT seq, CONCAT('v', seq) FROM seq_1_to_5000 WHERE seq > ?";
        let d = exec_answer(&mut direct, prepared, vec![10.into()]).await;
        let t = exec_answer(&mut through, prepared, vec![10.into()]).await;
        assert_eq!(d, t, "a prepared statement's binary rows");
        let large = "SELECT REPEAT('x', ?), 7";
        let d = exec_answer(&mut direct, large, vec![17_000_000.into()]).await;
        let t = exec_answer(&mut through, large, vec![17_000_000.into()]).await;
        assert!(d == t, "a binary row past 16 MiB");
        // The one difference: the upstream leg (the transport's) is not compressed, so the
        // server's `Compression` status says OFF where directly it says ON (docs/clients.md).
        let on: Option<(String, String)> =
            through.query_first("SHOW SESSION STATUS LIKE 'Compression'").await.expect("status");
        assert_eq!(on.map(|r| r.1), Some("OFF".to_owned()), "the upstream leg is plain");
        through.disconnect().await.expect("quit");
        direct.disconnect().await.expect("quit");
    })
    .await;
}

#[tokio::test]
async fn a_compressed_load_data_local_loads_what_it_loads_directly() {
    within(120, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let dir = std::env::temp_dir().join(format!("sqltunnel-zload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("rows.csv");
        let text: String = (0..50_000).map(|i| format!("{i},row number {i}\n")).collect();
        std::fs::write(&file, text).expect("file");
        for (port, table) in
            [(mysql_port(), "zload_direct"), (tunnel.sidecar.port(), "zload_tunnel")]
        {
            let handler = mysql_async::WhiteListFsHandler::new(&[&file][..]);
            let opts = opts(port, Some(DATABASE))
                .compression(Compression::fast())
                .local_infile_handler(Some(handler));
            let mut c = Conn::new(opts).await.expect("login");
            c.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.expect("drop");
            c.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY, v TEXT)"))
                .await
                .expect("create");
            c.query_drop(format!(
                "LOAD DATA LOCAL INFILE '{}' INTO TABLE {table} FIELDS TERMINATED BY ','",
                file.display()
            ))
            .await
            .expect("load");
            assert_eq!(c.affected_rows(), 50_000, "{table}");
            let sum: Option<u64> =
                c.query_first(format!("SELECT SUM(id) FROM {table}")).await.expect("sum");
            assert_eq!(sum, Some(49_999 * 50_000 / 2), "{table}");
            c.disconnect().await.expect("quit");
        }
        drop(std::fs::remove_dir_all(&dir));
    })
    .await;
}

#[tokio::test]
async fn the_mariadb_cli_with_compress_prints_what_it_prints_directly() {
    within(180, async {
        blob_table().await;
        let tunnel = Tunnel::start_passthrough("").await;
        // Its own default `max-allowed-packet` (16 MiB) ends the rows past it alike both ways
        // (error 2013, the client hangs up): they run once more with a larger one.
        let larger =
            ANSWERS.iter().filter(|sql| sql.contains("17000000") || sql.contains("40000000"));
        let runs = ANSWERS
            .iter()
            .map(|sql| (*sql, None))
            .chain(larger.map(|sql| (*sql, Some("--max-allowed-packet=64M"))));
        for (sql, option) in runs {
            let mut args = vec!["--compress", "--batch", "-e", sql, DATABASE];
            args.extend(option);
            let direct = mariadb_async(mysql_port(), USER, PASSWORD, &args).await;
            let through = mariadb_async(tunnel.sidecar.port(), USER, PASSWORD, &args).await;
            assert!(!direct.stdout.is_empty() || !direct.stderr.is_empty(), "{sql}");
            assert!(through.stdout == direct.stdout, "{sql} {option:?}: {}", through.stderr);
            assert_eq!(through.stderr, direct.stderr, "{sql} {option:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn several_result_sets_stay_in_sequence_whatever_the_flushes() {
    within(120, async {
        // A client that finds a compressed packet ending right at a result set's end takes it
        // for the server's flush and renumbers what follows (mysql_async does): the sidecar
        // never ends one there before the answer's end. Large sets make the sidecar send
        // parts of the answer while more comes.
        let tunnel = Tunnel::start_passthrough("").await;
        let mut c = compressed(tunnel.sidecar.port()).await;
        let sql = "SELECT seq, REPEAT('x', 100) FROM seq_1_to_2000; SELECT 1; \
                   SELECT REPEAT('y', 70000); SELECT seq FROM seq_1_to_3000; SELECT 3";
        for round in 0..25 {
            let mut result = c.query_iter(sql).await.expect("multi-statement");
            let mut sets = 0;
            while !result.is_empty() {
                let rows: Vec<mysql_async::Row> =
                    result.collect().await.unwrap_or_else(|e| panic!("round {round}: {e}"));
                assert!(!rows.is_empty(), "round {round}");
                sets += 1;
            }
            assert_eq!(sets, 5, "round {round}");
        }
        c.disconnect().await.expect("quit");
    })
    .await;
}
