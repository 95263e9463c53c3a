//! LOAD DATA LOCAL INFILE through the tunnel: the upstream asks, the sidecar asks the client,
//! the file streams up in pieces, and the upstream's answer comes back — compared with a direct
//! connection, with the `mariadb` CLI, PyMySQL and mysql_async; refusals get the server's error.

use e2e::cli::mariadb_async;
use e2e::{DATABASE, PASSWORD, Tunnel, USER, clients, direct, mysql_port, within};
use mysql_async::prelude::Queryable;

/// A CSV of `rows` lines (id, text) in a temp file; returns its path.
pub fn csv_file(tag: &str, rows: usize) -> String {
    let path =
        std::env::temp_dir().join(format!("sqltunnel-infile-{}-{tag}.csv", std::process::id()));
    let mut text = String::with_capacity(rows * 40);
    for i in 0..rows {
        text.push_str(&format!("{i},row {i} with some text to make it longer: {}\n", i * 7919));
    }
    std::fs::write(&path, text).expect("write csv");
    path.to_str().expect("utf-8 path").to_owned()
}

async fn fresh_table(name: &str) {
    let mut c = direct().await;
    c.query_drop(format!("DROP TABLE IF EXISTS {name}")).await.expect("drop");
    c.query_drop(format!("CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(100))"))
        .await
        .expect("create");
}

async fn checksum(name: &str) -> (u64, u64) {
    let mut c = direct().await;
    let sql = format!("SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT(id, ':', v))), 0) FROM {name}");
    c.query_first(sql).await.expect("checksum").expect("row")
}

fn load(path: &str, table: &str) -> String {
    format!("LOAD DATA LOCAL INFILE '{path}' INTO TABLE {table} FIELDS TERMINATED BY ','")
}

#[tokio::test]
async fn the_mariadb_cli_loads_a_local_file_as_it_does_directly() {
    within(120, async {
        let tunnel = Tunnel::start().await;
        // 60,000 rows, ~3.5 MB: several upload pieces.
        let path = csv_file("cli", 60_000);
        for (port, table) in
            [(mysql_port(), "inf_cli_direct"), (tunnel.sidecar.port(), "inf_cli_tunnel")]
        {
            fresh_table(table).await;
            let sql = format!("{}; SELECT ROW_COUNT()", load(&path, table));
            let run = mariadb_async(
                port,
                USER,
                PASSWORD,
                &["--local-infile=1", "-N", "-e", &sql, DATABASE],
            )
            .await;
            assert!(run.success, "{table}: {}", run.stderr);
            assert_eq!(run.stdout.trim(), "60000", "{table}");
        }
        let (direct_sum, tunnel_sum) =
            (checksum("inf_cli_direct").await, checksum("inf_cli_tunnel").await);
        assert_eq!(direct_sum.0, 60_000);
        assert_eq!(tunnel_sum, direct_sum);
        // Refusals: the client disabled it, or the file does not exist.
        for (args, file) in
            [(["--local-infile=0"], path.as_str()), (["--local-infile=1"], "/nonexistent/file.csv")]
        {
            let sql = load(file, "inf_cli_tunnel");
            let through = mariadb_async(
                tunnel.sidecar.port(),
                USER,
                PASSWORD,
                &[args[0], "-e", &sql, DATABASE],
            )
            .await;
            let direct =
                mariadb_async(mysql_port(), USER, PASSWORD, &[args[0], "-e", &sql, DATABASE]).await;
            assert!(!through.success, "{args:?} {file}");
            assert_eq!(through.stderr, direct.stderr, "{args:?} {file}");
        }
        assert_eq!(checksum("inf_cli_tunnel").await, direct_sum, "refusals loaded nothing");
    })
    .await;
}

#[tokio::test]
async fn pymysql_with_and_without_local_infile_matches_direct() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let path = csv_file("pymysql", 500);
        let mut outputs = Vec::new();
        for port in [mysql_port(), tunnel.sidecar.port()] {
            fresh_table("inf_py").await;
            let port = port.to_string();
            let sql = load(&path, "inf_py");
            let missing = load("/nonexistent/x.csv", "inf_py");
            let mut out = String::new();
            for mode in ["single", "infile"] {
                let args = [
                    port.as_str(),
                    USER,
                    PASSWORD,
                    DATABASE,
                    mode,
                    &sql,
                    &missing,
                    "SELECT COUNT(*) FROM inf_py",
                ];
                out.push_str(&clients::python("pymysql_queries.py", &args).await);
            }
            outputs.push(out);
        }
        assert!(outputs[0].contains("4166"), "{}", outputs[0]);
        assert!(outputs[0].contains("[[[\"500\"]]]"), "{}", outputs[0]);
        assert_eq!(outputs[1], outputs[0]);
    })
    .await;
}

/// A load, then a load between two other results of one query; returns the result sets.
async fn mysql_async_loads(port: u16, path: &str, tag: &str) -> Vec<Vec<u64>> {
    let (first, second) = (format!("inf_async_{tag}"), format!("inf_async2_{tag}"));
    fresh_table(&first).await;
    fresh_table(&second).await;
    let handler = mysql_async::WhiteListFsHandler::new(&[path][..]);
    let opts = e2e::opts(port, Some(DATABASE)).local_infile_handler(Some(handler));
    let mut c = mysql_async::Conn::new(opts).await.expect("login");
    c.query_drop(load(path, &first)).await.expect("load");
    assert_eq!(c.affected_rows(), 1000);
    assert!(c.info().contains("Records: 1000"), "{}", c.info());
    // Not the first result of its query: the row set before it is relayed first, then the
    // file is asked for.
    let sql = format!("SELECT 7 UNION SELECT 8; {}; SELECT 9", load(path, &second));
    let mut result = c.query_iter(sql).await.expect("multi-statement load");
    let mut sets: Vec<Vec<u64>> = Vec::new();
    while !result.is_empty() {
        sets.push(result.collect().await.expect("set"));
    }
    drop(result);
    assert_eq!(checksum(&second).await, checksum(&first).await);
    let n: Option<u64> =
        c.query_first(format!("SELECT COUNT(*) FROM {first}")).await.expect("query");
    assert_eq!(n, Some(1000), "the session goes on");
    sets
}

#[tokio::test]
async fn mysql_async_loads_and_the_session_goes_on() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let path = csv_file("async", 1000);
        let direct = mysql_async_loads(mysql_port(), &path, "direct").await;
        let through = mysql_async_loads(tunnel.sidecar.port(), &path, "tunnel").await;
        assert_eq!(direct, vec![vec![7, 8], vec![], vec![9]]);
        assert_eq!(through, direct);
    })
    .await;
}

const LOCAL_FILES: u32 = 0x0000_0080;

/// A raw client that starts a LOAD DATA LOCAL into `table`, sends `rows` rows of the file
/// and then neither ends it nor hangs up.
async fn start_partial_load(port: u16, table: &str, rows: usize) -> e2e::raw::RawClient {
    use e2e::raw::{CAPS, RawClient};
    let mut c =
        RawClient::login_with_caps(port, USER, PASSWORD, DATABASE, CAPS | LOCAL_FILES).await;
    let sql = format!(
        "\x03LOAD DATA LOCAL INFILE 'part.csv' INTO TABLE {table} FIELDS TERMINATED BY ','"
    );
    c.write_command(sql.as_bytes()).await;
    assert_eq!(c.read().await, b"\xfbpart.csv", "the server asks for the file");
    let data: String = (0..rows).map(|i| format!("{i},partial\n")).collect();
    for chunk in data.as_bytes().chunks(4096) {
        c.write(chunk).await;
    }
    c
}

/// Waits (up to 10 s) until no LOAD DATA LOCAL into `table` runs upstream.
async fn load_ends(table: &str) -> bool {
    let mut d = direct().await;
    let loading = format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'LOAD DATA LOCAL%{table} %'"
    );
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if d.query_first::<u64, _>(loading.as_str()).await.expect("processlist") == Some(0) {
            return true;
        }
    }
    false
}

async fn count(table: &str) -> u64 {
    let sql = format!("SELECT COUNT(*) FROM {table}");
    direct().await.query_first(sql).await.expect("count").expect("row")
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_file_loads_nothing_as_directly() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        for (port, table) in
            [(mysql_port(), "inf_hangup_direct"), (tunnel.sidecar.port(), "inf_hangup_tunnel")]
        {
            fresh_table(table).await;
            let c = start_partial_load(port, table, 20_000).await;
            drop(c);
            // Uncommitted rows are invisible anyway: first the statement must have ended.
            assert!(load_ends(table).await, "{table}: the load ended when its client left");
            assert_eq!(count(table).await, 0, "{table}: the statement was rolled back");
        }
        let mut t = tunnel.connect().await;
        assert_eq!(t.query_first::<u64, _>("SELECT 1").await.expect("query"), Some(1));
    })
    .await;
}

#[tokio::test]
async fn a_stalled_file_is_cancelled_without_loading_part_of_it() {
    within(60, async {
        let transport = e2e::transport_yaml(mysql_port())
            .replace("session_timeout: 30s", "session_timeout: 2s");
        let tunnel =
            Tunnel::start_custom(&transport, |url| e2e::sidecar_yaml(url, e2e::TOKEN)).await;
        fresh_table("inf_stall").await;
        let _stalled = start_partial_load(tunnel.sidecar.port(), "inf_stall", 20_000).await;
        assert!(load_ends("inf_stall").await, "the stalled load was cancelled upstream");
        assert_eq!(count("inf_stall").await, 0, "nothing of the partial file was loaded");
    })
    .await;
}

#[tokio::test]
async fn a_command_pipelined_behind_a_load_data_local_gets_an_error_not_a_hang() {
    within(60, async {
        use e2e::raw::{CAPS, Ending, RawClient};
        let tunnel = Tunnel::start().await;
        let mut answers = Vec::new();
        for (port, table) in
            [(mysql_port(), "inf_piped_direct"), (tunnel.sidecar.port(), "inf_piped_tunnel")]
        {
            fresh_table(table).await;
            let mut c =
                RawClient::login_with_caps(port, USER, PASSWORD, DATABASE, CAPS | LOCAL_FILES)
                    .await;
            // The client sends a ping right behind the LOAD DATA, where the file should come.
            let load = format!("\x03LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE {table}");
            c.write_pipeline(&[load.into_bytes(), vec![0x0e]]).await;
            let answer = c.read_until_quiet().await;
            answers.push((c, answer));
            assert_eq!(count(table).await, 0, "{table}: nothing loaded");
        }
        let (mut client, through) = answers.pop().expect("through the tunnel");
        let (_, direct) = answers.pop().expect("direct");
        let (direct, through) = (&direct, &through);
        // Both ask for the file. The server then takes the ping for file data out of order
        // and aborts the connection (its log says so) without a word to the client; the
        // sidecar says it, error 1156, and hangs up at once.
        let request = b"\x06\0\0\x01\xfbx.csv";
        assert_eq!(direct[..], request[..]);
        assert_eq!(through[..10], request[..]);
        assert_eq!(through[14..17], [0xff, 0x84, 0x04], "error 1156: {through:?}");
        assert!(String::from_utf8_lossy(through).ends_with("Got packets out of order"));
        let ending = client.ending_within(std::time::Duration::from_secs(2)).await;
        assert!(matches!(ending, Ending::Closed | Ending::Reset), "{ending:?}");
    })
    .await;
}
