//! The transport under abuse, without a token or with a wrong one: silent sockets, headers
//! trickled a byte at a time, a body that never comes, token guessing, large statements all
//! at once. Each is bounded, costs little memory, and leaves the transport serving.

use std::time::{Duration, Instant};

use e2e::http::{call, raw_request};
use e2e::processes::{Proc, ProcTunnel, free_port, wait_port};
use e2e::{Carrier, DATABASE, TOKEN, mysql_port, on_both_carriers, opts, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A transport on a free port with `extra` config lines.
async fn transport(extra: &str, tag: &str) -> (Proc, u16) {
    let port = free_port();
    let yaml = format!(
        "{}{extra}",
        e2e::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
    );
    let proc = Proc::start("transport", &yaml, tag);
    wait_port(port).await;
    (proc, port)
}

/// How long until the transport closes `stream`, reading (and dropping) what it sends.
async fn until_closed(mut stream: TcpStream) -> Duration {
    let start = Instant::now();
    let mut buf = vec![0u8; 4096];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
    start.elapsed()
}

#[tokio::test]
async fn slow_heads_and_stalled_bodies_are_cut_off() {
    within(60, async {
        let (_transport, port) = transport("idle_timeout: 2s\nbody_timeout: 1s\n", "slow").await;
        // Slowloris: a head trickled a byte every 300 ms never completes.
        let mut slow = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        slow.write_all(b"GET /v1/health HTTP/1.1\r\nX-Slow: ").await.expect("send");
        let trickle = tokio::spawn(async move {
            for _ in 0..40 {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if slow.write_all(b"a").await.is_err() {
                    return true;
                }
            }
            false
        });
        let started = Instant::now();
        assert!(trickle.await.expect("trickle"), "the transport closed the slow connection");
        assert!(started.elapsed() < Duration::from_secs(6), "within idle_timeout (2 s)");

        // Idle keep-alive: a connection that asked once and then fell silent is closed.
        let mut idle = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        idle.write_all(b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("send");
        assert!(until_closed(idle).await < Duration::from_secs(6), "idle keep-alive closed");

        // A body that stops arriving: 408 after body_timeout, with the token.
        let mut stalled = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let head = format!(
            "POST /v1/relay HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n{{\"upstream\":"
        );
        stalled.write_all(head.as_bytes()).await.expect("send");
        let mut answer = vec![0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), stalled.read(&mut answer))
            .await
            .expect("answered within 5 s")
            .expect("read");
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    })
    .await;
}

#[tokio::test]
async fn ten_thousand_silent_sockets_cost_little_and_go_away() {
    within(120, async {
        // All from one address: the per-client cap is lifted so that the total one is what
        // holds them (the per-client cap is `tests/door/attacks.rs`'s).
        let (transport, port) = transport("max_connections_per_client: 100000\n", "silent").await;
        let (before, fds_before) = (transport.rss_kib(), transport.open_fds());
        let mut sockets = Vec::with_capacity(10_000);
        for _ in 0..10_000 {
            match TcpStream::connect(("127.0.0.1", port)).await {
                Ok(s) => sockets.push(s),
                Err(e) => panic!("connect #{}: {e}", sockets.len()),
            }
        }
        // Measured once the transport holds (nearly: the port's probe may still hold a place)
        // max_connections of them, 4096 by default.
        let holding = Instant::now();
        while transport.open_fds() < fds_before + 4000 {
            assert!(holding.elapsed() < Duration::from_secs(10), "{} fds", transport.open_fds());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let during = transport.rss_kib();
        assert!(during < before + 16 * 1024, "RSS {before} KiB -> {during} KiB");
        // Beyond max_connections (4096 by default) they are closed at once; the rest within
        // the first-byte timeout (10 s).
        let started = Instant::now();
        for s in sockets.drain(..) {
            until_closed(s).await;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
        let (status, _, _) = call(port, TOKEN, "POST", "/v1/keepalive", "{\"sessions\":[]}").await;
        assert_eq!(status, 200, "the transport serves on");
    })
    .await;
}

#[tokio::test]
async fn token_guessing_is_slowed_down_logged_and_never_delays_the_right_token() {
    within(60, async {
        let (transport, port) = transport("", "guess").await;
        let started = Instant::now();
        for i in 0..15 {
            let (status, _, _) =
                call(port, &format!("guess-{i:08}"), "POST", "/v1/keepalive", "{}").await;
            assert_eq!(status, 401);
        }
        // Five free, then 50 ms more apart each: 50 ms × (1 + 2 + … + 10) = 2.75 s at least.
        assert!(started.elapsed() >= Duration::from_millis(2750), "{:?}", started.elapsed());
        let right = Instant::now();
        let (status, _, _) = call(port, TOKEN, "POST", "/v1/keepalive", "{\"sessions\":[]}").await;
        assert_eq!(status, 200);
        // The next refusal would wait 550 ms; the right token does not.
        assert!(right.elapsed() < Duration::from_millis(500), "{:?}", right.elapsed());
        let log = std::fs::read_to_string(&transport.log).expect("log");
        assert!(log.contains("refused requests with a wrong or missing token"), "{log}");
        assert!(
            log.contains("127.0.0.1") && !log.contains("guess-"),
            "peer logged, guess not: {log}"
        );
        let (status, text) =
            raw_request(port, "GET /v1/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .await;
        assert_eq!(status, 200, "{text}");
    })
    .await;
}

#[tokio::test]
async fn concurrent_large_statements_share_the_inflight_budget() {
    within(120, async {
        // Four 12 MB statements arrive together: the sidecar has room for three, the transport
        // for two, so one waits in the sidecar and at least one in the transport.
        let budget = "max_request_bytes: 16777216\nmax_inflight_bytes: 25165824\n";
        let sidecar_budget = "max_packet: 16777216\nmax_inflight_bytes: 41943040\n";
        let tunnel = ProcTunnel::start(
            "budget",
            |t| format!("{t}{budget}"),
            |s| format!("{s}{sidecar_budget}"),
        )
        .await;
        let port = tunnel.sidecar_port;
        let statements = (0..4).map(|i| {
            tokio::spawn(async move {
                let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("login");
                let text = "x".repeat((12 << 20) + i);
                let sql = format!("SELECT LENGTH('{text}')");
                let length: Option<usize> = conn.query_first(sql).await.expect("statement");
                assert_eq!(length, Some(text.len()));
            })
        });
        for statement in statements.collect::<Vec<_>>() {
            statement.await.expect("all four complete");
        }
        let transport_port = tunnel.transport_port;
        let (_, _, metrics) = call(transport_port, TOKEN, "GET", "/metrics", "").await;
        let waits = metrics
            .lines()
            .find_map(|l| l.strip_prefix("sqltunnel_budget_waits_total "))
            .and_then(|v| v.trim().parse::<u64>().ok());
        assert!(waits.is_some_and(|n| n > 0), "some waited for room: {metrics}");
    })
    .await;
}

on_both_carriers!(a_running_statement_holds_no_room);
/// A statement's room in the transport's budget is given back once it is written upstream,
/// not when its answer begins: while one that took all of the room runs, the next has room.
/// (A body over 16 KiB takes room on either carrier.)
async fn a_running_statement_holds_no_room(carrier: Carrier) {
    within(60, async {
        // Room for one 100 KB statement at a time; a wait for room gives up after 2 s.
        let budget = "max_request_bytes: 131072\nmax_inflight_bytes: 150000\nmax_inflight_bytes_per_token: 150000\nbody_timeout: 2s\n";
        let transport = |t: String| format!("{t}{budget}");
        let tunnel = ProcTunnel::start_on(carrier, "running", transport, |s| s).await;
        let port = tunnel.sidecar_port;
        let long = tokio::spawn(async move {
            let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("login");
            let sql = format!("SELECT SLEEP(6) + LENGTH('{}')", "x".repeat(100_000));
            conn.query_first::<u64, _>(sql).await.expect("the long statement")
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("login");
        let sql = format!("SELECT LENGTH('{}')", "y".repeat(100_000));
        let length: Option<u64> = conn.query_first(sql).await.expect("room while the other runs");
        assert_eq!(length, Some(100_000));
        assert!(!long.is_finished(), "the first statement ended before the second was answered");
        assert_eq!(long.await.expect("task"), Some(100_000));
    })
    .await;
}
