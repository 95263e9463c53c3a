//! The stream's wire version, both ways: an older sidecar (offering `sqltunnel.v2`) is
//! refused with `426` and told which version the transport speaks, and goes on with plain
//! requests; a sidecar meeting an older transport (one that refuses `sqltunnel.v3` as version
//! 2 did) sends plain requests, answers as directly, and says why once, or fails clearly under
//! `stream: on`. And a stream holds its token: a reload that takes the token away ends the
//! stream with `401` at its next step, while a stream of a token kept goes on.

use std::time::Duration;

use common::wire::{
    AnswerHead, ApiError, ApiErrorKind, STREAM_PROTOCOL, STREAM_VERSIONS_HEADER, StepHead, StepKind,
};
use e2e::http::metric;
use e2e::processes::{Proc, free_port, wait_port};
use e2e::{TOKEN, mysql_port, opts, sidecar_yaml, within};
use futures_util::{SinkExt, StreamExt};
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// An upgrade to a stream offering `protocol`, by hand: the status, head and body of the
/// answer.
async fn upgrade_offering(port: u16, protocol: &str) -> (u16, String, String) {
    let head = format!(
        "GET /v1/stream HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n"
    );
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    tcp.write_all(head.as_bytes()).await.expect("write");
    // Read until the close (a refusal), or a pause (a `101` keeps the connection).
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(Ok(n @ 1..)) =
        tokio::time::timeout(Duration::from_millis(500), tcp.read(&mut chunk)).await
    {
        bytes.extend_from_slice(&chunk[..n]);
    }
    let answer = String::from_utf8_lossy(&bytes);
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_default();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test]
async fn an_older_sidecar_is_told_which_version_the_transport_speaks() {
    within(60, async {
        let (transport, port) =
            transport_on(&e2e::transport_yaml(mysql_port()), "v2-sidecar").await;
        let (status, head, body) = upgrade_offering(port, "sqltunnel.v2").await;
        assert_eq!(status, 426, "{body}");
        let said: ApiError = serde_json::from_str(&body).expect("a transport's error");
        assert!(said.message.contains("sqltunnel.v3"), "{}", said.message);
        let versions = format!("\r\n{STREAM_VERSIONS_HEADER}: {STREAM_PROTOCOL}\r\n");
        assert!(format!("{head}\r\n").contains(&versions), "{head}");
        let offered = format!("sqltunnel.v2, {STREAM_PROTOCOL}");
        let (status, head, _) = upgrade_offering(port, &offered).await;
        assert_eq!(status, 101, "this version among others is taken");
        assert!(!head.contains(STREAM_VERSIONS_HEADER), "{head}");
        let (status, head, _) = upgrade_offering(port, "").await;
        assert_eq!(status, 426, "no version offered");
        assert!(head.contains(STREAM_VERSIONS_HEADER), "{head}");
        drop(transport);
    })
    .await;
}

/// A transport on a free port, started from `yaml`.
async fn transport_on(yaml: &str, tag: &str) -> (Proc, u16) {
    let port = free_port();
    let yaml = yaml.replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    let transport = Proc::start("transport", &yaml, tag);
    wait_port(port).await;
    (transport, port)
}

/// A front that answers every upgrade to a stream as a transport of another version, `426`
/// with `headers` and the error `message`, and passes every other connection to `transport`.
async fn other_transport_front(
    transport: u16,
    headers: &'static str,
    message: &'static str,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
                    match client.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                if head.starts_with(b"GET ")
                    && String::from_utf8_lossy(&head).contains("/v1/stream")
                {
                    let refusal = ApiError {
                        error: ApiErrorKind::BadRequest,
                        message: message.into(),
                        mysql: None,
                    };
                    let body = serde_json::to_string(&refusal).expect("json");
                    let answer = format!(
                        "HTTP/1.1 426 Upgrade Required\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{headers}connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    drop(client.write_all(answer.as_bytes()).await);
                    return;
                }
                let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", transport)).await else {
                    return;
                };
                if upstream.write_all(&head).await.is_ok() {
                    drop(tokio::io::copy_bidirectional(&mut client, &mut upstream).await);
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn a_sidecar_meeting_a_transport_of_another_version_sends_requests_and_says_why() {
    within(120, async {
        let (transport, transport_port) =
            transport_on(&e2e::transport_yaml(mysql_port()), "other-version").await;
        // A transport of version 2 said it in words; later ones name their versions in a
        // header, whatever their words.
        let v2 = ("", "the subprotocol must be sqltunnel.v2");
        let v4 = ("x-tunnel-stream-versions: sqltunnel.v4\r\n", "upgrade required");
        let fronts = [(v2, "sqltunnel.v2"), (v4, "sqltunnel.v4")];
        for (((headers, message), named), (mode, works)) in fronts
            .into_iter()
            .flat_map(|front| [(front, ("auto", true)), (front, ("on", false))])
        {
            let front = other_transport_front(transport_port, headers, message).await;
            let url = format!("http://127.0.0.1:{front}/");
            let port = free_port();
            let yaml = sidecar_yaml(&url, TOKEN)
                .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
                .replace(
                    "  connect_timeout: 2s\n",
                    &format!("  connect_timeout: 2s\n  stream: {mode}\n"),
                );
            let sidecar = Proc::start("sidecar", &yaml, &format!("{named}-transport-{mode}"));
            wait_port(port).await;
            let connected = mysql_async::Conn::new(opts(port, Some(e2e::DATABASE))).await;
            if !works {
                let e = connected.expect_err("stream: on cannot stream");
                let said = e.to_string();
                assert!(said.contains("another stream version") && said.contains(named), "{said}");
                continue;
            }
            let mut conn = connected.expect("a session over requests");
            let mut direct = e2e::direct().await;
            for sql in ["SELECT 1, 'a'", "SELECT @@version_comment", "SHOW DATABASES"] {
                let through: Vec<mysql_async::Row> = conn.query(sql).await.expect("tunnel");
                let directly: Vec<mysql_async::Row> = direct.query(sql).await.expect("direct");
                let values = |rows: &[mysql_async::Row]| -> Vec<Vec<mysql_async::Value>> {
                    rows.iter().map(|r| r.clone().unwrap()).collect()
                };
                assert_eq!(values(&through), values(&directly), "{sql}");
            }
            conn.disconnect().await.expect("quit");
            let said = sidecar.log_count("speaks another stream version");
            assert_eq!(said, 1, "said once, with the transport's words");
            let log = std::fs::read_to_string(&sidecar.log).unwrap_or_default();
            assert!(log.contains(message) && log.contains(named), "{log}");
        }
        let exposition = e2e::http::raw_request(
            transport_port,
            &format!("GET /metrics HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"),
        )
        .await
        .1;
        assert!(exposition.contains("sqltunnel_streams_opened_total"), "{exposition}");
        let opened = metric(transport_port, Some(TOKEN), "sqltunnel_streams_opened_total").await;
        assert_eq!(opened, 0, "no stream was opened");
        drop(transport);
    })
    .await;
}

/// A step on `ws`: a keep-alive; the answer's status.
async fn keep_alive_on(ws: &mut WebSocketStream<TcpStream>) -> Option<u16> {
    let mut message = Vec::new();
    StepHead::new(StepKind::KeepAlive).encode(&mut message);
    message.extend_from_slice(br#"{"sessions":[],"wait_ms":0}"#);
    ws.send(Message::Binary(message.into())).await.ok()?;
    let Some(Ok(Message::Binary(first))) = ws.next().await else { return None };
    let (answer, _) = AnswerHead::decode(&first).expect("an answer head");
    let mut more = answer.more;
    while more {
        more = matches!(ws.next().await, Some(Ok(Message::Binary(piece))) if !piece.is_empty());
    }
    Some(answer.status)
}

#[tokio::test]
async fn a_stream_whose_token_a_reload_takes_away_ends_at_its_next_step() {
    within(60, async {
        const KEPT: &str = "kept-T0ken-4Wd8Qs1Lx6Vb3Nm9";
        let base = e2e::transport_yaml(mysql_port());
        let both = base.replace("tokens: [", &format!("tokens: [{KEPT}, "));
        assert_ne!(both, base, "the harness's config lists its tokens");
        let (transport, port) = transport_on(&both, "held-token").await;
        let open = async |token: &str| {
            let url = format!("ws://127.0.0.1:{port}/v1/stream");
            let mut request = url.into_client_request().expect("request");
            let headers = request.headers_mut();
            headers.insert("authorization", format!("Bearer {token}").parse().expect("header"));
            headers.insert("sec-websocket-protocol", STREAM_PROTOCOL.parse().expect("header"));
            let tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
            tokio_tungstenite::client_async(request, tcp).await.expect("upgrade").0
        };
        let (mut taken, mut kept) = (open(TOKEN).await, open(KEPT).await);
        assert_eq!(keep_alive_on(&mut taken).await, Some(200));
        assert_eq!(keep_alive_on(&mut kept).await, Some(200));
        // The reload keeps KEPT only.
        let only_kept = base.replace(TOKEN, KEPT);
        let seen = transport.log_count("configuration reloaded");
        std::fs::write(
            &transport.config,
            only_kept.replace("127.0.0.1:0", &format!("127.0.0.1:{port}")),
        )
        .expect("config");
        transport.signal("HUP");
        transport.log_grows("configuration reloaded", seen).await;
        assert_eq!(keep_alive_on(&mut taken).await, Some(401), "the token was taken away");
        assert_eq!(keep_alive_on(&mut taken).await, None, "and its stream ended");
        for _ in 0..3 {
            assert_eq!(keep_alive_on(&mut kept).await, Some(200), "a kept token's stream goes on");
        }
        drop(transport);
    })
    .await;
}
