//! The MySQL compressed protocol between a client and the sidecar (CLIENT_COMPRESS, zlib):
//! offered when the server offers it, spoken both ways after the login, with answers as a
//! direct compressed connection gets them: small and large results (past 16 MiB, so
//! compressed packets are split), several result sets, prepared statements, errors, a LOAD
//! DATA LOCAL file (compressed by the client), with `mysql_async` and the `mariadb` CLI; and
//! the same answers, row counts and checksums, for mysql-connector-python (`compress=True`),
//! node mysql2 (`compress: true`) and both Connector/J drivers (`useCompression=true`).

use e2e::cli::mariadb_async;
use e2e::{
    DATABASE, PASSWORD, Tunnel, USER, answer_of, assert_same_answers, exec_answer, mysql_port,
    opts, within,
};
use mysql_async::prelude::Queryable;
use mysql_async::{Compression, Conn};

const SCRIPT: &[&str] = &[
    "SELECT 1, 'short'",
    "SELECT seq, REPEAT('x', 120), seq * 3 FROM seq_1_to_160000",
    "SELECT 1; SELECT REPEAT('y', 70000); SELECT 3",
    "SELECT no_such_column FROM DUAL",
];

async fn compressed(port: u16) -> Conn {
    let opts = opts(port, Some(DATABASE)).compression(Compression::fast());
    Conn::new(opts).await.expect("a compressed login")
}

#[tokio::test]
async fn mysql_async_with_compression_gets_what_it_gets_directly() {
    within(180, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let mut direct = compressed(mysql_port()).await;
        let mut through = compressed(tunnel.sidecar.port()).await;
        let mut answers = (Vec::new(), Vec::new());
        for sql in SCRIPT {
            answers.0.push(answer_of(&mut direct, sql).await);
            answers.1.push(answer_of(&mut through, sql).await);
        }
        assert_same_answers(SCRIPT, &answers.0, &answers.1);
        let prepared = "SELECT seq, CONCAT('v', seq) FROM seq_1_to_5000 WHERE seq > ?";
        let d = exec_answer(&mut direct, prepared, vec![10.into()]).await;
        let t = exec_answer(&mut through, prepared, vec![10.into()]).await;
        assert_eq!(d, t, "a prepared statement's binary rows");
        // The one difference: the upstream leg (the transport's) is not compressed, so the
        // server's `Compression` status says OFF where directly it says ON.
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
    within(120, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let sql = "SELECT seq, REPEAT('z', 40) FROM seq_1_to_30000; SELECT @@version_comment IS NOT NULL; SELECT nope";
        let args = ["--compress", "--batch", "-e", sql, DATABASE];
        let direct = mariadb_async(mysql_port(), USER, PASSWORD, &args).await;
        let through = mariadb_async(tunnel.sidecar.port(), USER, PASSWORD, &args).await;
        assert!(direct.stdout.len() > 30_000 * 40, "{}", direct.stderr);
        assert_eq!(through.stdout, direct.stdout);
        assert_eq!(through.stderr, direct.stderr, "the same error for the last statement");
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

/// Both outputs of a client program: directly and through the tunnel.
async fn both_ways<F, Fut>(tunnel: &Tunnel, run: F) -> (String, String)
where
    F: Fn(u16) -> Fut,
    Fut: std::future::Future<Output = String>,
{
    (run(mysql_port()).await, run(tunnel.sidecar.port()).await)
}

#[tokio::test]
async fn other_clients_with_compression_get_what_they_get_directly() {
    within(240, async {
        let tunnel = Tunnel::start_passthrough("").await;
        // (connector-python's compressed reader fails on 20,000 rows directly: its script asks
        // for 2,000.)
        for (script, first) in
            [("compressed_queries.py", "2000 rows"), ("mysql2_compressed.js", "20000 rows")]
        {
            let (direct, through) = both_ways(&tunnel, |port| async move {
                let args = [port.to_string(), USER.into(), PASSWORD.into(), DATABASE.into()];
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                if script.ends_with(".js") {
                    e2e::clients::node(script, &args).await
                } else {
                    e2e::clients::python(script, &args).await
                }
            })
            .await;
            assert!(direct.starts_with(first), "{script}: {direct}");
            assert_eq!(through, direct, "{script}");
        }
        let classpath = tokio::task::spawn_blocking(|| e2e::java::compile("CompressedQueries"))
            .await
            .expect("compile");
        for (driver, scheme, cp) in [
            ("MariaDB Connector/J", "mariadb", classpath.clone()),
            ("Oracle Connector/J", "mysql", e2e::java::with_oracle_driver(&classpath)),
        ] {
            let (direct, through) = both_ways(&tunnel, |port| {
                let cp = cp.clone();
                async move {
                    let url = format!(
                        "jdbc:{scheme}://127.0.0.1:{port}/{DATABASE}?useCompression=true&useSSL=false&allowPublicKeyRetrieval=true"
                    );
                    let out = e2e::java::run(&cp, "CompressedQueries", &[&url, USER, PASSWORD]).await;
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    text.lines().map(e2e::java::without_connection_tags).collect::<Vec<_>>().join("\n")
                }
            })
            .await;
            assert!(direct.starts_with("20000 rows"), "{driver}: {direct}");
            assert_eq!(through, direct, "{driver}");
        }
    })
    .await;
}
