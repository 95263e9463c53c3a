//! The transport's connection places under attack: connections that never show a token (each
//! an unfinished request head, reopened when closed) from an attacker's address hold every
//! place in `max_connections`, and a sidecar started meanwhile still gets its connections: a
//! connection without a token makes room for each new one, the attacker's first (its address
//! holds many). A slow client's connection, opened before the attack and showing its token
//! only after it (as a long TLS handshake or a token fetched from an issuer would), is not the
//! one that goes. Connections on which one identity showed its token fill every place too: its
//! own places are at most `max_connections_per_token`, and a health check without a token
//! gives a connection's place back; a new sidecar still gets in. On both carriers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use e2e::door::{Legit, attacker_connect, read_head, transport_with};
use e2e::http::metric;
use e2e::{Carrier, TOKEN, on_both_carriers, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PLACES: usize = 40;

on_both_carriers!(connections_without_a_token_make_room);

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

const MALLORY: &str = "mallory-T0ken-4Hs8Qw2Zr6Lx9Pv";

/// Connections on which another identity showed its token, then kept open, each with its
/// answer read: every place is taken by them.
async fn proven_connections(port: u16, n: usize) -> Vec<tokio::net::TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        let Ok(mut s) = attacker_connect(port).await else { continue };
        let ask =
            format!("GET /v1/ready HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {MALLORY}\r\n\r\n");
        if s.write_all(ask.as_bytes()).await.is_err() {
            continue;
        }
        let Some(head) = read_head(&mut s, Duration::from_secs(5)).await else { continue };
        let length = head.lines().find_map(|l| l.strip_prefix("content-length: "));
        let mut body = vec![0u8; length.and_then(|n| n.trim().parse().ok()).unwrap_or(0)];
        if s.read_exact(&mut body).await.is_ok() {
            held.push(s);
        }
    }
    held
}

on_both_carriers!(one_identity_cannot_hold_every_place);

/// Another identity's connections, each proven by its token, fill every place; a sidecar
/// started then still gets its connections: that identity's own places are at most
/// `max_connections_per_token`, and its others may go.
async fn one_identity_cannot_hold_every_place(carrier: Carrier) {
    one_identity_holding_every_place(carrier, 8, false).await;
}

on_both_carriers!(a_token_shown_once_then_health_checks_keep_no_place);

/// Mallory's connections, each proven by her token once, then each sends a health check
/// without it: the places are given back, and a sidecar started then gets its connections.
async fn a_token_shown_once_then_health_checks_keep_no_place(carrier: Carrier) {
    one_identity_holding_every_place(carrier, 256, true).await;
}

/// Mallory's connections, each proven by her token (`per_token` of them her own at most), take
/// every place; `health`: then each sends a health check without a token, which gives its
/// place back. A sidecar started then gets its connections.
async fn one_identity_holding_every_place(carrier: Carrier, per_token: usize, health: bool) {
    within(120, async {
        let extra = format!(
            "max_connections: {PLACES}\nmax_connections_per_token: {per_token}\nidentities:\n  - name: mallory\n    token: {MALLORY}\n    upstreams: [main]\n"
        );
        let tag = format!("own-places-{carrier:?}-{health}");
        let (_transport, port) = transport_with(&tag, &extra).await;
        let mut held = proven_connections(port, PLACES).await;
        assert_eq!(held.len(), PLACES, "mallory's connections took every place");
        if health {
            for s in &mut held {
                let ask = "GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n";
                s.write_all(ask.as_bytes()).await.expect("a health check");
                read_head(s, Duration::from_secs(5)).await.expect("its answer");
            }
        }
        let legit = Legit::start_on(port, carrier).await;
        let mut slowest = Duration::ZERO;
        for round in 0..5 {
            let logins = (0..4).map(|_| legit.login_and_query());
            for result in futures_util::future::join_all(logins).await {
                let took = result
                    .unwrap_or_else(|e| panic!("round {round}: a legitimate login failed: {e}"));
                slowest = slowest.max(took);
            }
        }
        let name = r#"sqltunnel_identity_limited_total{identity="mallory",limit="max_connections_per_token"}"#;
        let limited = metric(port, Some(TOKEN), name).await;
        let evicted = metric(port, Some(TOKEN), "sqltunnel_connections_evicted_total").await;
        println!("{carrier:?}: mallory proved {PLACES} connections; 20 logins and queries, the slowest {slowest:?}; {evicted} connections evicted, {limited} of mallory's requests past her share");
        assert!(evicted >= 1, "the operator sees connections closed to make room");
        if !health {
            assert!(limited >= (PLACES - per_token) as u64, "the operator sees mallory past her share");
        }
        drop(held);
    })
    .await;
}
