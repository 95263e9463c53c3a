//! Behind nginx, with `trusted_proxies`, the transport knows each client by the address nginx
//! forwards: one client guessing tokens is slowed down, another is not, and the log names
//! each, over plain requests and at streams' upgrades (a stream's steps carry no token). Without it, everyone behind nginx is nginx's
//! address.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::wire::{AnswerHead, STREAM_PROTOCOL, StepHead, StepKind};
use e2e::nginx::{Nginx, example_config};
use e2e::processes::{Proc, free_port, wait_port};
use e2e::{TOKEN, mysql_port, within};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A request with a wrong token from source address `from` to nginx; the status and how long
/// the answer took.
async fn guess(from: &str, nginx: u16) -> (u16, Duration) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(format!("{from}:0").parse::<SocketAddr>().expect("addr")).expect("bind");
    let mut s = socket.connect(([127, 0, 0, 1], nginx).into()).await.expect("connect");
    let request = "POST /db-tunnel/v1/keepalive HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer wrong-guess\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    let started = Instant::now();
    s.write_all(request.as_bytes()).await.expect("send");
    let mut bytes = Vec::new();
    drop(s.read_to_end(&mut bytes).await);
    let text = String::from_utf8_lossy(&bytes);
    (text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), started.elapsed())
}

/// A transport (its log) with `extra` config behind nginx with the example config; nginx's port.
async fn behind_nginx(extra: &str, tag: &str) -> (Proc, Nginx, u16) {
    let port = free_port();
    let yaml = format!(
        "{}{extra}",
        e2e::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
    );
    let transport = Proc::start("transport", &yaml, tag);
    wait_port(port).await;
    let nginx_port = Nginx::port();
    let nginx = Nginx::start(&example_config(&[port], nginx_port), nginx_port).await;
    (transport, nginx, nginx_port)
}

#[tokio::test]
async fn one_client_guessing_tokens_does_not_slow_another() {
    within(90, async {
        let (transport, _nginx, port) =
            behind_nginx("trusted_proxies: [127.0.0.1]\n", "trusted").await;
        // The guesser: its first refusals are free, then each comes later than the last.
        let mut last = Duration::ZERO;
        for _ in 0..12 {
            let (status, took) = guess("127.0.0.2", port).await;
            assert_eq!(status, 401);
            last = took;
        }
        assert!(last >= Duration::from_millis(300), "the guesser is slowed down: {last:?}");
        // Another client's mistake is answered at once, not behind the guesser's queue.
        let (status, other) = guess("127.0.0.3", port).await;
        assert_eq!(status, 401);
        assert!(other < last / 2, "another client waited {other:?} (the guesser {last:?})");
        transport.log_grows("127.0.0.3", 0).await;
        let log = std::fs::read_to_string(&transport.log).unwrap_or_default();
        assert!(log.contains("127.0.0.2"), "the log names the guesser: {log}");
    })
    .await;
}

#[tokio::test]
async fn without_trusted_proxies_everyone_is_nginx() {
    within(90, async {
        let (transport, _nginx, port) = behind_nginx("", "untrusted").await;
        // A client's own forwarding header is not believed either.
        for _ in 0..12 {
            assert_eq!(guess("127.0.0.2", port).await.0, 401);
        }
        let (_, other) = guess("127.0.0.3", port).await;
        assert!(other >= Duration::from_millis(300), "the same address as the guesser: {other:?}");
        let log = std::fs::read_to_string(&transport.log).unwrap_or_default();
        assert!(!log.contains("127.0.0.2") && !log.contains("127.0.0.3"), "{log}");
        assert!(log.contains("peer=127.0.0.1"), "the log names nginx: {log}");
    })
    .await;
}

/// An upgrade to a stream through nginx from source address `from` with `token`: the stream
/// when it opened, else the status; and how long the answer took.
async fn upgrade_from(
    from: &str,
    nginx: u16,
    token: &str,
) -> (Result<WebSocketStream<tokio::net::TcpStream>, u16>, Duration) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(format!("{from}:0").parse::<SocketAddr>().expect("addr")).expect("bind");
    let tcp = socket.connect(([127, 0, 0, 1], nginx).into()).await.expect("connect");
    let url = format!("ws://127.0.0.1:{nginx}/db-tunnel/v1/stream");
    let mut request = url.into_client_request().expect("request");
    let headers = request.headers_mut();
    headers.insert("authorization", format!("Bearer {token}").parse().expect("header"));
    headers.insert("sec-websocket-protocol", STREAM_PROTOCOL.parse().expect("header"));
    let started = Instant::now();
    let upgraded = match tokio_tungstenite::client_async(request, tcp).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(e) => panic!("the upgrade failed: {e}"),
    };
    (upgraded, started.elapsed())
}

/// A keep-alive step on `ws` (no token: the stream's upgrade had it); its status.
async fn keep_alive_on(ws: &mut WebSocketStream<tokio::net::TcpStream>) -> u16 {
    let mut message = Vec::new();
    StepHead::new(StepKind::KeepAlive).encode(&mut message);
    message.extend_from_slice(br#"{"sessions":[],"wait_ms":0}"#);
    ws.send(Message::Binary(message.into())).await.expect("send");
    let first = match ws.next().await {
        Some(Ok(Message::Binary(first))) => first,
        other => panic!("no answer: {other:?}"),
    };
    let (answer, _) = AnswerHead::decode(&first).expect("an answer head");
    let mut more = answer.more;
    while more {
        more = matches!(ws.next().await, Some(Ok(Message::Binary(piece))) if !piece.is_empty());
    }
    answer.status
}

/// A stream's steps carry no token (they run as its upgrade's caller), so tokens are guessed
/// on upgrades only, and those are known by the client nginx forwards.
#[tokio::test]
async fn a_stream_is_guessed_at_its_upgrade_and_known_by_its_client() {
    within(90, async {
        let (transport, _nginx, port) =
            behind_nginx("trusted_proxies: [127.0.0.1]\n", "trusted-stream").await;
        let mut last = Duration::ZERO;
        for _ in 0..12 {
            let (refused, took) = upgrade_from("127.0.0.2", port, "wrong-guess").await;
            assert_eq!(refused.err(), Some(401));
            last = took;
        }
        assert!(last >= Duration::from_millis(300), "the guesser is slowed down: {last:?}");
        let (refused, took) = upgrade_from("127.0.0.3", port, "wrong-guess").await;
        assert_eq!(refused.err(), Some(401));
        assert!(took < last / 2, "another client's upgrade waited {took:?} (the guesser {last:?})");
        let (opened, _) = upgrade_from("127.0.0.3", port, TOKEN).await;
        let mut ws = opened.expect("the right token's stream");
        for _ in 0..3 {
            assert_eq!(keep_alive_on(&mut ws).await, 200, "a step runs as the stream's caller");
        }
        let log = std::fs::read_to_string(&transport.log).unwrap_or_default();
        assert!(log.contains("127.0.0.2"), "the log names the guesser: {log}");
    })
    .await;
}
