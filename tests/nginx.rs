//! Through a real nginx, with the example config and with nginx's defaults: answers match a
//! direct connection, long queries outlive nginx's read timeout, big results stream, a body
//! nginx refuses and nginx's own 502/504 pages become clear MySQL errors, and the sidecar
//! recovers when the transport comes back.

use std::time::Duration;

use e2e::http::metric;
use e2e::nginx::{Nginx, default_config, example_config};
use e2e::processes::{Proc, free_port, wait_port};
use e2e::scripts::{DML_SCRIPT, ERROR_SCRIPT, TYPES_SCRIPT};
use e2e::{
    DATABASE, PASSWORD, TOKEN, Tunnel, USER, assert_same_answers, compare_script, direct,
    mysql_port, opts, sidecar_yaml, within,
};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use tokio_util::sync::CancellationToken;

/// A transport in-process, nginx in front of it with `config`, a sidecar pointed at nginx.
async fn behind_nginx(config: impl Fn(u16, u16) -> String, sidecar_extra: &str) -> (Tunnel, Nginx) {
    let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let transport_port = listener.local_addr().expect("addr").port();
    let nginx_port = Nginx::port();
    let nginx = Nginx::start(&config(transport_port, nginx_port), nginx_port).await;
    let url = format!("http://127.0.0.1:{nginx_port}/db-tunnel/");
    let sidecar = format!("{}{sidecar_extra}", sidecar_yaml(&url, TOKEN));
    let tunnel = Tunnel::start_with(listener, &e2e::transport_yaml(mysql_port()), &sidecar).await;
    (tunnel, nginx)
}

fn example(transport: u16, port: u16) -> String {
    example_config(&[transport], port)
}

fn defaults(transport: u16, port: u16) -> String {
    default_config(transport, port, "")
}

/// The scripts create and drop the same tables: tests running them take turns.
static SCRIPT_TABLES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn core_scripts_match(tunnel: &Tunnel) {
    let _turn = SCRIPT_TABLES.lock().await;
    for script in [TYPES_SCRIPT, DML_SCRIPT, ERROR_SCRIPT] {
        let (mut d, mut t) = (direct().await, tunnel.connect().await);
        let (a, b) = compare_script(&mut d, &mut t, script).await;
        assert_same_answers(script, &a, &b);
    }
}

#[tokio::test]
async fn core_answers_match_direct_through_the_example_config() {
    within(120, async {
        let (tunnel, nginx) = behind_nginx(example, "").await;
        core_scripts_match(&tunnel).await;
        // nginx logs an upgraded connection when it ends: the transport counts the streams.
        let streams =
            metric(tunnel.transport.port(), Some(TOKEN), "sqltunnel_streams_opened_total");
        assert!(streams.await > 0, "sessions rode streams through nginx");
        let log = nginx.access_log();
        assert!(!log.contains("/v1/sessions/"), "every session request rode a stream: {log}");
        // The metrics stay inside, even for a token.
        let metrics = format!(
            "GET /db-tunnel/metrics HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        );
        let (status, text) = e2e::http::raw_request(nginx.port, &metrics).await;
        assert_eq!(status, 404, "{text}");
    })
    .await;
}

#[tokio::test]
async fn core_answers_match_direct_through_nginx_defaults() {
    within(120, async {
        let (tunnel, nginx) = behind_nginx(defaults, "").await;
        core_scripts_match(&tunnel).await;
        let log = nginx.access_log();
        assert!(log.contains("/db-tunnel/v1/sessions"), "requests went through nginx: {log}");
        // The upgrade was refused, then not asked for again (remembered): a few at most (the
        // first connections may ask at once), against every request of the scripts.
        let refusals = log.matches("\"GET /db-tunnel/v1/stream HTTP/1.1\" 426").count();
        assert!((1..=4).contains(&refusals), "{refusals} refusals: {log}");
        assert!(log.matches("/v1/sessions/").count() > 10, "{log}");
    })
    .await;
}

#[tokio::test]
async fn a_90_second_query_outlives_nginx_default_60_second_read_timeout() {
    within(150, async {
        let (tunnel, _nginx) = behind_nginx(defaults, "").await;
        let mut t = tunnel.connect().await;
        let slept: Option<u32> =
            t.query_first("SELECT SLEEP(90)").await.expect("long query through nginx");
        assert_eq!(slept, Some(0), "SLEEP ran to the end");
    })
    .await;
}

async fn count_million(conn: &mut Conn) -> u64 {
    let mut result =
        conn.query_iter("SELECT seq, REPEAT('x', 100) FROM seq_1_to_1000000").await.expect("query");
    let mut n = 0;
    result.for_each(|_: Row| n += 1).await.expect("stream");
    n
}

#[tokio::test]
async fn a_million_rows_stream_through_both_configs() {
    within(300, async {
        for config in [example as fn(u16, u16) -> String, defaults] {
            let (tunnel, _nginx) = behind_nginx(config, "").await;
            let mut t = tunnel.connect().await;
            assert_eq!(count_million(&mut t).await, 1_000_000);
        }
    })
    .await;
}

#[tokio::test]
async fn a_5mb_insert_is_refused_clearly_by_default_nginx_and_works_with_the_example() {
    within(120, async {
        let big = "x".repeat(5 << 20);
        let insert = format!("INSERT INTO big_insert VALUES (1, '{big}')");
        let mut d = direct().await;
        d.query_drop("DROP TABLE IF EXISTS big_insert").await.expect("drop");
        d.query_drop("CREATE TABLE big_insert (id INT, body LONGTEXT)").await.expect("create");

        let (tunnel, _nginx) = behind_nginx(defaults, "").await;
        let mut t = tunnel.connect().await;
        match t.query_drop(&insert).await {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!(e.code, 1153);
                assert!(
                    e.message.contains("HTTP 413") && e.message.contains("client_max_body_size"),
                    "{}",
                    e.message
                );
            }
            other => panic!("expected a clear 413 error, got {other:?}"),
        }
        let still: Option<u8> = t.query_first("SELECT 1").await.expect("the session carries on");
        assert_eq!(still, Some(1));

        let (tunnel, _nginx) = behind_nginx(example, "").await;
        let mut t = tunnel.connect().await;
        t.query_drop(&insert).await.expect("5 MB insert through the example config");
        let len: Option<u64> =
            d.query_first("SELECT LENGTH(body) FROM big_insert WHERE id = 1").await.expect("read");
        assert_eq!(len, Some(5 << 20));
        d.query_drop("DROP TABLE big_insert").await.expect("drop");
    })
    .await;
}

#[tokio::test]
async fn a_6mb_local_infile_goes_through_nginx_defaults_in_pieces() {
    within(120, async {
        let (tunnel, nginx) = behind_nginx(defaults, "").await;
        let path =
            std::env::temp_dir().join(format!("sqltunnel-nginx-infile-{}.csv", std::process::id()));
        let rows = 100_000;
        let text: String = (0..rows).map(|i| format!("{i},{}\n", "x".repeat(50))).collect();
        std::fs::write(&path, &text).expect("csv");
        let path = path.to_str().expect("utf-8 path").to_owned();
        let mut d = direct().await;
        d.query_drop("DROP TABLE IF EXISTS nginx_infile").await.expect("drop");
        d.query_drop("CREATE TABLE nginx_infile (id INT PRIMARY KEY, v TEXT)")
            .await
            .expect("create");
        let handler = mysql_async::WhiteListFsHandler::new(&[path.as_str()][..]);
        let opts = opts(tunnel.sidecar.port(), Some(DATABASE)).local_infile_handler(Some(handler));
        let mut t = Conn::new(opts).await.expect("login");
        let sql = format!(
            "LOAD DATA LOCAL INFILE '{path}' INTO TABLE nginx_infile FIELDS TERMINATED BY ','"
        );
        if let Err(e) = t.query_drop(sql).await {
            panic!(
                "the load must pass nginx's 1 MiB body limit in pieces: {e}\n{}",
                nginx.access_log()
            );
        }
        assert_eq!(t.affected_rows(), rows);
        let (n, bytes): (u64, u64) = d
            .query_first("SELECT COUNT(*), SUM(LENGTH(v)) FROM nginx_infile")
            .await
            .expect("count")
            .expect("row");
        assert_eq!((n, bytes), (rows, rows * 50));
        let uploads = nginx.access_log().matches("/infile ").count();
        assert!(uploads >= 6, "{} bytes in pieces: {uploads} upload requests", text.len());
    })
    .await;
}

#[tokio::test]
async fn nginx_502_is_a_clear_error_and_the_sidecar_recovers() {
    within(120, async {
        let transport_port = free_port();
        let transport_yaml = e2e::transport_yaml(mysql_port())
            .replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"));
        let mut transport = Proc::start("transport", &transport_yaml, "n502");
        wait_port(transport_port).await;
        let nginx_port = Nginx::port();
        let _nginx = Nginx::start(&example(transport_port, nginx_port), nginx_port).await;
        let shutdown = CancellationToken::new();
        let url = format!("http://127.0.0.1:{nginx_port}/db-tunnel/");
        let sidecar = Tunnel::start_sidecar(&sidecar_yaml(&url, TOKEN), shutdown.clone()).await;
        let mut before =
            Conn::new(opts(sidecar.port(), Some(DATABASE))).await.expect("works at first");

        transport.kill();
        match Conn::new(opts(sidecar.port(), Some(DATABASE))).await {
            Err(mysql_async::Error::Server(e)) => {
                assert!(
                    e.message.contains("HTTP 502 Bad Gateway")
                        && e.message.contains("not a sqltunnel answer"),
                    "{}",
                    e.message
                );
            }
            other => panic!("expected a clear 502 error, got {:?}", other.map(|_| ())),
        }
        let err = before.query_drop("SELECT 1").await.expect_err("the transport is down");
        assert!(err.to_string().contains("502"), "{err}");

        let _transport = Proc::start("transport", &transport_yaml, "n502b");
        wait_port(transport_port).await;
        let mut after = Conn::new(opts(sidecar.port(), Some(DATABASE)))
            .await
            .expect("new connections work again");
        let one: Option<u8> = after.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
        assert!(
            before.query_drop("SELECT 1").await.is_err(),
            "the old session died with the old transport"
        );
        shutdown.cancel();
    })
    .await;
}

#[tokio::test]
async fn nginx_504_is_a_clear_error() {
    within(60, async {
        // A "transport" that accepts connections and never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let silent_port = silent.local_addr().expect("addr").port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = silent.accept().await {
                held.push(s);
            }
        });
        let nginx_port = Nginx::port();
        let _nginx = Nginx::start(
            &default_config(silent_port, nginx_port, "proxy_read_timeout 1s;"),
            nginx_port,
        )
        .await;
        let shutdown = CancellationToken::new();
        let url = format!("http://127.0.0.1:{nginx_port}/db-tunnel/");
        let sidecar = Tunnel::start_sidecar(&sidecar_yaml(&url, TOKEN), shutdown.clone()).await;
        let opts = opts(sidecar.port(), Some(DATABASE)).user(Some(USER)).pass(Some(PASSWORD));
        match tokio::time::timeout(Duration::from_secs(30), Conn::new(opts)).await {
            Ok(Err(mysql_async::Error::Server(e))) => {
                assert!(e.message.contains("HTTP 504 Gateway Time-out"), "{}", e.message)
            }
            other => panic!("expected a clear 504 error, got {:?}", other.map(|r| r.map(|_| ()))),
        }
        shutdown.cancel();
    })
    .await;
}

#[tokio::test]
async fn sessions_spread_over_two_transports_and_stay_on_theirs() {
    within(120, async {
        let ports = [free_port(), free_port()];
        let mut transports: Vec<Proc> = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let yaml = e2e::transport_yaml(mysql_port())
                .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
                .replace("session_timeout: 30s", "session_timeout: 2s");
            transports.push(Proc::start("transport", &yaml, &format!("scale{i}")));
            wait_port(*port).await;
        }
        let nginx_port = Nginx::port();
        let _nginx = Nginx::start(&example_config(&ports, nginx_port), nginx_port).await;
        let shutdown = CancellationToken::new();
        let url = format!("http://127.0.0.1:{nginx_port}/db-tunnel/");
        let sidecar_config = format!("{}heartbeat_interval: 500ms\n", sidecar_yaml(&url, TOKEN));
        let sidecar = Tunnel::start_sidecar(&sidecar_config, shutdown.clone()).await;

        let mut d = direct().await;
        d.query_drop("CREATE TABLE IF NOT EXISTS scale_probe (session INT, n INT) ENGINE=InnoDB")
            .await
            .expect("create");
        let file = std::env::temp_dir().join(format!("sqltunnel-scale-{}.tsv", std::process::id()));
        std::fs::write(&file, "1000\t2\n").expect("file");
        let file = file.to_str().expect("utf-8 path").to_owned();
        let mut conns = Vec::new();
        for i in 0..40 {
            let handler = mysql_async::WhiteListFsHandler::new(&[file.as_str()][..]);
            let opts = opts(sidecar.port(), Some(DATABASE)).local_infile_handler(Some(handler));
            let mut c = Conn::new(opts).await.expect("connect");
            // A transaction spans several requests: it only works if they all reach one transport
            // (a LOCAL INFILE upload is a request of its own, too).
            c.query_drop("BEGIN").await.expect("begin");
            c.query_drop(format!("INSERT INTO scale_probe VALUES ({i}, 1)")).await.expect("insert");
            c.query_drop(format!("LOAD DATA LOCAL INFILE '{file}' INTO TABLE scale_probe"))
                .await
                .expect("the upload reaches the session's transport");
            let mine: Option<u64> = c
                .query_first(format!(
                    "SELECT COUNT(*) FROM scale_probe WHERE session IN ({i}, 1000)"
                ))
                .await
                .expect("read own write");
            assert_eq!(mine, Some(2));
            c.query_drop("ROLLBACK").await.expect("rollback");
            conns.push(c);
        }
        let open = [
            metric(ports[0], Some(TOKEN), "sqltunnel_sessions_open").await,
            metric(ports[1], Some(TOKEN), "sqltunnel_sessions_open").await,
        ];
        // Forty, and perhaps the one greeting the sidecar prepared for its next client.
        assert!((40..=41).contains(&(open[0] + open[1])), "{open:?}");
        assert!(open[0] > 0 && open[1] > 0, "sessions spread over both transports: {open:?}");
        // Idle past the 2 s session timeout: heartbeats must reach the sessions on both.
        tokio::time::sleep(Duration::from_secs(3)).await;
        for c in &mut conns {
            c.query_drop("SELECT 1").await.expect("kept alive by heartbeats to its own transport");
        }

        transports[0].kill();
        let mut lost = 0;
        for c in &mut conns {
            if c.query_drop("SELECT 1").await.is_err() {
                lost += 1;
            }
        }
        // A greeting prepared for the next client may be one of the stopped transport's sessions.
        let prepared = open[0] + open[1] - 40;
        assert!(
            lost <= open[0] && lost + prepared >= open[0],
            "exactly the sessions of the stopped transport are lost: {lost} of {open:?}"
        );
        for _ in 0..5 {
            let mut c = Conn::new(opts(sidecar.port(), Some(DATABASE)))
                .await
                .expect("reconnect lands on the live transport");
            let one: Option<u8> = c.query_first("SELECT 1").await.expect("query");
            assert_eq!(one, Some(1));
        }
        d.query_drop("DROP TABLE scale_probe").await.expect("drop");
        shutdown.cancel();
    })
    .await;
}

#[tokio::test]
async fn the_example_config_as_shipped_serves_the_tunnel_over_https_only() {
    within(120, async {
        let pki = e2e::certs::TestPki::new("nginx-tls");
        let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let transport_port = listener.local_addr().expect("addr").port();
        let (https, plain) = (Nginx::port(), Nginx::port());
        let config = e2e::nginx::example_config_tls(
            &[transport_port],
            (https, plain),
            (&pki.server_cert, &pki.server_key),
        );
        let nginx = Nginx::start(&config, https).await;
        wait_port(plain).await;
        let url = format!("https://localhost:{https}/db-tunnel/");
        let tls = format!("  connect_timeout: 2s\n  tls:\n    ca_file: {}\n", pki.ca.display());
        let sidecar = sidecar_yaml(&url, TOKEN).replace("  connect_timeout: 2s\n", &tls);
        let tunnel =
            Tunnel::start_with(listener, &e2e::transport_yaml(mysql_port()), &sidecar).await;
        core_scripts_match(&tunnel).await;
        let streams =
            metric(tunnel.transport.port(), Some(TOKEN), "sqltunnel_streams_opened_total");
        assert!(streams.await > 0, "sessions rode streams through nginx's TLS");
        // Plain HTTP is only a redirect to HTTPS, for every path.
        let (status, text) = e2e::http::raw_request(
            plain,
            "GET /db-tunnel/v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert_eq!(status, 301, "{text}");
        assert!(text.contains("Location: https://localhost/db-tunnel/v1/health"), "{text}");
        drop(nginx);
    })
    .await;
}
