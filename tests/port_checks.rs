//! Port checks cost the database nothing (security review F9): TCP connections to the sidecar
//! that leave before their handshake response (or whose `users` password is wrong) give their
//! greeting back for the next client, so 30 of them in a row and 5 wrong passwords, while a
//! real client logs in and queries, raise MariaDB's `Aborted_connects` by at most 2 (the
//! greeting still kept when they end expires unused, and one displaced if the real client's
//! login overlaps a check). Before, each took a greeting, closed it unanswered (an aborted
//! connect) and had the next one prepared.

use std::time::Duration;

use e2e::{DATABASE, Tunnel, direct, within};
use mysql_async::prelude::Queryable;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The server's `Aborted_connects`.
async fn aborted_connects() -> u64 {
    let mut c = direct().await;
    let row: Option<(String, u64)> =
        c.query_first("SHOW GLOBAL STATUS LIKE 'Aborted_connects'").await.expect("status");
    drop(c.disconnect().await);
    row.expect("Aborted_connects").1
}

#[tokio::test]
async fn port_checks_do_not_count_as_aborted_connects_upstream() {
    within(90, async {
        let tunnel = Tunnel::start().await;
        // Whatever the test before left half-open upstream is counted first.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = aborted_connects().await;
        let client = tokio::spawn({
            let sidecar = tunnel.sidecar.port();
            async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let opts = e2e::opts(sidecar, Some(DATABASE));
                let mut c = mysql_async::Conn::new(opts).await.expect("a real client logs in");
                for i in 0..20u64 {
                    let n: Option<u64> = c.query_first(format!("SELECT {i}")).await.expect("query");
                    assert_eq!(n, Some(i));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                c.disconnect().await.expect("quit");
            }
        });
        for i in 0..30 {
            let mut check = TcpStream::connect(tunnel.sidecar).await.expect("connect");
            if i % 2 == 1 {
                // Some read the greeting first, as a banner grabber does.
                let mut greeting = [0u8; 256];
                let n = check.read(&mut greeting).await.expect("greeting");
                assert!(n > 4 && greeting[4] == 10, "a greeting: {:?}", &greeting[..n]);
            }
            drop(check);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Wrong passwords for a `users` entry: refused by the sidecar, the upstream saw nothing.
        for _ in 0..5 {
            let wrong = e2e::opts(tunnel.sidecar.port(), Some(DATABASE)).pass(Some("wrong-pw-1"));
            let refused = mysql_async::Conn::new(wrong).await.map(drop).expect_err("refused");
            assert!(refused.to_string().contains("Access denied"), "{refused}");
        }
        client.await.expect("the real client");
        // The greeting kept for the next client expires and is closed.
        tokio::time::sleep(sidecar::greetings::FRESH_FOR + Duration::from_secs(2)).await;
        let after = aborted_connects().await;
        assert!(after - before <= 2, "Aborted_connects rose by {}", after - before);
        println!("Aborted_connects: {before} -> {after}");
    })
    .await;
}
