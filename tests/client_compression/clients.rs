//! Client programs with compression on and every other setting at its default, directly and
//! through the tunnel: mysql-connector-python's pure reader (text and prepared cursors), node
//! mysql2 and both Connector/J drivers print the same row counts and checksums.

use e2e::{DATABASE, PASSWORD, Tunnel, USER, mysql_port, within};

use super::{ANSWERS, blob_table};

/// `SELECT REPEAT('x', N), 7` for these N, for mysql-connector-python.
const PYTHON_ROWS: [usize; 6] = [1, 16_380, 200_000, 1_000_000, 5_000_000, 17_000_000];

/// Many small rows: mysql-connector-python fails on them directly (`struct.error`), as the
/// server splits a packet header between two compressed packets and its reader reads the
/// header from what it has; through the tunnel, where no header is split, it reads them.
const PYTHON_SMALL_ROWS: &str = "SELECT seq, REPEAT('x', 100) FROM seq_1_to_20000";

/// Runs `tests/clients/compressed_queries.py` on `port` with `flags` before the queries.
async fn python(port: u16, flags: &[&str], queries: &[String]) -> Vec<String> {
    let mut args = vec![port.to_string(), USER.into(), PASSWORD.into(), DATABASE.into()];
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    args.extend(queries.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    e2e::clients::python("compressed_queries.py", &args).await.lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn connector_python_reads_large_rows_as_it_reads_them_directly() {
    within(180, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let mut queries: Vec<String> =
            PYTHON_ROWS.iter().map(|n| format!("SELECT REPEAT('x', {n}), 7")).collect();
        queries.extend([PYTHON_SMALL_ROWS.to_owned(), "SELECT no_such_column".to_owned()]);
        for cursor in ["--text", "--prepared"] {
            // What the rows are: the same client without compression.
            let plain = python(mysql_port(), &[cursor, "--plain"], &queries).await;
            let direct = python(mysql_port(), &[cursor], &queries).await;
            let through = python(tunnel.sidecar.port(), &[cursor], &queries).await;
            assert_eq!(plain.len(), queries.len(), "{plain:?}");
            for (i, sql) in queries.iter().enumerate() {
                let (p, d, t) = (&plain[i], &direct[i], &through[i]);
                println!("{cursor} {sql}: plain {p}, direct {d}, through {t}");
                if p.starts_with("failed") {
                    // Its binary row reader fails on a row past 16 MiB, compressed or not:
                    // through the tunnel alike.
                    assert!(cursor == "--prepared" && sql.contains("17000000"), "{sql}: {p}");
                    assert_eq!((d, t), (p, p), "{cursor} {sql}");
                    continue;
                }
                assert_eq!(t, p, "{cursor} {sql}: through the tunnel");
                if *sql == PYTHON_SMALL_ROWS {
                    assert!(d.starts_with("failed"), "{cursor}: it fails directly: {d}");
                } else {
                    assert_eq!(d, p, "{cursor} {sql}: directly");
                }
            }
        }
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

/// Asserts that `direct` answered every one of [`ANSWERS`] (the last an error) and that
/// `through` printed the same.
fn assert_same_output(client: &str, direct: &str, through: &str) {
    let lines: Vec<&str> = direct.lines().collect();
    assert_eq!(lines.len(), ANSWERS.len(), "{client}: {direct}");
    for (line, sql) in lines.iter().zip(ANSWERS) {
        let error = sql.contains("no_such_column");
        assert_eq!(line.starts_with("error"), error, "{client} {sql}: {line}");
    }
    assert_eq!(through, direct, "{client}");
}

#[tokio::test]
async fn mysql2_with_compression_gets_what_it_gets_directly() {
    within(180, async {
        blob_table().await;
        let tunnel = Tunnel::start_passthrough("").await;
        let (direct, through) = both_ways(&tunnel, |port| async move {
            let mut args = vec![port.to_string(), USER.into(), PASSWORD.into(), DATABASE.into()];
            args.extend(ANSWERS.iter().map(|s| (*s).to_owned()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            e2e::clients::node("mysql2_compressed.js", &args).await
        })
        .await;
        assert_same_output("mysql2", &direct, &through);
    })
    .await;
}

#[tokio::test]
async fn connector_j_drivers_with_compression_get_what_they_get_directly() {
    within(240, async {
        blob_table().await;
        let tunnel = Tunnel::start_passthrough("").await;
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
                        "jdbc:{scheme}://127.0.0.1:{port}/{DATABASE}?useCompression=true\
                         &useSSL=false&allowPublicKeyRetrieval=true&allowMultiQueries=true"
                    );
                    let mut args = vec![url.as_str(), USER, PASSWORD];
                    args.extend(ANSWERS);
                    let out = e2e::java::run(&cp, "CompressedQueries", &args).await;
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    let lines = text.lines().map(e2e::java::without_connection_tags);
                    lines.collect::<Vec<_>>().join("\n")
                }
            })
            .await;
            assert_same_output(driver, &direct, &through);
        }
    })
    .await;
}
