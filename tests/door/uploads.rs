//! Resumable uploads under attack: what a session holds of an unfinished body is room in
//! `max_inflight_bytes`, so a holder of a token tries to keep it for ever (keep-alives, one per
//! session, several identities), to make the transport hash it again and again, and to slip a
//! body past the checks a plain body gets. A real transport, the test MariaDB, and a
//! legitimate client working meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use e2e::door::{Legit, packet};
use e2e::http::call;
use e2e::processes::{Proc, free_port, wait_port};
use e2e::{Carrier, DATABASE, PASSWORD, USER, direct, mysql_port, within};
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Two named identities besides the tests' token: attackers each with a share of the budget.
const MALLORY: &str = "6d616c6c6f72792d746f6b656e2d3031";
const TRUDY: &str = "74727564792d746f6b656e2d30313233";

/// A transport with `extra` settings, a short `session_timeout` (the reaper looks at each
/// session that often) and the two attackers' identities.
async fn transport(tag: &str, extra: &str) -> (Proc, u16) {
    let port = free_port();
    let yaml = e2e::transport_yaml(mysql_port())
        .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
        .replace("session_timeout: 30s\n", "session_timeout: 4s\nheartbeat_interval: 1s\n");
    let identities = format!(
        "identities:\n  - name: mallory\n    token: {MALLORY}\n    upstreams: ['*']\n  - name: trudy\n    token: {TRUDY}\n    upstreams: ['*']\n"
    );
    let transport = Proc::start("transport", &format!("{yaml}{extra}{identities}"), tag);
    wait_port(port).await;
    (transport, port)
}

/// A session of `token`'s, logged in by the transport itself: its id.
async fn session_of(port: u16, token: &str) -> String {
    let (status, id, _) = call(port, token, "POST", "/v1/relay", "{}").await;
    assert_eq!(status, 201, "a session opens");
    let login = format!(
        "{{\"user\":\"{USER}\",\"password\":\"{PASSWORD}\",\"database\":\"{DATABASE}\",\"client_flags\":{},\"collation\":45}}",
        0x000a_a28du32
    );
    let path = format!("/v1/sessions/{id}/login");
    let (status, _, answer) = call(port, token, "POST", &path, &login).await;
    assert_eq!(status, 200, "the session logs in: {answer}");
    id
}

/// One request of an upload: `body` at `from` of `total` bytes, for step `step` of `session`'s
/// `endpoint`, with the CRC `crc` of what comes before and `extra` headers. The status, the
/// bytes the transport says it holds, and the body.
async fn upload(
    port: u16,
    token: &str,
    (session, endpoint, step): (&str, &str, u64),
    (from, total): (u64, u64),
    crc: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> (u16, Option<u64>, Vec<u8>) {
    let extra: String = extra.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let head = format!(
        "POST /v1/sessions/{session}/{endpoint} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\nx-tunnel-step: {step}\r\nx-tunnel-upload: {from}/{total}\r\nx-tunnel-answer-crc: {crc}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("head");
    drop(s.write_all(body).await);
    let mut answer = Vec::new();
    drop(s.read_to_end(&mut answer).await);
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(answer.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&answer[..split]).to_ascii_lowercase();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let have = head
        .lines()
        .find_map(|l| l.strip_prefix("x-tunnel-upload-have:"))
        .and_then(|v| v.trim().parse().ok());
    (status, have, answer[split..].to_vec())
}

/// Keeps `sessions` of `token`'s alive, a keep-alive a second, until `stop`.
fn keep_alive(port: u16, token: &'static str, sessions: Vec<String>, stop: Arc<AtomicBool>) {
    tokio::spawn(async move {
        let body = serde_json::json!({ "sessions": sessions, "wait_ms": 0 }).to_string();
        while !stop.load(Ordering::Relaxed) {
            call(port, token, "POST", "/v1/keepalive", &body).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// Held uploads, one per session of two identities kept alive with keep-alives, took the
/// whole `max_inflight_bytes` for as long as the keep-alives went on: every other command,
/// however small, waited `body_timeout` for room and failed. Now an upload, across its
/// requests, keeps the minimum body rate a plain body keeps: what it holds is let go once it
/// falls under it, and the others' commands go on. (A small command needs no room: only larger
/// ones waited.)
#[tokio::test]
async fn held_uploads_let_go_of_their_room() {
    within(120, async {
        let (transport, port) = transport(
            "held-uploads",
            "body_timeout: 2s\nmax_request_bytes: 131072\nmax_inflight_bytes: 262144\nmax_inflight_bytes_per_token: 131072\n",
        )
        .await;
        // Over a stream: a small body is exempt only there (a request's takes room as it comes).
        let legit = Legit::start_on(port, Carrier::Stream).await;
        legit.login_and_query().await.expect("the legitimate client works before");
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut held = Vec::new();
        for token in [MALLORY, TRUDY] {
            let id = session_of(port, token).await;
            held.push(id.clone());
            let body = vec![b'x'; 131_071];
            let (status, have, _) =
                upload(port, token, (&id, "command", 1), (0, 131_072), "00000000", &[], &body).await;
            assert_eq!((status, have), (202, Some(131_071)), "all but a byte is held");
            keep_alive(port, token, vec![id], stop.clone());
        }
        // A small command takes no room (its stream message holds it): it goes on meanwhile.
        legit.login_and_query().await.expect("a small command needs no room");
        // Until the held bodies fall under the minimum rate (2 s + 128 KiB at 16 KiB/s), the
        // budget is theirs, and a statement over 16 KiB waits for room; then it goes on again.
        let large = format!("SELECT LENGTH('{}')", "y".repeat(20_000));
        let answers = |answer: Result<Option<u64>, _>| answer.is_ok_and(|n| n == Some(20_000));
        let mut c = legit.connect().await.expect("login");
        let first = c.query_first::<u64, _>(&large).await;
        let said = first.as_ref().err().map(ToString::to_string).unwrap_or_default();
        assert!(said.contains("max_inflight_bytes"), "the budget was not held: {first:?}");
        let back = loop {
            let answered = match legit.connect().await {
                Ok(mut c) => answers(c.query_first::<u64, _>(&large).await),
                Err(_) => false,
            };
            if answered {
                break started.elapsed();
            }
            assert!(started.elapsed() < Duration::from_secs(40), "the budget stayed held");
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        println!("the budget was back after {back:?}");
        assert!(back < Duration::from_secs(25), "held for {back:?}");
        let mut c = legit.connect().await.expect("login");
        let len: Option<u64> = c
            .query_first(format!("SELECT LENGTH('{}')", "y".repeat(100_000)))
            .await
            .expect("a large statement has room again");
        assert_eq!(len, Some(100_000));
        // The operator sees why, for each held upload (the reaper looks at each session in its
        // own time: the second may come up to a session_timeout after the first, which was
        // enough for the statements above), and the attacker's session, still alive, holds
        // nothing.
        let let_go = || transport.log_count("an upload held under the minimum body rate was let go");
        let until = Instant::now() + Duration::from_secs(15);
        while let_go() < 2 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(let_go() >= 2, "{} held uploads let go", let_go());
        let at = (&*held[0], "command", 1);
        let (_, have, _) = upload(port, MALLORY, at, (0, 131_072), "00000000", &[], b"").await;
        assert_eq!(have, Some(0), "the upload starts again from nothing");
        stop.store(true, Ordering::Relaxed);
    })
    .await;
}

/// A session whose upload of step 1 was given up (its sidecar moved on to step 2) held the
/// bytes until the session ended: with a share the size of one body, the identity's next
/// command was refused. Now the next step lets go of a held upload of an earlier one.
#[tokio::test]
async fn the_next_step_lets_go_of_an_upload_given_up() {
    within(60, async {
        let (_transport, port) = transport(
            "given-up",
            "max_request_bytes: 131072\nmax_inflight_bytes: 262144\nmax_inflight_bytes_per_token: 131072\n",
        )
        .await;
        let id = session_of(port, MALLORY).await;
        let body = vec![b'x'; 131_071];
        let (status, have, _) =
            upload(port, MALLORY, (&id, "command", 1), (0, 131_072), "00000000", &[], &body).await;
        assert_eq!((status, have), (202, Some(131_071)));
        let select = packet(0, b"\x03SELECT 1");
        let headers = format!(
            "POST /v1/sessions/{id}/command HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {MALLORY}\r\nx-tunnel-step: 2\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            select.len()
        );
        let (status, answer) =
            e2e::http::raw_request(port, &format!("{headers}{}", String::from_utf8_lossy(&select)))
                .await;
        assert_eq!(status, 200, "step 2 runs: {answer}");
    })
    .await;
}

/// Each upload request that claimed to continue a held body had the transport hash all of it
/// again (64 MiB for a 200-byte request), on the thread serving everyone else; a stream's
/// 128 KiB parts made a large statement's CRCs quadratic. Now what is held is hashed once, as
/// it arrives.
#[tokio::test]
async fn continuing_an_upload_does_not_hash_it_again() {
    within(120, async {
        let (_transport, port) = transport("rehash", "worker_threads: 1\n").await;
        let legit = Legit::start(port).await;
        let id = session_of(port, MALLORY).await;
        let total: u64 = 64 << 20;
        let body = vec![b'z'; (total - 1) as usize];
        let (status, have, _) =
            upload(port, MALLORY, (&id, "command", 1), (0, total), "00000000", &[], &body).await;
        assert_eq!((status, have), (202, Some(total - 1)));
        let stop = Arc::new(AtomicBool::new(false));
        let probes = Arc::new(AtomicUsize::new(0));
        let mut attackers = Vec::new();
        for _ in 0..4 {
            let (stop, probes, id) = (stop.clone(), probes.clone(), id.clone());
            attackers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let at = (total - 1, total);
                    let (status, _, _) =
                        upload(port, MALLORY, (&id, "command", 1), at, "00000000", &[], b"").await;
                    assert_eq!(status, 202, "a probe is answered");
                    probes.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let mut slowest = Duration::ZERO;
        for _ in 0..10 {
            slowest = slowest.max(legit.login_and_query().await.expect("the legitimate client"));
        }
        stop.store(true, Ordering::Relaxed);
        for a in attackers {
            a.await.expect("attacker");
        }
        let probes = probes.load(Ordering::Relaxed);
        println!("{probes} probes; the slowest login and SELECT 1 took {slowest:?}");
        assert!(probes >= 40, "the probes ran: {probes}");
        assert!(slowest < Duration::from_millis(2500), "a login and SELECT 1 took {slowest:?}");
    })
    .await;
}

/// An upload is the body it adds up to, checked as a plain body is: a command the allow-list
/// refuses behind an allowed one, in two parts and compressed, never reaches the server;
/// offsets past the limits are refused; a step that ran does not run again.
#[tokio::test]
async fn an_upload_is_checked_whole_and_runs_once() {
    within(60, async {
        let mut d = direct().await;
        d.query_drop("DROP TABLE IF EXISTS door_upload").await.expect("clean");
        d.query_drop("CREATE TABLE door_upload (i INT)").await.expect("table");
        let (_transport, port) = transport("checked", "").await;
        let id = session_of(port, MALLORY).await;
        let binlog_dump = packet(0, b"\x12\x04\x00\x00\x00\x00\x00\x01\x00\x00\x00");
        let insert = packet(
            0,
            format!("\x03INSERT INTO door_upload VALUES (1) /*{}*/", "p".repeat(70_000)).as_bytes(),
        );
        let smuggling = [insert.as_slice(), &binlog_dump].concat();
        let packed = common::wire::compress_whole(&smuggling).expect("zstd");
        let decoded = smuggling.len().to_string();
        let zstd = [("content-encoding", "zstd"), ("x-tunnel-decoded-length", decoded.as_str())];
        for (step, (bytes, headers)) in
            [(&smuggling[..], &[][..]), (&packed[..], &zstd[..])].into_iter().enumerate()
        {
            let step = step as u64 + 1;
            let (total, half) = (bytes.len() as u64, bytes.len() / 2);
            let first = upload(
                port,
                MALLORY,
                (&id, "command", step),
                (0, total),
                "00000000",
                headers,
                &bytes[..half],
            )
            .await;
            assert_eq!((first.0, first.1), (202, Some(half as u64)));
            let crc = common::wire::crc_before(bytes, half);
            let (status, _, answer) = upload(
                port,
                MALLORY,
                (&id, "command", step),
                (half as u64, total),
                &crc,
                headers,
                &bytes[half..],
            )
            .await;
            assert_eq!(status, 400, "refused whole: {}", String::from_utf8_lossy(&answer));
        }
        // Offsets past any limit, and a FROM past the TOTAL.
        for (range, refused) in
            [((u64::MAX, u64::MAX), 413), ((0, u64::MAX), 413), ((0, 1 << 40), 413), ((9, 8), 400)]
        {
            let (status, _, _) =
                upload(port, MALLORY, (&id, "command", 3), range, "00000000", &[], b"").await;
            assert_eq!(status, refused, "{range:?}");
        }
        // A proper upload runs once; the same step sent again whole is refused.
        let (total, half) = (insert.len() as u64, insert.len() / 2);
        upload(port, MALLORY, (&id, "command", 3), (0, total), "00000000", &[], &insert[..half])
            .await;
        let crc = common::wire::crc_before(&insert, half);
        let (status, _, _) = upload(
            port,
            MALLORY,
            (&id, "command", 3),
            (half as u64, total),
            &crc,
            &[],
            &insert[half..],
        )
        .await;
        assert_eq!(status, 200, "the whole statement runs");
        let (status, _, _) =
            upload(port, MALLORY, (&id, "command", 3), (0, total), "00000000", &[], &insert).await;
        assert_eq!(status, 409, "a step runs once");
        let rows: Option<u64> =
            d.query_first("SELECT COUNT(*) FROM door_upload").await.expect("count");
        assert_eq!(rows, Some(1), "only the proper statement ran, once");
        d.query_drop("DROP TABLE door_upload").await.expect("drop");
    })
    .await;
}
