//! Long request heads without a token: each of 300 connections sends 400 KB of a head that
//! never ends (under hyper's default buffer of about 400 KB, where each was held whole for
//! `idle_timeout`: +120 MB). The transport refuses a head past its buffer (64 KiB) and closes
//! the connection, so its memory stays where it was, and a sidecar works meanwhile.

use std::time::Duration;

use e2e::door::{Legit, attacker_connect, transport_with};
use e2e::within;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONNECTIONS: usize = 300;
const HEAD_BYTES: usize = 400_000;

#[tokio::test]
async fn long_heads_without_a_token_hold_no_memory() {
    within(120, async {
        let extra = "max_connections_per_client: 1024\n";
        let (transport, port) = transport_with("heads", extra).await;
        let legit = Legit::start(port).await;
        let before = transport.rss_kib();
        let mut pad = b"GET /v1/health HTTP/1.1\r\nHost: t\r\nX-Pad: ".to_vec();
        pad.resize(HEAD_BYTES, b'a');
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..CONNECTIONS {
            let mut s = attacker_connect(port).await.expect("connect");
            // A refusal may close the connection before the whole pad is written.
            let cut = s.write_all(&pad).await.is_err();
            held.push((s, cut));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let during = transport.rss_kib();
        let took = legit.login_and_query().await.expect("a sidecar works meanwhile");
        for (s, cut) in &mut held {
            let mut answer = [0u8; 64];
            let read = tokio::time::timeout(Duration::from_millis(50), s.read(&mut answer)).await;
            let closed = match read {
                Ok(Ok(n)) => n == 0 || answer[..n].starts_with(b"HTTP/1.1 431"),
                Ok(Err(_)) => true,
                Err(_) => false,
            };
            if *cut || closed {
                refused += 1;
            }
        }
        let grown = during.saturating_sub(before) / 1024;
        println!("{CONNECTIONS} heads of {HEAD_BYTES} bytes: the transport's RSS {before} → {during} KiB (+{grown} MiB), {refused} refused or closed; a login and SELECT 1 took {took:?}");
        assert!(grown < 24, "unfinished long heads grew the transport by {grown} MiB");
        assert!(refused >= CONNECTIONS, "each long head is refused: {refused}");
    })
    .await;
}
