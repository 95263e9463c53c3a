//! Connections end in kind: a client that quits is a COM_QUIT upstream; one that hangs up
//! without it, or whose session expires (its sidecar died), ends the upstream connection
//! without one, so the server counts an aborted client (`Aborted_clients`) through the tunnel
//! as it does directly, over a stream and over requests. One test in this binary: the server's
//! counter is global.

use std::time::{Duration, Instant};

use e2e::processes::ProcTunnel;
use e2e::raw::RawClient;
use e2e::{Carrier, DATABASE, PASSWORD, Tunnel, USER, direct, mysql_port, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// The server's `Aborted_clients` (asked on a connection kept for the whole test: one
/// dropped without COM_QUIT would count itself).
async fn aborted_clients(d: &mut Conn) -> u64 {
    let row: Option<(String, u64)> =
        d.query_first("SHOW GLOBAL STATUS LIKE 'Aborted_clients'").await.expect("status");
    row.map_or(0, |r| r.1)
}

/// Waits until thread `id` is gone from the server, at most `limit`.
async fn thread_gone(d: &mut Conn, id: u32, limit: Duration) {
    let start = Instant::now();
    loop {
        let n: Option<u64> = d
            .exec_first("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", (id,))
            .await
            .expect("processlist");
        if n == Some(0) {
            return;
        }
        assert!(start.elapsed() < limit, "thread {id} is still there");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Logs in at `port`, then `ends` the connection; answers how much `Aborted_clients` moved.
async fn aborted_by(d: &mut Conn, port: u16, quit: bool) -> u64 {
    let before = aborted_clients(d).await;
    let mut c = RawClient::login(port, USER, PASSWORD, DATABASE).await;
    let thread = c.greeting_connection_id();
    if quit {
        c.write_command(&[common::mysql::command::QUIT]).await;
    }
    drop(c);
    thread_gone(d, thread, Duration::from_secs(10)).await;
    aborted_clients(d).await - before
}

#[tokio::test]
async fn aborted_clients_move_through_the_tunnel_as_directly() {
    within(120, async {
        let d = &mut direct().await;
        hang_up_and_quit(d, mysql_port(), "direct").await;
        // One carrier after the other: the counter is the server's.
        for carrier in Carrier::BOTH {
            let tunnel = Tunnel::start_on(carrier).await;
            hang_up_and_quit(d, tunnel.sidecar.port(), carrier.name()).await;
            // A session whose sidecar died expires: an aborted client too.
            let mut t = ProcTunnel::start_on(
                carrier,
                "closes",
                |t| t.replace("session_timeout: 30s", "session_timeout: 2s\npark_timeout: 0s"),
                |s| s,
            )
            .await;
            let before = aborted_clients(d).await;
            let c = RawClient::login(t.sidecar_port, USER, PASSWORD, DATABASE).await;
            let thread = c.greeting_connection_id();
            t.sidecar.kill();
            thread_gone(d, thread, Duration::from_secs(10)).await;
            let moved = aborted_clients(d).await - before;
            assert_eq!(moved, 1, "{}: an expired session is an aborted client", carrier.name());
            drop((c, tunnel));
        }
    })
    .await;
}

/// A hang-up at `port` moves `Aborted_clients` by one, a quit does not.
async fn hang_up_and_quit(d: &mut Conn, port: u16, path: &str) {
    assert_eq!(aborted_by(d, port, false).await, 1, "{path}: a hang-up is an aborted client");
    assert_eq!(aborted_by(d, port, true).await, 0, "{path}: a quit is not");
}
