//! A take-over behind nginx (the example config: kept-alive connections to the transport):
//! clients run small selects and read 1 MB answers through three take-overs in a row, and
//! none sees an error, on each carrier. A connection nginx kept alive to the old process is
//! closed under it; the step it carried is sent again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use e2e::nginx::{Nginx, example_config};
use e2e::processes::ProcTunnel;
use e2e::{Carrier, DATABASE, on_both_carriers, opts};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// Clients at work meanwhile, each a command every [`PAUSE`] (the example config lets a
/// client address make 100 requests a second).
const CLIENTS: usize = 8;
/// Between two commands of a client.
const PAUSE: Duration = Duration::from_millis(100);
/// Take-overs in a row.
const TAKE_OVERS: usize = 3;

async fn take_overs_behind_nginx_lose_no_command(carrier: Carrier) {
    let nginx_port = Nginx::port();
    let socket = std::env::temp_dir().join(format!(
        "take-over-nginx-{}-{}.sock",
        std::process::id(),
        carrier.name()
    ));
    let line = format!("take_over_socket: {}\n", socket.display());
    let url = format!("  url: http://127.0.0.1:{nginx_port}/db-tunnel/\n");
    let via_nginx = |s: String| -> String {
        let s = carrier.sidecar(&s);
        s.lines()
            .map(|l| if l.starts_with("  url: ") { url.clone() } else { format!("{l}\n") })
            .collect()
    };
    let tag = format!("take-over-nginx-{}", carrier.name());
    let mut tunnel = ProcTunnel::start(&tag, |t| format!("{t}{line}"), via_nginx).await;
    let _nginx =
        Nginx::start(&example_config(&[tunnel.transport_port], nginx_port), nginx_port).await;
    let (stop, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let mut conn = Conn::new(opts(tunnel.sidecar_port, Some(DATABASE))).await.expect("connect");
        let (stop, done) = (stop.clone(), done.clone());
        clients.push(tokio::spawn(async move {
            let thread: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await?;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                if i % 4 == 0 {
                    let r: Option<Vec<u8>> =
                        conn.query_first("SELECT REPEAT('y', 1048576)").await?;
                    assert_eq!(r.map(|r| r.len()), Some(1 << 20), "client {i}'s large answer");
                } else {
                    let r: Option<u64> = conn.query_first(format!("SELECT {n} + {i}")).await?;
                    assert_eq!(r, Some(n + i as u64), "client {i}'s answer");
                }
                done.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(PAUSE).await;
            }
            let after: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await?;
            assert_eq!(after, thread, "client {i} kept its upstream connection");
            conn.disconnect().await?;
            Ok::<_, mysql_async::Error>(n)
        }));
    }
    for round in 0..TAKE_OVERS {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let next = tunnel.transport.start_again("transport", &["--take-over"], &format!("{round}"));
        assert!(tunnel.transport.exits_within(Duration::from_secs(30)).await, "old one exits");
        tunnel.transport = next;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    for (i, client) in clients.into_iter().enumerate() {
        client.await.expect("client task").unwrap_or_else(|e| panic!("client {i}: {e}"));
    }
    println!(
        "{}: {} commands through {TAKE_OVERS} take-overs behind nginx, no error",
        carrier.name(),
        done.load(Ordering::Relaxed)
    );
}

on_both_carriers!(take_overs_behind_nginx_lose_no_command);
