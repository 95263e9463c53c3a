//! The seeded door fuzzer: random requests at a real transport (a process), over HTTP and as
//! stream messages, with and without a valid token (random routes, methods, headers, bodies,
//! chunkings, slow writes and early closes), while a legitimate client queries through a real
//! sidecar. Invariants: no panic, the transport up, the client's every query answered, and
//! the transport's descriptors, sessions and memory back near where they started.
//! `SQLTUNNEL_SEED` replays a run; `SQLTUNNEL_DOOR_REQUESTS` sets its length (scripts/test.sh
//! runs a short pass, `scripts/bench.sh attack` a long one).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::seeded::Draw;
use common::wire::{
    BodyEncoding, STREAM_PROTOCOL, SessionEnd, StepHead, StepKind, UploadAt, UploadRange,
};
use e2e::door::{Legit, transport_with};
use e2e::http::metric;
use e2e::{TOKEN, within};
use futures_util::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Requests sent at once.
const WORKERS: u64 = 6;

#[tokio::test]
async fn the_door_holds_under_random_requests() {
    let requests: usize =
        std::env::var("SQLTUNNEL_DOOR_REQUESTS").ok().and_then(|n| n.parse().ok()).unwrap_or(400);
    within(60 + requests as u64 / 4, async move {
        let mut draw = Draw::seeded("door fuzzer");
        let base = draw.bits();
        let limits = "body_timeout: 2s\nidle_timeout: 3s\nmax_request_bytes: 262144\nmax_inflight_bytes: 1048576\nmax_inflight_bytes_per_token: 524288\n";
        let (transport, port) = transport_with("door-fuzz", limits).await;
        let legit = Legit::start(port).await;
        legit.login_and_query().await.expect("the client works before");
        let (fds_before, rss_before) = (transport.open_fds(), transport.rss_kib());
        let sessions_before = metric(port, Some(TOKEN), "sqltunnel_sessions_open").await;
        let (stop, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let mut workers = Vec::new();
        for w in 0..WORKERS {
            let (stop, sent) = (stop.clone(), sent.clone());
            workers.push(tokio::spawn(async move {
                let mut draw = Draw::from_seed(base.wrapping_add(w.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
                while !stop.load(Ordering::Relaxed) && sent.fetch_add(1, Ordering::Relaxed) < requests {
                    let request = random_request(&mut draw);
                    if draw.below(4) == 0 {
                        over_a_stream(port, &request, &mut draw).await;
                    } else {
                        over_http(port, &request, &mut draw).await;
                    }
                }
            }));
        }
        // The legitimate client queries all along.
        let (mut queries, mut failures) = (0, Vec::new());
        while workers.iter().any(|w| !w.is_finished()) {
            match legit.login_and_query().await {
                Ok(_) => queries += 1,
                Err(e) => failures.push(e),
            }
        }
        stop.store(true, Ordering::Relaxed);
        println!("door fuzzer: {} requests, {queries} legitimate logins and queries", sent.load(Ordering::Relaxed));
        assert!(failures.is_empty(), "the legitimate client failed: {failures:?}");
        assert!(queries > 0);
        assert_eq!(transport.log_count("panicked"), 0, "no panic");
        legit.login_and_query().await.expect("the client works after");
        drop(legit);
        // What the fuzzer opened ends: sessions by their login deadline or the session
        // timeout, connections by the idle timeout.
        let start = Instant::now();
        loop {
            let sessions = metric(port, Some(TOKEN), "sqltunnel_sessions_open").await;
            let fds = transport.open_fds();
            if sessions <= sessions_before && fds <= fds_before + 8 {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(45),
                "not back: {sessions} sessions (from {sessions_before}), {fds} descriptors (from {fds_before})"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let rss = transport.rss_kib();
        println!("door fuzzer: RSS {rss_before} KiB before, {rss} KiB after");
        assert!(rss < rss_before + 64 * 1024, "memory came back: {rss_before} KiB, then {rss} KiB");
    })
    .await;
}

/// One random request: its HTTP/1.1 head, its body, and how it is sent.
struct Fuzzed {
    head: String,
    body: Vec<u8>,
    /// Sizes of the pieces it is written in (the rest in one).
    pieces: Vec<usize>,
    /// A pause between pieces.
    pause: Duration,
    /// The connection is dropped after this many bytes, if set.
    close_after: Option<usize>,
}

fn random_request(draw: &mut Draw) -> Fuzzed {
    let session = if draw.below(2) == 0 {
        "0123456789abcdef0123456789abcdef".to_owned()
    } else {
        format!("{:032x}", draw.bits())
    };
    let paths = [
        "/v1/relay".to_owned(),
        format!("/v1/sessions/{session}/command"),
        format!("/v1/sessions/{session}/login"),
        format!("/v1/sessions/{session}/infile"),
        format!("/v1/sessions/{session}"),
        "/v1/keepalive".into(),
        "/v1/health".into(),
        "/v1/ready".into(),
        "/metrics".into(),
        "/v1/stream".into(),
        "/../../etc/passwd".into(),
        format!("/v1/{}", "a".repeat(draw.below(3000))),
    ];
    let methods = ["GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS", "BREW", "POST"];
    let path = &paths[draw.below(paths.len())];
    let method = methods[draw.below(methods.len())];
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n");
    match draw.below(3) {
        0 => {}
        1 => head.push_str(&format!("Authorization: Bearer wrong-{:x}\r\n", draw.bits())),
        _ => head.push_str(&format!("Authorization: Bearer {TOKEN}\r\n")),
    }
    let body = random_body(draw);
    let chunked = draw.below(4) == 0;
    match draw.below(6) {
        0 if !chunked => {}
        1 if !chunked => head.push_str(&format!("Content-Length: {}\r\n", draw.below(1 << 24))),
        _ if !chunked => head.push_str(&format!("Content-Length: {}\r\n", body.len())),
        _ => head.push_str("Transfer-Encoding: chunked\r\n"),
    }
    let extras = [
        "Content-Type: application/json\r\n".to_owned(),
        "Content-Encoding: zstd\r\n".into(),
        format!("X-Tunnel-Decoded-Length: {}\r\n", draw.bits() % (1 << 30)),
        format!("X-Tunnel-Step: {}\r\n", draw.bits() % 5),
        format!("X-Tunnel-Resume-From: {}\r\n", draw.bits() % 100_000),
        "X-Tunnel-Infile: end\r\n".into(),
        "X-Tunnel-Infile: more\r\n".into(),
        "Expect: 100-continue\r\n".into(),
        format!("X-Forwarded-For: 10.{}.{}.{}\r\n", draw.below(256), draw.below(256), draw.below(256)),
        format!("X-Junk: {}\r\n", "j".repeat(draw.below(20_000))),
        "Connection: close\r\n".into(),
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: sqltunnel.v3\r\n".into(),
        "Transfer-Encoding: gzip\r\n".into(),
        "\x01bad header\r\n".into(),
    ];
    for _ in 0..draw.below(4) {
        head.push_str(&extras[draw.below(extras.len())]);
    }
    head.push_str("\r\n");
    let body = if chunked { chunk(&body, draw) } else { body };
    let total = head.len() + body.len();
    let pieces = (0..draw.below(5)).map(|_| 1 + draw.below(64)).collect();
    let pause = Duration::from_millis(if draw.below(8) == 0 { draw.below(300) as u64 } else { 0 });
    let close_after = (draw.below(8) == 0).then(|| draw.below(total.max(1)));
    Fuzzed { head, body, pieces, pause, close_after }
}

/// A random body: nothing, JSON-ish, MySQL packets, or random bytes.
fn random_body(draw: &mut Draw) -> Vec<u8> {
    match draw.below(5) {
        0 => Vec::new(),
        1 => format!("{{\"upstream\":\"main\",\"sessions\":[\"{:x}\"],\"user\":\"app\",\"password\":\"x\",\"wait_ms\":{}}}", draw.bits(), draw.below(100)).into_bytes(),
        2 => {
            let payload: Vec<u8> = (0..draw.below(64)).map(|_| draw.bits() as u8).collect();
            let mut p = (payload.len() as u32).to_le_bytes().to_vec();
            p[3] = draw.below(4) as u8;
            [p, payload].concat()
        }
        3 => (0..draw.below(70_000)).map(|_| draw.bits() as u8).collect(),
        _ => b"\x05\x00\x00\x00\x03SELECT".to_vec(),
    }
}

/// `body` as chunks of random sizes, sometimes malformed.
fn chunk(body: &[u8], draw: &mut Draw) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let n = (1 + draw.below(4096)).min(body.len() - at);
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.extend_from_slice(&body[at..at + n]);
        out.extend_from_slice(b"\r\n");
        at += n;
    }
    if draw.below(6) == 0 {
        out.extend_from_slice(b"zz\r\n");
    } else {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    out
}

/// Sends it on a new connection, in pieces, and reads whatever comes back (bounded).
async fn over_http(port: u16, request: &Fuzzed, draw: &mut Draw) {
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { return };
    let all = [request.head.as_bytes(), &request.body].concat();
    let end = request.close_after.unwrap_or(all.len()).min(all.len());
    let mut at = 0;
    for piece in &request.pieces {
        let to = (at + piece).min(end);
        if s.write_all(&all[at..to]).await.is_err() {
            return;
        }
        at = to;
        tokio::time::sleep(request.pause).await;
    }
    if s.write_all(&all[at..end]).await.is_err() || request.close_after.is_some() {
        return;
    }
    let mut sink = vec![0u8; 16 * 1024];
    let deadline = Duration::from_millis(500 + draw.below(3000) as u64);
    drop(
        tokio::time::timeout(deadline, async {
            while s.read(&mut sink).await.is_ok_and(|n| n > 0) {}
        })
        .await,
    );
}

/// Sends its body as a message on a stream opened with the valid token, after a random step
/// head (with bytes flipped, at times), and reads an answer (bounded).
async fn over_a_stream(port: u16, request: &Fuzzed, draw: &mut Draw) {
    let Ok(mut upgrade) = format!("ws://127.0.0.1:{port}/v1/stream").into_client_request() else {
        return;
    };
    let headers = upgrade.headers_mut();
    let (Ok(token), Ok(protocol)) = (format!("Bearer {TOKEN}").parse(), STREAM_PROTOCOL.parse())
    else {
        return;
    };
    headers.insert("authorization", token);
    headers.insert("sec-websocket-protocol", protocol);
    let Ok(tcp) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { return };
    let Ok(Ok((mut ws, _))) =
        tokio::time::timeout(Duration::from_secs(5), tokio_tungstenite::client_async(upgrade, tcp))
            .await
    else {
        return;
    };
    let mut message = random_step(draw);
    message.extend_from_slice(&request.body);
    for _ in 0..draw.below(3) {
        if !message.is_empty() {
            let at = draw.below(message.len());
            message[at] ^= draw.bits() as u8;
        }
    }
    if ws.send(Message::Binary(message.into())).await.is_err() {
        return;
    }
    use futures_util::StreamExt;
    let deadline = Duration::from_millis(200 + draw.below(2000) as u64);
    drop(
        tokio::time::timeout(deadline, async { while let Some(Ok(_)) = ws.next().await {} }).await,
    );
}

/// A random step's message head: any kind, a session or none (another's, or none such), a
/// step number, a resume offset, a zstd length, an upload part, each or not.
fn random_step(draw: &mut Draw) -> Vec<u8> {
    let kinds = [
        StepKind::Open,
        StepKind::KeepAlive,
        StepKind::Login,
        StepKind::LoginAs,
        StepKind::Command,
        StepKind::FilePiece { last: draw.below(2) == 0 },
        StepKind::Close(SessionEnd::KillQuery),
    ];
    let mut head = StepHead::new(kinds[draw.below(kinds.len())]);
    head.session = (draw.below(4) > 0).then(|| format!("{:032x}", draw.bits()));
    let (step, resume_from) = (draw.bits() % 5, draw.bits() % 100_000);
    head.step = (draw.below(2) == 0).then_some(step);
    head.resume_from = (draw.below(2) == 0).then_some(resume_from);
    if draw.below(4) == 0 {
        head.encoding = BodyEncoding::Zstd { decoded: draw.bits() % (1 << 31) };
    }
    if draw.below(4) == 0 {
        let (a, b) = (draw.bits() % 1_000_000, draw.bits() % 1_000_000);
        let range = UploadRange { from: a.min(b), total: a.max(b) };
        let crc = (draw.below(4) > 0).then(|| draw.bits() as u32);
        head.upload = Some(UploadAt { range, crc });
    }
    head.accept_zstd = draw.below(2) == 0;
    let mut message = Vec::new();
    head.encode(&mut message);
    message
}
