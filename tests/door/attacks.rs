//! The door under attack: each attack runs against a real transport (a process), a real
//! sidecar and the test MariaDB, with a legitimate client working meanwhile, and asserts on what
//! that client and the operator see. The seeded door fuzzer is `fuzz.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use e2e::door::{HostileUpstream, Legit, packet, post, read_head, transport_with};
use e2e::http::{call, metric, raw_request};
use e2e::{DATABASE, TOKEN, direct, within};
use mysql_async::prelude::Queryable;
use tokio::io::AsyncWriteExt;

/// Finding 1: tokenless requests on keep-alive, about two refusals a second from 80
/// connections, held every one of 64 connection slots (the slow-down answered the k-th refusal
/// about k seconds later, holding its slot meanwhile). Now a refusal is answered within about
/// 2 s, its connection is closed, and the sidecar's logins go on.
#[tokio::test]
async fn a_tokenless_flood_does_not_hold_the_door() {
    within(120, async {
        let (transport, port) = transport_with("flood", "max_connections: 64\n").await;
        let stop = Arc::new(AtomicBool::new(false));
        let (slowest, refused, closed) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut attackers = Vec::new();
        for i in 0..80u64 {
            let (stop, slowest, refused, closed) = (stop.clone(), slowest.clone(), refused.clone(), closed.clone());
            attackers.push(tokio::spawn(async move {
                // Spread over the first two seconds, then one request every 40 s per connection:
                // two a second in all, each kept open on keep-alive for the next.
                tokio::time::sleep(Duration::from_millis(i * 25)).await;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    loop {
                        let asked = Instant::now();
                        let req = "GET /v1/sessions/0123456789abcdef0123456789abcdef/command HTTP/1.1\r\nHost: t\r\n\r\n";
                        if s.write_all(req.as_bytes()).await.is_err() {
                            break;
                        }
                        let Some(head) = read_head(&mut s, Duration::from_secs(30)).await else { break };
                        slowest.fetch_max(asked.elapsed().as_millis() as usize, Ordering::Relaxed);
                        refused.fetch_add(1, Ordering::Relaxed);
                        if head.to_ascii_lowercase().contains("connection: close") {
                            closed.fetch_add(1, Ordering::Relaxed);
                        }
                        for _ in 0..400 {
                            if stop.load(Ordering::Relaxed) {
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        // The legitimate user arrives once the flood is on: each of its logins is a new
        // session, and its sidecar's first connections are new too.
        let legit = Legit::start(port).await;
        let mut outcomes = Vec::new();
        for _ in 0..9 {
            outcomes.push(legit.login_and_query().await);
            let (status, _) = raw_request(port, "GET /v1/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await;
            assert_eq!(status, 200, "health answered during the flood");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        stop.store(true, Ordering::Relaxed);
        for a in attackers {
            a.abort();
        }
        let failed: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
        assert!(failed.is_empty(), "legitimate logins failed during the flood: {failed:?}");
        let (refused, closed) = (refused.load(Ordering::Relaxed), closed.load(Ordering::Relaxed));
        assert!(refused >= 80, "the flood ran: {refused} refusals");
        assert_eq!(closed, refused, "every refusal closes its connection");
        let slowest = slowest.load(Ordering::Relaxed);
        assert!(slowest < 3_000, "a refusal waited {slowest} ms");
        // The operator sees the refusals counted.
        assert!(metric(port, Some(TOKEN), "sqltunnel_unauthorized_total").await >= refused as u64);
        drop(transport);
    })
    .await;
}

/// Finding 8: `/v1/ready` checked a presented token without the slow-down, the log line or the
/// metric: a token oracle. Now it refuses as every route does.
#[tokio::test]
async fn ready_checks_a_token_as_every_route_does() {
    within(60, async {
        let (transport, port) = transport_with("ready-oracle", "").await;
        let guess = |i: usize| format!("GET /v1/ready HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer guess-{i:040}\r\nConnection: close\r\n\r\n");
        // One guess after the other: refused, and further apart the more there were.
        let (mut statuses, started) = (Vec::new(), Instant::now());
        for i in 0..12 {
            statuses.push(raw_request(port, &guess(i)).await.0);
        }
        let took = started.elapsed();
        assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
        assert!(took >= Duration::from_millis(1000), "guesses are slowed down: {took:?}");
        // Many at once: a few are held, the rest refused at once with 429.
        let at_once: Vec<_> = (12..24)
            .map(|i| {
                let request = guess(i);
                tokio::spawn(async move { raw_request(port, &request).await })
            })
            .collect();
        let mut statuses = Vec::new();
        for guess in at_once {
            statuses.push(guess.await.expect("guess").0);
        }
        assert!(statuses.iter().all(|s| *s == 401 || *s == 429), "{statuses:?}");
        assert!(statuses.contains(&429), "parallel guessing is throttled: {statuses:?}");
        assert!(metric(port, Some(TOKEN), "sqltunnel_unauthorized_total").await >= 24);
        transport.log_grows("refused requests with a wrong or missing token", 0).await;
        // Without a token it still answers with the status only, and with the right one, fully.
        let (status, text) = raw_request(port, "GET /v1/ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await;
        assert!((status == 200 || status == 503) && !text.contains("identity"), "{text}");
        let (status, _, body) = call(port, TOKEN, "GET", "/v1/ready", "").await;
        assert!((status == 200 || status == 503) && body.contains("\"identity\""), "{body}");
    })
    .await;
}

/// Finding 3: a keepalive listing tens of thousands of unknown ids took seconds of one thread
/// without yielding (quadratic), stalling every other request of that thread.
#[tokio::test]
async fn a_huge_keepalive_is_refused_at_once() {
    within(60, async {
        let (_transport, port) = transport_with("keepalive", "worker_threads: 1\n").await;
        let legit = Legit::start(port).await;
        let ids: Vec<String> = (0..80_000u32).map(|i| format!("{i:032x}")).collect();
        let body = serde_json::json!({ "sessions": ids, "wait_ms": 0 }).to_string();
        let asked = Instant::now();
        let (status, _, text) = call(port, TOKEN, "POST", "/v1/keepalive", &body).await;
        assert!(status == 400 || status == 413, "{status} {}", &text[..text.len().min(300)]);
        assert!(asked.elapsed() < Duration::from_secs(5), "answered in {:?}", asked.elapsed());
        // The most a caller may list is still looked up quickly, and the thread stays free.
        let ids: Vec<String> = (0..200u32).map(|i| format!("{i:032x}")).collect();
        let body = serde_json::json!({ "sessions": ids, "wait_ms": 0 }).to_string();
        let (status, _, text) = call(port, TOKEN, "POST", "/v1/keepalive", &body).await;
        assert_eq!(status, 200, "{}", &text[..text.len().min(300)]);
        assert!(text.contains(&format!("{:032x}", 199)), "unknown ids are gone");
        legit.login_and_query().await.expect("the legitimate client goes on");
    })
    .await;
}

/// Finding 4: a statement appended to a LOAD DATA LOCAL file piece, behind its terminating
/// empty packet, ran upstream and was never audited. Now the piece is refused and nothing runs.
#[tokio::test]
async fn a_statement_smuggled_behind_a_file_never_runs() {
    within(60, async {
        let mut d = direct().await;
        d.query_drop("DROP TABLE IF EXISTS door_file").await.expect("clean");
        d.query_drop("CREATE TABLE door_file (i INT)").await.expect("table");
        d.query_drop("DROP TABLE IF EXISTS door_smuggled").await.expect("clean");
        let (_transport, port) = transport_with("smuggle", "").await;
        let session = e2e::door::logged_in_session(port).await;
        // Each smuggled command is followed by an empty packet, so that the piece still ends
        // as a file's last piece must.
        let behind_the_end = [
            [packet(0, b"\x03CREATE TABLE door_smuggled (i INT)"), packet(1, b"")].concat(),
            [packet(4, b"\x03CREATE TABLE door_smuggled (i INT)"), packet(5, b"")].concat(),
            [packet(0, b"\x12\x04\x00\x00\x00\x00\x00\x01\x00\x00\x00"), packet(1, b"")].concat(),
        ];
        for smuggled in behind_the_end {
            let load = packet(0, b"\x03LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE door_file");
            let (status, answer) = post(port, &format!("/v1/sessions/{session}/command"), &[], &load).await;
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
            let mut end = packet(2, b"1\n");
            end.extend(packet(3, b""));
            let piece = [end.as_slice(), &smuggled].concat();
            let infile = format!("/v1/sessions/{session}/infile");
            let (status, answer) = post(port, &infile, &[("x-tunnel-infile", "end")], &piece).await;
            assert_eq!(status, 400, "a smuggled piece is refused: {}", String::from_utf8_lossy(&answer));
            // The file ends properly afterwards: the session is still in step.
            let (status, _) = post(port, &infile, &[("x-tunnel-infile", "end")], &end).await;
            assert_eq!(status, 200);
        }
        let created: Option<String> = d
            .query_first("SELECT table_name FROM information_schema.tables WHERE table_name = 'door_smuggled'")
            .await
            .expect("tables");
        assert_eq!(created, None, "the smuggled statement never ran");
        let rows: Option<u64> = d.query_first("SELECT COUNT(*) FROM door_file").await.expect("count");
        assert_eq!(rows, Some(3), "each proper file was loaded");
        d.query_drop("DROP TABLE door_file").await.expect("drop");
    })
    .await;
}

/// Finding 6: chunked bodies trickled one byte every 25 s, on sessions that never logged in,
/// held the whole in-flight budget. Now a body's phase is checked before it is read, a body
/// must keep a minimum rate, and each identity has a share: the others' commands go on.
#[tokio::test]
async fn trickled_bodies_hold_no_room() {
    within(90, async {
        let (_transport, port) = transport_with(
            "trickle",
            "body_timeout: 2s\nmax_request_bytes: 1048576\nmax_inflight_bytes: 4194304\nmax_inflight_bytes_per_token: 2097152\n",
        ).await;
        let legit = Legit::start(port).await;
        // Four sessions that never logged in: refused before their body is read.
        for _ in 0..4 {
            let (status, id, _) = call(port, TOKEN, "POST", "/v1/relay", "{}").await;
            assert_eq!(status, 201);
            let head = format!("POST /v1/sessions/{id}/command HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n");
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
            s.write_all(head.as_bytes()).await.expect("send");
            let head = read_head(&mut s, Duration::from_secs(5)).await.unwrap_or_default();
            assert!(head.starts_with("HTTP/1.1 400"), "refused before its body: {head}");
        }
        // Trickles on logged-in sessions: each fails once it falls under the minimum rate.
        let mut trickles = Vec::new();
        for _ in 0..4 {
            let id = e2e::door::logged_in_session(port).await;
            trickles.push(tokio::spawn(async move {
                let head = format!("POST /v1/sessions/{id}/command HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n");
                let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
                s.write_all(head.as_bytes()).await.expect("send");
                let started = Instant::now();
                for _ in 0..60 {
                    if s.write_all(b"1\r\nx\r\n").await.is_err() {
                        break;
                    }
                    if let Some(head) = read_head(&mut s, Duration::from_millis(900)).await {
                        return (head, started.elapsed());
                    }
                }
                (String::new(), started.elapsed())
            }));
        }
        for _ in 0..5 {
            legit.login_and_query().await.expect("the others' commands go on");
        }
        for t in trickles {
            let (head, took) = t.await.expect("trickle");
            assert!(head.starts_with("HTTP/1.1 408"), "a trickled body fails: {head:?}");
            assert!(took < Duration::from_secs(10), "within the minimum rate: {took:?}");
        }
    })
    .await;
}

/// Finding 7: `CREATE USER … IDENTIFIED BY`, `ALTER USER` and `SET PASSWORD` reached the audit
/// log verbatim, in a file created 0644. Now passwords are redacted and the file is 0600.
#[tokio::test]
async fn the_audit_log_holds_no_password() {
    within(60, async {
        let audit =
            std::env::temp_dir().join(format!("sqltunnel-door-audit-{}.jsonl", std::process::id()));
        drop(std::fs::remove_file(&audit));
        let (_transport, port) =
            transport_with("audit", &format!("audit:\n  path: {}\n", audit.display())).await;
        let legit = Legit::start(port).await;
        let mut c = legit.connect().await.expect("login");
        for sql in [
            "CREATE USER IF NOT EXISTS 'door_pw'@'%' IDENTIFIED BY 'Door-Secret-1'",
            "ALTER USER 'door_pw'@'%' IDENTIFIED BY 'Door-Secret-2'",
            "SET PASSWORD FOR 'door_pw'@'%' = PASSWORD('Door-Secret-3')",
            "DROP USER 'door_pw'@'%'",
        ] {
            c.query_drop(sql).await.expect(sql);
        }
        drop(c.disconnect().await);
        let start = Instant::now();
        let text = loop {
            let text = std::fs::read_to_string(&audit).unwrap_or_default();
            if text.contains("DROP USER") || start.elapsed() > Duration::from_secs(10) {
                break text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(text.contains("IDENTIFIED BY '***'"), "{text}");
        for secret in ["Door-Secret-1", "Door-Secret-2", "Door-Secret-3"] {
            assert!(!text.contains(secret), "{secret} in the audit log:\n{text}");
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&audit).expect("audit file").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the audit file is its owner's only");
        drop(std::fs::remove_file(&audit));
        let _ = DATABASE;
    })
    .await;
}

/// Finding 10: when the transport logged in for a `users` entry and the upstream greeted with,
/// or switched to, `mysql_clear_password`, the password went out in clear over plain TCP; an
/// switch to `mysql_old_password` with an empty nonce panicked, in the readiness probe too.
#[tokio::test]
async fn a_hostile_upstream_gets_no_password_and_no_panic() {
    within(60, async {
        for (greets, switches, nonce) in [
            ("mysql_clear_password", "mysql_clear_password", &b""[..]),
            ("mysql_native_password", "mysql_clear_password", &b""[..]),
            ("mysql_native_password", "mysql_old_password", &b""[..]),
        ] {
            let hostile = HostileUpstream::start(greets, switches, nonce).await;
            let extra = "    admin_user: sqltunnel_admin\n    admin_password: Admin-Secret-77\n";
            // The tests' config, its upstream the hostile one, with an admin_user for probes.
            let port = e2e::processes::free_port();
            let upstream = format!("127.0.0.1:{}\n", hostile.port);
            let yaml = e2e::transport_yaml(hostile.port)
                .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
                .replace(&upstream, &format!("{upstream}{extra}"));
            let transport = e2e::processes::Proc::start("transport", &yaml, "hostile");
            e2e::processes::wait_port(port).await;
            let legit = Legit::start(port).await;
            let outcome = legit.login_and_query().await;
            assert!(outcome.is_err(), "{greets}/{switches}: the login cannot succeed");
            drop(legit);
            // Probes go on (one per 2 s): a panic in one would have ended the loop.
            let (start, seen) = (Instant::now(), hostile.connections.load(Ordering::Relaxed));
            while hostile.connections.load(Ordering::Relaxed) < seen + 3 {
                assert!(start.elapsed() < Duration::from_secs(15), "the probes stopped");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            for secret in [&b"app-pw"[..], b"Admin-Secret-77"] {
                assert!(
                    !hostile.received_contains(secret),
                    "{greets}/{switches}: a password in clear"
                );
            }
            let (status, _) = raw_request(
                port,
                "GET /v1/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            )
            .await;
            assert_eq!(status, 200);
            assert_eq!(transport.log_count("panicked"), 0, "{greets}/{switches}");
        }
    })
    .await;
}

/// A peer that stops reading a plain HTTP answer held its connection and its session's turn
/// for ever (streams were bounded, plain answers not). Now a write waits `idle_timeout` at
/// most; the connection ends and the session is free again.
#[tokio::test]
async fn a_peer_that_stops_reading_an_answer_lets_go() {
    within(90, async {
        let (_transport, port) = transport_with("stalled-reader", "idle_timeout: 2s\n").await;
        let session = e2e::door::logged_in_session(port).await;
        let big = packet(0, b"\x03SELECT REPEAT('x', 1000) FROM seq_1_to_200000");
        let head = format!(
            "POST /v1/sessions/{session}/command HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n",
            big.len()
        );
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        s.write_all(&[head.as_bytes(), &big].concat()).await.expect("send");
        // Not a byte read for a while: the transport's writes stall.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let mut got = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(30), tokio::io::AsyncReadExt::read_to_end(&mut s, &mut got)).await;
        assert!(read.is_ok(), "the transport let the stalled connection go");
        assert!(got.len() < 200_000_000, "the answer was cut, not sent whole: {} bytes", got.len());
        // The session's turn is free again: a command on it is answered (or told the
        // upstream is gone), not refused as busy for ever.
        let (status, _) = post(port, &format!("/v1/sessions/{session}/command"), &[], &packet(0, b"\x03SELECT 1")).await;
        assert_ne!(status, 409, "the session is not held busy");
    })
    .await;
}
