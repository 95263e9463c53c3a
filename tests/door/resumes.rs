//! What answers kept for resumes can be made to cost, by a token holder.
//! - Resumes that are never read: a session's answer of about 10 MB (its last 8 MiB kept for
//!   a resume), then 40 connections each asking for that step again from its first kept byte
//!   and reading nothing. A resume sends the kept chunks themselves, and a later resume ends
//!   the ones before it at their next chunk: the transport's memory stays where it was (each
//!   resume copied the 8 MiB before, +345 MiB for 40).
//! - One identity's sessions, each left idle after a 10 MB answer, keep at most its share of
//!   the budget: another identity's session still keeps its whole window (before, it kept
//!   nothing, and its resume was refused).
//!
//! A sidecar works meanwhile.

use std::time::Duration;

use e2e::door::transport_with;
use e2e::door::{Legit, logged_in_session, logged_in_session_as, packet, post_as};
use e2e::http::metric;
use e2e::{TOKEN, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const RESUMES: usize = 40;
const CYCLES: u64 = 16;
const KIND: (&str, &str) = ("content-type", "application/vnd.sqltunnel.packets");
const BOB: &str = "bob-T0ken-8Rt2Wq5Zx7Lp3Nv6Kd";

/// Runs a query answering about 10 MB as step `step` of session `id`; its answer.
async fn large_answer(port: u16, token: &str, id: &str, step: u64) -> Vec<u8> {
    let path = format!("/v1/sessions/{id}/command");
    let large = packet(0, b"\x03SELECT REPEAT('x', 1000000) FROM seq_1_to_10");
    let step = step.to_string();
    let (status, answer) =
        post_as(port, token, &path, &[KIND, ("x-tunnel-step", &step)], &large).await;
    assert!(status == 200 && answer.len() > 10_000_000, "{status}, {} bytes", answer.len());
    answer
}

/// The first byte of step `step`'s answer session `id` keeps: a resume asked from byte 0 is
/// refused naming it.
async fn kept_from(port: u16, token: &str, id: &str, step: u64) -> usize {
    let path = format!("/v1/sessions/{id}/command");
    let step = step.to_string();
    let again = [KIND, ("x-tunnel-step", &*step), ("x-tunnel-resume-from", "0")];
    let (status, said) = post_as(port, token, &path, &again, &packet(0, b"\x03SELECT 1")).await;
    let said = String::from_utf8_lossy(&said).into_owned();
    said.split("byte 0: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|from| from.parse().ok())
        .unwrap_or_else(|| panic!("{status}: {said}"))
}

/// `n` resumes of step `step` of session `id` from byte `from`, each on a connection with a
/// small receive buffer, their answers begun (the first byte read) and the rest left unread.
async fn unread_resumes(port: u16, id: &str, step: u64, from: usize, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("a small receive buffer");
        let mut s = socket.connect(([127, 0, 0, 1], port).into()).await.expect("connect");
        let body = packet(0, b"\x03SELECT 1");
        let head = format!(
            "POST /v1/sessions/{id}/command HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/vnd.sqltunnel.packets\r\nx-tunnel-step: {step}\r\nx-tunnel-resume-from: {from}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(&[head.as_bytes(), &body].concat()).await.expect("send");
        held.push(s);
    }
    for s in &mut held {
        let mut byte = [0u8; 1];
        let begun = tokio::time::timeout(Duration::from_secs(20), s.read(&mut byte)).await;
        assert!(matches!(begun, Ok(Ok(1))), "a resume was answered: {begun:?}");
    }
    held
}

#[tokio::test]
async fn resumes_that_are_never_read_take_no_memory() {
    within(120, async {
        let (transport, port) = transport_with("resumes", "").await;
        let legit = Legit::start(port).await;
        let id = logged_in_session(port).await;
        large_answer(port, TOKEN, &id, 2).await;
        let from = kept_from(port, TOKEN, &id, 2).await;
        let before = transport.rss_kib();
        let held = unread_resumes(port, &id, 2, from, RESUMES).await;
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

#[tokio::test]
async fn unread_resumes_of_past_steps_hold_no_kept_answer() {
    within(120, async {
        let (transport, port) = transport_with("resumes-past", "").await;
        let legit = Legit::start(port).await;
        let id = logged_in_session(port).await;
        large_answer(port, TOKEN, &id, 2).await;
        let before = transport.rss_kib();
        let mut held = Vec::new();
        // Each cycle: a large answer, resumes of it left unread, then the next step.
        for step in 2..2 + CYCLES {
            let from = kept_from(port, TOKEN, &id, step).await;
            held.extend(unread_resumes(port, &id, step, from, 4).await);
            large_answer(port, TOKEN, &id, step + 1).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let during = transport.rss_kib();
        let took = legit.login_and_query().await.expect("a sidecar works meanwhile");
        let grown = during.saturating_sub(before) / 1024;
        let kept = metric(port, Some(TOKEN), "sqltunnel_resume_bytes").await;
        println!("{CYCLES} steps of 10 MB, each resumed 4 times unread before the next: the transport's RSS {before} → {during} KiB (+{grown} MiB), {kept} bytes kept; a login and SELECT 1 took {took:?}");
        assert!(grown < 32, "unread resumes of past steps grew the transport by {grown} MiB");
        drop(held);
    })
    .await;
}

#[tokio::test]
async fn one_identity_cannot_take_the_whole_resume_budget() {
    within(120, async {
        let (budget, share) = (24 << 20, 12 << 20);
        let extra = format!(
            "max_resume_bytes: {budget}\nmax_resume_bytes_per_token: {share}\nidentities:\n  - name: bob\n    token: {BOB}\n    upstreams: [main]\n"
        );
        let (_transport, port) = transport_with("resume-shares", &extra).await;
        let legit = Legit::start(port).await;
        // The test token's sessions: each would keep 8 MiB, four of them 32 MiB.
        for _ in 0..4 {
            let id = logged_in_session(port).await;
            large_answer(port, TOKEN, &id, 2).await;
            legit.login_and_query().await.expect("a sidecar works meanwhile");
        }
        let kept = metric(port, Some(TOKEN), "sqltunnel_resume_bytes").await;
        assert!(kept <= share, "one identity's idle sessions keep {kept} bytes, over its share");
        let id = logged_in_session_as(port, BOB).await;
        let answer = large_answer(port, BOB, &id, 2).await;
        let from = kept_from(port, BOB, &id, 2).await;
        let window = answer.len() - from;
        let total = metric(port, Some(TOKEN), "sqltunnel_resume_bytes").await;
        println!("the test token's 4 idle sessions keep {kept} bytes (share {share}); bob's keeps {window} of its {} (all: {total} of {budget})", answer.len());
        assert!(window >= 7 << 20, "bob's session keeps only {window} bytes for a resume");
        let path = format!("/v1/sessions/{id}/command");
        let again = [KIND, ("x-tunnel-step", "2"), ("x-tunnel-resume-from", &from.to_string())];
        let (status, resumed) = post_as(port, BOB, &path, &again, &packet(0, b"\x03SELECT 1")).await;
        assert_eq!(status, 200, "bob's resume: {}", String::from_utf8_lossy(&resumed));
        assert!(resumed == answer[from..], "bob's resume sends the answer's last {window} bytes");
        legit.login_and_query().await.expect("a sidecar works meanwhile");
    })
    .await;
}

#[tokio::test]
async fn a_running_step_takes_room_from_its_identitys_idle_sessions() {
    within(120, async {
        let (budget, share) = (24 << 20, 12 << 20);
        let extra = format!("max_resume_bytes: {budget}\nmax_resume_bytes_per_token: {share}\n");
        let (_transport, port) = transport_with("resume-reclaim", &extra).await;
        let legit = Legit::start(port).await;
        // Three sessions of one identity, each left idle after a 10 MB answer: without room
        // taken back, the first two would hold the whole share and the third keep nothing.
        let mut sessions = Vec::new();
        for _ in 0..3 {
            let id = logged_in_session(port).await;
            let answer = large_answer(port, TOKEN, &id, 2).await;
            sessions.push((id, answer.len()));
            legit.login_and_query().await.expect("a sidecar works meanwhile");
        }
        let (last, len) = &sessions[2];
        let window = len - kept_from(port, TOKEN, last, 2).await;
        let kept = metric(port, Some(TOKEN), "sqltunnel_resume_bytes").await;
        println!(
            "the third session keeps {window} bytes of its answer; all keep {kept} (share {share})"
        );
        assert!(window >= 7 << 20, "the last step keeps only {window} bytes for a resume");
        assert!(kept <= share, "the identity keeps {kept} bytes, over its share");
        // The first session's answer was let go: a resume from its end still works.
        let (first, len) = &sessions[0];
        assert_eq!(kept_from(port, TOKEN, first, 2).await, *len, "nothing kept before its end");
        let path = format!("/v1/sessions/{first}/command");
        let end = len.to_string();
        let again = [KIND, ("x-tunnel-step", "2"), ("x-tunnel-resume-from", &*end)];
        let (status, rest) = post_as(port, TOKEN, &path, &again, &packet(0, b"\x03SELECT 1")).await;
        assert_eq!((status, rest.len()), (200, 0), "a resume from the end of a let-go answer");
        legit.login_and_query().await.expect("a sidecar works meanwhile");
    })
    .await;
}
