//! Resumes that are never read: a session's answer of about 10 MB (its last 8 MiB kept for a
//! resume), then 40 connections each asking for that step again from its first kept byte and
//! reading nothing. A resume sends the kept chunks themselves, and a later resume ends the
//! ones before it at their next chunk: the transport's memory stays where it was (each resume
//! copied the 8 MiB before, +345 MiB for 40), and a sidecar works meanwhile.

use std::time::Duration;

use e2e::door::{Legit, logged_in_session, packet, post, transport_with};
use e2e::{TOKEN, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const RESUMES: usize = 40;

#[tokio::test]
async fn resumes_that_are_never_read_take_no_memory() {
    within(120, async {
        let (transport, port) = transport_with("resumes", "").await;
        let legit = Legit::start(port).await;
        let id = logged_in_session(port).await;
        let path = format!("/v1/sessions/{id}/command");
        let kind = ("content-type", "application/vnd.sqltunnel.packets");
        let large = packet(0, b"\x03SELECT REPEAT('x', 1000000) FROM seq_1_to_10");
        let (status, answer) = post(port, &path, &[kind, ("x-tunnel-step", "2")], &large).await;
        assert!(status == 200 && answer.len() > 10_000_000, "{status}, {} bytes", answer.len());
        // Asked from byte 0, the refusal names the first byte kept.
        let again = [kind, ("x-tunnel-step", "2"), ("x-tunnel-resume-from", "0")];
        let (status, said) = post(port, &path, &again, &packet(0, b"\x03SELECT 1")).await;
        let said = String::from_utf8_lossy(&said).into_owned();
        let kept_from = said
            .split("byte 0: ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("{status}: {said}"))
            .to_owned();
        let before = transport.rss_kib();
        let mut held = Vec::new();
        for _ in 0..RESUMES {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket.set_recv_buffer_size(4096).expect("a small receive buffer");
            let mut s = socket.connect(([127, 0, 0, 1], port).into()).await.expect("connect");
            let body = packet(0, b"\x03SELECT 1");
            let head = format!(
                "POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/vnd.sqltunnel.packets\r\nx-tunnel-step: 2\r\nx-tunnel-resume-from: {kept_from}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            s.write_all(&[head.as_bytes(), &body].concat()).await.expect("send");
            held.push(s);
        }
        // Each answer has begun (its first byte is here): the rest waits unread.
        for s in &mut held {
            let mut byte = [0u8; 1];
            let begun = tokio::time::timeout(Duration::from_secs(20), s.read(&mut byte)).await;
            assert!(matches!(begun, Ok(Ok(1))), "a resume was answered: {begun:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let during = transport.rss_kib();
        let took = legit.login_and_query().await.expect("a sidecar works meanwhile");
        let grown = during.saturating_sub(before) / 1024;
        println!("{RESUMES} resumes unread: the transport's RSS {before} → {during} KiB (+{grown} MiB); a login and SELECT 1 took {took:?}");
        assert!(grown < 64, "{RESUMES} unread resumes grew the transport by {grown} MiB");
        drop(held);
    })
    .await;
}
