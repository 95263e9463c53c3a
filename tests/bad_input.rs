//! Bad input of every kind gets a clear error, never a hang or a crash, and other sessions
//! carry on: wrong passwords, unknown users, a dead or misconfigured transport, a proxy's HTML
//! error page, garbage instead of a handshake, malformed HTTP to the transport.

use std::time::Duration;

use e2e::processes::free_port;
use e2e::{DATABASE, PASSWORD, TOKEN, Tunnel, USER, mysql_port, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Logs in through `port` and returns the server error (code, message).
async fn login_error(port: u16, user: &str, password: &str) -> (u16, String) {
    let opts = opts(port, Some(DATABASE)).user(Some(user)).pass(Some(password));
    match Conn::new(opts).await {
        Ok(_) => panic!("login as {user} should fail"),
        Err(mysql_async::Error::Server(e)) => (e.code, e.message),
        Err(other) => panic!("expected a MySQL error, got {other}"),
    }
}

async fn assert_still_serving(tunnel: &Tunnel) {
    let mut conn = tunnel.connect().await;
    let one: u8 = conn.query_first("SELECT 1").await.expect("query").unwrap_or(0);
    assert_eq!(one, 1);
}

#[tokio::test]
async fn wrong_password_and_unknown_user_get_1045() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let mut busy = tunnel.connect().await;
        let port = tunnel.sidecar.port();
        let (code, msg) = login_error(port, USER, "wrong").await;
        assert_eq!(code, 1045);
        assert!(msg.starts_with("Access denied for user 'app'@"), "{msg}");
        let (code, _) = login_error(port, "nobody", PASSWORD).await;
        assert_eq!(code, 1045);
        let (code, msg) = login_error(port, USER, "").await;
        assert_eq!(code, 1045);
        assert!(msg.contains("using password: NO"), "{msg}");
        let still: u8 = busy.query_first("SELECT 2").await.expect("other session").unwrap_or(0);
        assert_eq!(still, 2);
    })
    .await;
}

#[tokio::test]
async fn upstream_refusal_is_relayed_unchanged() {
    within(60, async {
        let tunnel = Tunnel::start_custom(&e2e::transport_yaml(mysql_port()), |url| {
            sidecar_yaml(url, TOKEN).replace(
                "    upstream: main\n",
                "    upstream: main\n    upstream_password: not-the-password\n",
            )
        })
        .await;
        let (code, msg) = login_error(tunnel.sidecar.port(), USER, PASSWORD).await;
        let direct = login_error(mysql_port(), USER, "not-the-password").await;
        assert_eq!(code, 1045);
        assert_eq!(msg.split('@').next(), direct.1.split('@').next(), "upstream's own message");
    })
    .await;
}

#[tokio::test]
async fn transport_down_names_the_url() {
    within(60, async {
        let shutdown = CancellationToken::new();
        let url = format!("http://127.0.0.1:{}/db-tunnel/", free_port());
        let sidecar = Tunnel::start_sidecar(&sidecar_yaml(&url, TOKEN), shutdown.clone()).await;
        let (code, msg) = login_error(sidecar.port(), USER, PASSWORD).await;
        assert_eq!(code, 1429);
        assert!(msg.contains(&url), "{msg}");
        assert!(msg.contains("cannot reach the sqltunnel transport"), "{msg}");
        // Without a transport there is no upstream greeting: the client gets the error in its
        // place, as from a server refusing connections, and the mariadb CLI shows its text.
        let cli =
            e2e::cli::mariadb_async(sidecar.port(), USER, PASSWORD, &["-e", "SELECT 1"]).await;
        assert!(cli.stderr.contains("1429") && cli.stderr.contains(&url), "{}", cli.stderr);
        shutdown.cancel();
    })
    .await;
}

#[tokio::test]
async fn bad_token_is_reported_as_such() {
    within(60, async {
        let tunnel = Tunnel::start_custom(&e2e::transport_yaml(mysql_port()), |url| {
            sidecar_yaml(url, "wrong-token-9")
        })
        .await;
        let (code, msg) = login_error(tunnel.sidecar.port(), USER, PASSWORD).await;
        assert_eq!(code, 1429);
        assert!(msg.contains("refused the sidecar's token"), "{msg}");
    })
    .await;
}

/// A fake proxy that answers every request with nginx's 502 HTML page.
async fn fake_502_proxy() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/db-tunnel/", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                drop(s.read(&mut buf).await);
                let body = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>";
                let resp = format!(
                    "HTTP/1.1 502 Bad Gateway\r\nServer: nginx\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                drop(s.write_all(resp.as_bytes()).await);
            });
        }
    });
    url
}

#[tokio::test]
async fn proxy_html_error_page_becomes_a_clear_error() {
    within(60, async {
        let shutdown = CancellationToken::new();
        let url = fake_502_proxy().await;
        let sidecar = Tunnel::start_sidecar(&sidecar_yaml(&url, TOKEN), shutdown.clone()).await;
        let (code, msg) = login_error(sidecar.port(), USER, PASSWORD).await;
        assert_eq!(code, 1429);
        assert!(msg.contains("HTTP 502 Bad Gateway"), "{msg}");
        assert!(msg.contains("not a sqltunnel answer"), "{msg}");
        shutdown.cancel();
    })
    .await;
}

#[tokio::test]
async fn garbage_instead_of_a_handshake_closes_only_that_connection() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        for garbage in [
            &b"\x05\x00\x00\x01hello"[..],
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            &[0xff; 64],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        ] {
            let mut s = TcpStream::connect(tunnel.sidecar).await.expect("connect");
            let mut greeting = [0u8; 512];
            let n = s.read(&mut greeting).await.expect("greeting");
            assert!(n > 4 && greeting[4] == 10, "a HandshakeV10 greeting first");
            s.write_all(garbage).await.expect("send garbage");
            let mut rest = Vec::new();
            let read =
                tokio::time::timeout(Duration::from_secs(15), s.read_to_end(&mut rest)).await;
            assert!(read.is_ok(), "the sidecar closes the connection instead of hanging");
        }
        assert_still_serving(&tunnel).await;
    })
    .await;
}

#[tokio::test]
async fn oversized_packet_gets_1153_and_the_server_carries_on() {
    within(60, async {
        let tunnel = Tunnel::start_custom(&e2e::transport_yaml(mysql_port()), |url| {
            format!("{}max_packet: 4096\n", sidecar_yaml(url, TOKEN))
        })
        .await;
        let mut conn = tunnel.connect().await;
        let big = format!("SELECT '{}'", "x".repeat(10_000));
        match conn.query_drop(big).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1153),
            other => panic!("expected 1153, got {other:?}"),
        }
        assert_still_serving(&tunnel).await;
    })
    .await;
}

/// Sends a raw HTTP request to the transport and returns (status, body).
async fn raw_http(addr: std::net::SocketAddr, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect transport");
    s.write_all(request.as_bytes()).await.expect("send");
    let mut out = Vec::new();
    drop(tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

/// Sends a raw request; returns the status and the session id the answer names.
async fn raw_http_session(addr: std::net::SocketAddr, request: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("send");
    let mut out = Vec::new();
    drop(tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("x-tunnel-session: "))
        .unwrap_or_default()
        .trim()
        .to_owned();
    (status, id)
}

/// A relayed session opened and logged in by hand (the transport logs in itself, as for a
/// `users` entry the sidecar has checked); its id.
async fn logged_in_session(tunnel: &Tunnel) -> String {
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let open = format!(
        "POST /v1/relay HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    let (status, id) = raw_http_session(tunnel.transport, &open).await;
    assert_eq!(status, 201);
    let login = format!(
        r#"{{"user":"{USER}","password":"{PASSWORD}","client_flags":{},"collation":45}}"#,
        0x0000_0200 | 0x0000_8000 | 0x0008_0000
    );
    let request = format!(
        "POST /v1/sessions/{id}/login HTTP/1.1\r\nHost: t\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{login}",
        login.len()
    );
    assert_eq!(raw_http(tunnel.transport, &request).await.0, 200, "logged in");
    id
}

#[tokio::test]
async fn transport_answers_bad_requests_with_machine_readable_4xx() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let auth = format!("Authorization: Bearer {TOKEN}\r\n");
        let elsewhere = r#"{"upstream":"elsewhere"}"#;
        let cases = [
            (format!("POST /v1/relay HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: 9\r\nConnection: close\r\n\r\nnot json!"), 400, "bad_request"),
            (format!("POST /v1/sessions/0123456789abcdef0123456789abcdef/command HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: 9\r\nConnection: close\r\n\r\n\x03SELECT 1"), 404, "session_not_found"),
            ("POST /v1/relay HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".to_owned(), 401, "unauthorized"),
            (format!("POST /v1/relay HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"), 401, "unauthorized"),
            (format!("GET /v1/nothing-here HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n"), 404, "not_found"),
            (format!("POST /v1/relay HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{elsewhere}", elsewhere.len()), 403, "unknown_upstream"),
        ];
        for (request, status, kind) in cases {
            let (got, body) = raw_http(tunnel.transport, &request).await;
            assert_eq!(got, status, "{request:?} -> {body}");
            let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
            assert_eq!(json["error"], kind, "{body}");
        }
        let (got, _) = raw_http(tunnel.transport, "\x00\x01garbage that is not HTTP\r\n\r\n").await;
        assert!(got == 400 || got == 0, "garbage gets 400 or a closed connection, got {got}");
        let (got, body) = raw_http(tunnel.transport, "GET /db-tunnel/v1/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await;
        assert_eq!((got, body.as_str()), (200, r#"{"status":"ok"}"#));
        assert_still_serving(&tunnel).await;
    })
    .await;
}

#[tokio::test]
async fn stray_infile_uploads_are_refused_and_the_session_goes_on() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let auth = format!("Authorization: Bearer {TOKEN}\r\n");
        let id = logged_in_session(&tunnel).await;
        let upload = |header: &str| {
            format!(
                "POST /v1/sessions/{id}/infile HTTP/1.1\r\nHost: t\r\n{auth}{header}Content-Length: 4\r\nConnection: close\r\n\r\n1,a\n"
            )
        };
        for header in ["", "X-Tunnel-Infile: sideways\r\n", "X-Tunnel-Infile: end\r\n"] {
            let (status, body) = raw_http(tunnel.transport, &upload(header)).await;
            assert_eq!(status, 400, "{header:?}: {body}");
            let json: serde_json::Value = serde_json::from_str(&body).expect("json");
            assert_eq!(json["error"], "bad_request", "{body}");
        }
        let command = format!(
            "POST /v1/sessions/{id}/command HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: 13\r\nConnection: close\r\n\r\n\x09\x00\x00\x00\x03SELECT 1"
        );
        let (status, _) = raw_http(tunnel.transport, &command).await;
        assert_eq!(status, 200, "the session still runs commands");
        assert_still_serving(&tunnel).await;
    })
    .await;
}

#[tokio::test]
async fn bad_compressed_commands_are_refused_and_the_session_goes_on() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let auth = format!("Authorization: Bearer {TOKEN}\r\n");
        let id = logged_in_session(&tunnel).await;
        let select = b"\x09\x00\x00\x00\x03SELECT 1";
        let packed = common::wire::compress_whole(select).expect("compress");
        let command = |headers: &str, body: &[u8]| {
            let mut request = format!(
                "POST /v1/sessions/{id}/command HTTP/1.1\r\nHost: t\r\n{auth}{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            request.extend_from_slice(body);
            request
        };
        let cases: [(Vec<u8>, u16, &str); 5] = [
            (command("Content-Encoding: gzip\r\n", select), 400, "bad_request"),
            (command("Content-Encoding: zstd\r\n", &packed), 400, "bad_request"),
            (command("Content-Encoding: zstd\r\nX-Tunnel-Decoded-Length: 13\r\n", b"not zstd at all"), 400, "bad_request"),
            (command("Content-Encoding: zstd\r\nX-Tunnel-Decoded-Length: 12\r\n", &packed), 400, "bad_request"),
            (command("Content-Encoding: zstd\r\nX-Tunnel-Decoded-Length: 999999999999\r\n", &packed), 413, "too_large"),
        ];
        for (request, status, kind) in cases {
            let mut s = TcpStream::connect(tunnel.transport).await.expect("connect");
            s.write_all(&request).await.expect("send");
            let mut out = Vec::new();
            drop(tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await);
            let text = String::from_utf8_lossy(&out);
            assert!(text.starts_with(&format!("HTTP/1.1 {status}")), "{text}");
            assert!(text.contains(&format!("\"error\":\"{kind}\"")), "{text}");
        }
        // A well-formed compressed command runs, on the same session.
        let good = command("Content-Encoding: zstd\r\nX-Tunnel-Decoded-Length: 13\r\n", &packed);
        let mut s = TcpStream::connect(tunnel.transport).await.expect("connect");
        s.write_all(&good).await.expect("send");
        let mut out = Vec::new();
        drop(tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await);
        assert!(out.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&out));
        assert!(out.windows(2).any(|w| w == b"\x011"), "the row of SELECT 1 (its text value)");
        assert_still_serving(&tunnel).await;
    })
    .await;
}

#[tokio::test]
async fn a_client_forcing_zstd_compression_it_was_not_offered_gets_an_error_not_a_hang() {
    within(30, async {
        use e2e::raw::{CAPS, RawClient};
        let tunnel = Tunnel::start().await;
        // CLIENT_ZSTD_COMPRESSION_ALGORITHM (1 << 26): the tunnel's greeting never offers it
        // (CLIENT_COMPRESS it offers when the server does, and MariaDB always does).
        for forced in [1 << 26] {
            let (mut c, _, _) = RawClient::greet(tunnel.sidecar.port()).await;
            c.write(&RawClient::hello(CAPS | forced, USER, b"", DATABASE, "mysql_native_password"))
                .await;
            let answer = tokio::time::timeout(Duration::from_secs(5), c.read())
                .await
                .expect("an answer within the handshake timeout, not a hang");
            assert_eq!(answer[0], 0xff, "an ERR packet: {answer:?}");
            let text = String::from_utf8_lossy(&answer);
            assert!(text.contains("compression"), "{text}");
            assert!(c.closed_by_server().await, "then the connection is closed");
        }
        assert_still_serving(&tunnel).await;
    })
    .await;
}
