//! The session stream (WebSocket): sessions ride streams where the path passes the upgrade
//! and answer as directly; `stream: off` keeps to requests; a client that connects in a loop
//! opens no new connection to the transport once warm; and whatever arrives on a stream
//! (garbage, an older version's message, a contradicting step, another token's session, an
//! oversized message) is refused clearly while the other sessions carry on. Each sidecar thread's streams share a lane.

use std::time::Duration;

use common::wire::{AnswerHead, STREAM_PROTOCOL, StepHead, StepKind};
use e2e::http::metric;
use e2e::scripts::{DML_SCRIPT, ERROR_SCRIPT, TYPES_SCRIPT};
use e2e::{
    TOKEN, Tunnel, assert_same_answers, compare_script, direct, mysql_port, opts, sidecar_yaml,
    transport_yaml, within,
};
use futures_util::{SinkExt, StreamExt};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const STREAMS_OPENED: &str = "sqltunnel_streams_opened_total";
const CONNECTIONS: &str = "sqltunnel_http_connections_accepted_total";

/// A tunnel whose sidecar has `stream: mode`.
async fn tunnel_with_stream(mode: &str) -> Tunnel {
    let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let sidecar = sidecar_yaml(&url, TOKEN)
        .replace("  connect_timeout: 2s\n", &format!("  connect_timeout: 2s\n  stream: {mode}\n"));
    Tunnel::start_with(listener, &transport_yaml(mysql_port()), &sidecar).await
}

#[tokio::test]
async fn sessions_ride_streams_and_answer_as_directly_and_off_keeps_to_requests() {
    within(120, async {
        for (mode, streams) in [("auto", true), ("off", false)] {
            let tunnel = tunnel_with_stream(mode).await;
            for script in [TYPES_SCRIPT, DML_SCRIPT, ERROR_SCRIPT] {
                let (mut d, mut t) = (direct().await, tunnel.connect().await);
                let (a, b) = compare_script(&mut d, &mut t, script).await;
                assert_same_answers(script, &a, &b);
            }
            // A statement over a stream message's 1 MiB goes as a plain request, and works.
            let mut t = tunnel.connect().await;
            let big = format!("SELECT LENGTH('{}')", "x".repeat(3_000_000));
            let length: Option<u64> = t.query_first(big).await.expect("a 3 MB statement");
            assert_eq!(length, Some(3_000_000));
            let one: Option<u8> = t.query_first("SELECT 1").await.expect("and then a small one");
            assert_eq!(one, Some(1));
            let opened = metric(tunnel.transport.port(), Some(TOKEN), STREAMS_OPENED).await;
            assert_eq!(opened > 0, streams, "stream: {mode}, {opened} streams opened");
        }
    })
    .await;
}

#[tokio::test]
async fn a_client_connecting_in_a_loop_opens_no_new_connection_once_warm() {
    within(120, async {
        let tunnel = tunnel_with_stream("auto").await;
        let port = tunnel.transport.port();
        let cycle = || async {
            let mut conn = Conn::new(opts(tunnel.sidecar.port(), None)).await.expect("login");
            let one: Option<u8> = conn.query_first("SELECT 1").await.expect("query");
            assert_eq!(one, Some(1));
            conn.disconnect().await.expect("quit");
        };
        // Warm after a few: a new session takes a stream idle on its thread, whatever its
        // affinity bucket, and is served where its greeting's stream is (it needed 40, one
        // stream per bucket, when sessions kept to their own).
        for _ in 0..10 {
            cycle().await;
        }
        settled(port).await;
        let before = metric(port, Some(TOKEN), CONNECTIONS).await;
        for _ in 0..30 {
            cycle().await;
        }
        let metrics_requests = settled(port).await + 1;
        // Each metrics request is a connection of its own.
        let new = metric(port, Some(TOKEN), CONNECTIONS).await - before - metrics_requests;
        assert_eq!(new, 0, "30 connect-query-quit cycles opened {new} connections");
    })
    .await;
}

#[tokio::test]
async fn each_sidecar_thread_streams_in_its_own_lane_and_answers_as_directly() {
    within(120, async {
        let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let sidecar = sidecar_yaml(&url, TOKEN) + "worker_threads: 2\n";
        let transport = transport_yaml(mysql_port()) + "worker_threads: 2\n";
        let tunnel = Tunnel::start_with(listener, &transport, &sidecar).await;
        // Four clients at once: the sidecar serves two on each of its threads.
        let mut clients = Vec::new();
        for _ in 0..4 {
            clients.push(tunnel.connect().await);
        }
        // Read-only statements: the other tests of this file change the shared tables.
        const READS: &[&str] = &[
            "SELECT seq, seq * seq, CONCAT('row ', seq), NULL FROM seq_1_to_2000",
            "SELECT CAST(1.5 AS DECIMAL(10,3)), 'ü', x'00ff', DATE '2026-11-25', 3.25e2",
            "SELECT * FROM no_such_table",
        ];
        for t in &mut clients {
            let mut d = direct().await;
            let (a, b) = compare_script(&mut d, t, READS).await;
            assert_same_answers(READS, &a, &b);
        }
        let port = tunnel.transport.port();
        let lanes = metric(port, Some(TOKEN), "sqltunnel_stream_lanes").await;
        assert_eq!(lanes, 2, "two sidecar threads, {lanes} lanes");
        assert!(metric(port, Some(TOKEN), "sqltunnel_streams_open").await >= 4);
    })
    .await;
}

/// Waits until the transport holds only the session the sidecar prepared ahead (the last
/// client's quit has arrived); answers how many metrics requests (connections) that took.
async fn settled(port: u16) -> u64 {
    let start = std::time::Instant::now();
    let mut asked = 1;
    while metric(port, Some(TOKEN), "sqltunnel_sessions_open").await > 1 {
        assert!(start.elapsed() < Duration::from_secs(10), "sessions stay open");
        tokio::time::sleep(Duration::from_millis(20)).await;
        asked += 1;
    }
    asked
}

/// A stream opened by hand with `token`.
async fn raw_stream(port: u16, token: &str) -> WebSocketStream<tokio::net::TcpStream> {
    let mut request =
        format!("ws://127.0.0.1:{port}/v1/stream").into_client_request().expect("request");
    let headers = request.headers_mut();
    headers.insert("authorization", format!("Bearer {token}").parse().expect("header"));
    headers.insert("sec-websocket-protocol", STREAM_PROTOCOL.parse().expect("header"));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    let (ws, response) = tokio_tungstenite::client_async(request, tcp).await.expect("upgrade");
    assert_eq!(response.status(), 101);
    ws
}

/// Sends `message` and reads the answer: its head (written out as HTTP/1.1 text) and its body.
async fn ask(
    ws: &mut WebSocketStream<tokio::net::TcpStream>,
    message: Vec<u8>,
) -> (String, String) {
    ws.send(Message::Binary(message.into())).await.expect("send");
    let first = match ws.next().await {
        Some(Ok(Message::Binary(first))) => first,
        other => panic!("no answer head: {other:?}"),
    };
    let (answer, at) = AnswerHead::decode(&first).expect("an answer head");
    let mut head = format!("HTTP/1.1 {}\r\n", answer.status);
    for (name, value) in answer.to_http() {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let mut body = first[at..].to_vec();
    if !answer.more {
        return (head, String::from_utf8_lossy(&body).into_owned());
    }
    loop {
        match ws.next().await {
            Some(Ok(Message::Binary(piece))) if piece.is_empty() => break,
            Some(Ok(Message::Binary(piece))) => body.extend_from_slice(&piece),
            other => panic!("the body broke off: {other:?}"),
        }
    }
    (head, String::from_utf8_lossy(&body).into_owned())
}

/// A step message of `kind` in `session`, as the sidecar makes them.
fn step(kind: StepKind, session: Option<&str>, body: &str) -> Vec<u8> {
    let mut head = StepHead::new(kind);
    head.session = session.map(str::to_owned);
    let mut message = Vec::new();
    head.encode(&mut message);
    message.extend_from_slice(body.as_bytes());
    message
}

#[tokio::test]
async fn bad_input_on_a_stream_is_refused_and_other_sessions_carry_on() {
    within(60, async {
        let yaml = transport_yaml(mysql_port())
            .replace("tokens: [", "tokens: [other-T0ken-8Ru5Ei2Oy7Tw4Qa1, ")
            + "max_request_bytes: 1048576\n";
        let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let tunnel = Tunnel::start_with(listener, &yaml, &sidecar_yaml(&url, TOKEN)).await;
        let port = tunnel.transport.port();
        let mut busy = tunnel.connect().await;
        // Without a token, no stream.
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let bare = format!("ws://127.0.0.1:{port}/v1/stream").into_client_request().expect("req");
        let refused = tokio_tungstenite::client_async(bare, tcp).await.expect_err("refused");
        assert!(refused.to_string().contains("401"), "{refused}");

        let mut ws = raw_stream(port, TOKEN).await;
        // Garbage, a version 2 message (an HTTP head), a step that contradicts itself, one
        // of a session never opened: each answered.
        let (status, _) = ask(&mut ws, b"\x00\x01 not a step".to_vec()).await;
        assert!(status.starts_with("HTTP/1.1 400"), "{status}");
        let old = b"\0\x0c\x04POST\0\x05/v1/x\0".to_vec();
        let (status, body) = ask(&mut ws, old).await;
        assert!(status.starts_with("HTTP/1.1 400") && body.contains("not a step"), "{body}");
        let (status, _) = ask(&mut ws, step(StepKind::Command, None, "")).await;
        assert!(status.starts_with("HTTP/1.1 400"), "{status}");
        let (status, _) = ask(&mut ws, step(StepKind::Command, Some("nosuchsession"), "")).await;
        assert!(status.starts_with("HTTP/1.1 404"), "{status}");
        // A session opened on the stream answers only its own token's streams.
        let (head, body) = ask(&mut ws, step(StepKind::Open, None, "{}")).await;
        assert!(head.starts_with("HTTP/1.1 201"), "{head} {body}");
        let session = head
            .lines()
            .find_map(|l| l.strip_prefix("x-tunnel-session: "))
            .expect("the session's id")
            .to_owned();
        let mut other = raw_stream(port, "other-T0ken-8Ru5Ei2Oy7Tw4Qa1").await;
        let ping = "\x01\x00\x00\x00\x0e";
        let (status, _) = ask(&mut other, step(StepKind::Command, Some(&session), ping)).await;
        assert!(status.starts_with("HTTP/1.1 404"), "{status}");
        let close = StepKind::Close(common::wire::SessionEnd::Quit);
        let (status, _) = ask(&mut ws, step(close, Some(&session), "")).await;
        assert!(status.starts_with("HTTP/1.1 204"), "{status}");
        // Still answering after all that.
        let keep_alive = step(StepKind::KeepAlive, None, r#"{"sessions":[],"wait_ms":0}"#);
        let (status, body) = ask(&mut ws, keep_alive).await;
        assert!(status.starts_with("HTTP/1.1 200") && body.contains("gone"), "{status} {body}");
        // A text message, or one over max_request_bytes and a head, closes the stream.
        ws.send(Message::Text("hello".into())).await.expect("send");
        assert!(matches!(ws.next().await, None | Some(Ok(Message::Close(_))) | Some(Err(_))));
        let mut big = raw_stream(port, TOKEN).await;
        drop(big.send(Message::Binary(vec![b'x'; 2 << 20].into())).await);
        assert!(matches!(big.next().await, None | Some(Ok(Message::Close(_))) | Some(Err(_))));
        // The session that ran meanwhile never noticed.
        let one: Option<u8> = busy.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
    })
    .await;
}
