//! The transport's connection places under attack: connections that never show a token (each
//! an unfinished request head, reopened when closed) from an attacker's address hold every
//! place in `max_connections`, and a sidecar started meanwhile still gets its connections: a
//! connection without a token makes room for each new one, the attacker's first (its address
//! holds many). A slow client's connection, opened before the attack and showing its token
//! only after it (as a long TLS handshake or a token fetched from an issuer would), is not the
//! one that goes. On both carriers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use e2e::door::{Legit, attacker_connect, read_head, transport_with};
use e2e::http::metric;
use e2e::{Carrier, TOKEN, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PLACES: usize = 40;

#[tokio::test]
async fn connections_without_a_token_make_room_for_a_sidecar_over_streams() {
    connections_without_a_token_make_room(Carrier::Stream).await;
}

#[tokio::test]
async fn connections_without_a_token_make_room_for_a_sidecar_over_requests() {
    connections_without_a_token_make_room(Carrier::Requests).await;
}

async fn connections_without_a_token_make_room(carrier: Carrier) {
    within(120, async {
        // At debug, the transport logs each connection it closes to make room.
        let extra = format!("max_connections: {PLACES}\nlog:\n  level: debug\n");
        let tag = format!("places-{carrier:?}");
        let (transport, port) = transport_with(&tag, &extra).await;
        // The slow client's request, begun before the attack and ended after it.
        let mut slow = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n").await.expect("send");
        let stop = Arc::new(AtomicBool::new(false));
        let (holding, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut attackers = Vec::new();
        for _ in 0..PLACES + 8 {
            let (stop, holding, closed) = (stop.clone(), holding.clone(), closed.clone());
            attackers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = attacker_connect(port).await else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    // A head that never ends: the server waits for the rest.
                    if s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: t\r\n").await.is_err() {
                        continue;
                    }
                    holding.fetch_add(1, Ordering::Relaxed);
                    let mut byte = [0u8; 1];
                    let ended = tokio::time::timeout(Duration::from_secs(60), s.read(&mut byte));
                    drop(ended.await);
                    holding.fetch_sub(1, Ordering::Relaxed);
                    closed.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }));
        }
        // Every place taken by the attacker (more of its connections than places wait to
        // take one back).
        let filled = std::time::Instant::now();
        while holding.load(Ordering::Relaxed) < PLACES {
            assert!(filled.elapsed() < Duration::from_secs(20), "the attack did not fill the places");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let legit = Legit::start_on(port, carrier).await;
        // Four clients at once, so that the sidecar needs several connections of its own.
        let mut slowest = Duration::ZERO;
        for round in 0..5 {
            let logins = (0..4).map(|_| legit.login_and_query());
            for result in futures_util::future::join_all(logins).await {
                let took = result
                    .unwrap_or_else(|e| panic!("round {round}: a legitimate login failed: {e}"));
                slowest = slowest.max(took);
            }
        }
        let rest = format!("Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n");
        slow.write_all(rest.as_bytes()).await.expect("the slow client's connection is open");
        let head = read_head(&mut slow, Duration::from_secs(10)).await;
        let head = head.expect("the slow client's connection was not closed to make room");
        assert!(head.starts_with("HTTP/1.1 200"), "the slow client's request: {head}");
        stop.store(true, Ordering::Relaxed);
        for attacker in attackers {
            attacker.abort();
        }
        // The log first: each eviction is counted before it is logged (and the metric's own
        // connection may make room for itself meanwhile).
        let made_room = transport.log_count("closed to make room for a new one");
        let evicted = metric(port, Some(TOKEN), "sqltunnel_connections_evicted_total").await;
        println!(
            "{carrier:?}: 20 logins and queries, the slowest {slowest:?}; {} of the attacker's connections closed, {made_room} logged as closed to make room, {evicted} counted",
            closed.load(Ordering::Relaxed)
        );
        assert!(made_room >= 1 && evicted >= made_room as u64, "the operator sees connections closed to make room");
        drop(legit);
        drop(transport);
    })
    .await;
}
