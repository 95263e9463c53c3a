//! A flood of pipelined commands while the audit log's writer is behind (its file is a pipe
//! nobody reads for a while, as a slow or full disk would leave it): each step waits for room
//! in the writer's queue before its commands run, so every command that ran has its line.
//! Before, a full queue dropped lines (`sqltunnel_audit_lines_dropped_total`): a statement
//! hidden in a flood ran unaudited. A sidecar's client works meanwhile, once the writer
//! catches up. One identity's long commands hold at most a quarter of the queue's places.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::door::{Legit, logged_in_session, packet, post};
use e2e::http::metric;
use e2e::{TOKEN, within};

const STEPS: usize = 100;
const PER_STEP: usize = 256;
const KIND: (&str, &str) = ("content-type", "application/vnd.sqltunnel.packets");

#[tokio::test]
async fn a_flood_of_commands_runs_none_unaudited() {
    within(180, async {
        let fifo = std::env::temp_dir().join(format!("sqltunnel-audit-{}.fifo", std::process::id()));
        drop(std::fs::remove_file(&fifo));
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success());
        // The reader opens the pipe at once (the transport's open waits for it), and reads
        // nothing until told.
        let (text, reading) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (into, go, path) = (text.clone(), reading.clone(), fifo.clone());
        std::thread::spawn(move || {
            let mut pipe = std::fs::File::open(path).expect("open the pipe");
            while !go.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let mut chunk = vec![0u8; 1 << 16];
            while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                into.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(&chunk[..n]);
            }
        });
        let extra = format!("body_timeout: 20s\naudit:\n  path: {}\n  statements: text\n", fifo.display());
        let (_transport, port) = e2e::door::transport_with("audit-flood", &extra).await;
        let legit = Legit::start(port).await;
        let id = logged_in_session(port).await;
        let batch: Vec<u8> =
            (0..PER_STEP).flat_map(|_| packet(0, b"\x03SELECT 1 /* flood */")).collect();
        let path = format!("/v1/sessions/{id}/command");
        let flood = tokio::spawn(async move {
            for step in 2..2 + STEPS {
                let step = step.to_string();
                let (status, _) = post(port, &path, &[KIND, ("x-tunnel-step", &step)], &batch).await;
                assert_eq!(status, 200, "step {step} of the flood");
            }
        });
        // The writer stays behind for 4 s, or until the flood is through.
        let started = Instant::now();
        while !flood.is_finished() && started.elapsed() < Duration::from_secs(4) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (through_before, behind) = (flood.is_finished(), started.elapsed());
        reading.store(true, Ordering::Relaxed);
        let took = legit.login_and_query().await.expect("a sidecar works meanwhile");
        flood.await.expect("the flood");
        let expected = STEPS * PER_STEP;
        let wait = Instant::now();
        let audited = loop {
            let text = text.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let audited = String::from_utf8_lossy(&text).matches("/* flood */").count();
            if audited >= expected || wait.elapsed() > Duration::from_secs(20) {
                break audited;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let dropped = metric(port, Some(TOKEN), "sqltunnel_audit_lines_dropped_total").await;
        println!("{expected} commands in {STEPS} pipelined steps, the writer behind for {behind:?} (the flood {} through meanwhile): {audited} audited, {dropped} lines dropped; a login and SELECT 1 took {took:?}", if through_before { "was" } else { "was not" });
        drop(std::fs::remove_file(&fifo));
        assert_eq!(dropped, 0, "audit lines dropped");
        assert_eq!(audited, expected, "every command that ran has its line");
    })
    .await;
}

const MALLORY: &str = "mallory-T0ken-4Hs8Qw2Zr6Lx9Pv";

/// One identity's long commands, each step a `SLEEP` and 255 more commands, would hold every
/// place of the audit queue for as long as they run (16 sessions × 256 lines): a quarter at
/// most is one identity's, so another's commands still run.
#[tokio::test]
async fn one_identitys_long_commands_hold_no_more_than_a_quarter_of_the_audit_queue() {
    within(120, async {
        let path = std::env::temp_dir()
            .join(format!("sqltunnel-audit-hold-{}.jsonl", std::process::id()));
        let extra = format!(
            "body_timeout: 4s\naudit:\n  path: {}\n  statements: text\nidentities:\n  - name: mallory\n    token: {MALLORY}\n    upstreams: [main]\n",
            path.display()
        );
        let (_transport, port) = e2e::door::transport_with("audit-hold", &extra).await;
        let legit = Legit::start(port).await;
        let mut sleeps = Vec::new();
        for _ in 0..16 {
            let id = e2e::door::logged_in_session_as(port, MALLORY).await;
            let mut batch = packet(0, b"\x03SELECT SLEEP(12)");
            (1..PER_STEP).for_each(|_| batch.extend(packet(0, b"\x03SELECT 1")));
            sleeps.push(tokio::spawn(async move {
                let path = format!("/v1/sessions/{id}/command");
                let step = [KIND, ("x-tunnel-step", "2")];
                e2e::door::post_as(port, MALLORY, &path, &step, &batch).await.0
            }));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Without a share, every place would be held for 12 s, and this command refused
        // (`audit_behind`) once `body_timeout` (4 s) had passed.
        let took = legit.login_and_query().await.expect("another identity's commands run");
        let running = sleeps.iter().filter(|s| !s.is_finished()).count();
        println!("mallory's 16 steps of a SLEEP(12) and 255 more commands ({running} still running or waiting): a login and SELECT 1 through a sidecar took {took:?}");
        sleeps.iter().for_each(tokio::task::JoinHandle::abort);
        drop(std::fs::remove_file(&path));
    })
    .await;
}
