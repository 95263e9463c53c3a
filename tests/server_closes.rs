//! A server-side close of an idle connection (`KILL` from another connection, `wait_timeout`)
//! reaches the client through the tunnel as directly: in kind (MariaDB resets at
//! `wait_timeout`, closes after `KILL`) and at once, over a stream and over requests. How long
//! after the `KILL` the client's socket ends is printed for a connection killed right after its
//! last command and for one idle for a while, directly and through the tunnel; the bound
//! asserted is generous (a loaded machine must not fail it), the figures are what to read.

use std::time::{Duration, Instant};

use e2e::processes::ProcTunnel;
use e2e::raw::{CAPS, Ending, RawClient};
use e2e::{Carrier, DATABASE, PASSWORD, USER, mysql_port, on_both_carriers, opts, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// Longest time from a `KILL` to the end of the client's socket that passes.
const BOUND: Duration = Duration::from_secs(1);

/// A COM_QUERY packet payload.
fn query(sql: &str) -> Vec<u8> {
    [&[3u8][..], sql.as_bytes()].concat()
}

/// Logs in at `port`, sets a 1 s `wait_timeout` and stays idle: how the connection ends
/// within 4 s.
async fn ended_by_wait_timeout(port: u16) -> Ending {
    let (mut c, _) = RawClient::login_mariadb(port, USER, PASSWORD, DATABASE, CAPS, 0).await;
    let set = c.command_bytes(&query("SET SESSION wait_timeout = 1")).await;
    assert_eq!(set[4], 0, "OK");
    c.ending_within(Duration::from_secs(4)).await
}

/// Logs in at `port`, sends a command, stays idle for `idle`, and is killed by `killer`: how
/// its connection ends, and how long after the `KILL` was sent.
async fn ended_by_kill(port: u16, killer: &mut Conn, idle: Duration) -> (Ending, Duration) {
    let (mut victim, _) = RawClient::login_mariadb(port, USER, PASSWORD, DATABASE, CAPS, 0).await;
    let id = victim.greeting_connection_id();
    let ok = victim.command_until_eof(&query("DO 1")).await;
    assert_eq!(ok[0][0], 0, "OK");
    tokio::time::sleep(idle).await;
    let sent = Instant::now();
    killer.query_drop(format!("KILL {id}")).await.expect("KILL");
    let ending = victim.ending_within(Duration::from_secs(5)).await;
    (ending, sent.elapsed())
}

on_both_carriers!(a_server_side_close_of_an_idle_connection_reaches_the_client_in_kind_and_at_once);
async fn a_server_side_close_of_an_idle_connection_reaches_the_client_in_kind_and_at_once(
    carrier: Carrier,
) {
    within(90, async {
        // Passthrough: the upstream checks the login, as directly.
        let t = ProcTunnel::start_on(
            carrier,
            "server-closes",
            |t| t,
            |s| s[..s.find("users:").unwrap_or(s.len())].to_owned(),
        )
        .await;
        let (direct, tunnel) = (mysql_port(), t.sidecar_port);
        let way = carrier.name();
        let ending = ended_by_wait_timeout(direct).await;
        assert!(matches!(ending, Ending::Closed | Ending::Reset), "{ending:?}");
        assert_eq!(ended_by_wait_timeout(tunnel).await, ending, "{way}: wait_timeout");
        let mut killer = Conn::new(opts(direct, Some(DATABASE))).await.expect("killer");
        for idle in [Duration::ZERO, Duration::from_millis(300)] {
            let (ending, took_directly) = ended_by_kill(direct, &mut killer, idle).await;
            assert!(matches!(ending, Ending::Closed | Ending::Reset), "{ending:?}");
            let (through, took) = ended_by_kill(tunnel, &mut killer, idle).await;
            println!(
                "{way}: KILL {idle:?} after the last command: the client's socket ended {took:?} after it through the tunnel, {took_directly:?} directly"
            );
            assert_eq!(through, ending, "{way}: KILL after {idle:?}");
            assert!(took < BOUND, "{way}: KILL after {idle:?} reached the client {took:?} later");
        }
    })
    .await;
}
