//! The upstream pool: a reused connection carries no state from its previous session, idle
//! connections are reaped, and 1,000 concurrent clients all work and leave nothing behind.

use std::time::Duration;

use e2e::processes::{Proc, free_port, wait_port};
use e2e::{DATABASE, TOKEN, Tunnel, direct, mysql_port, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// Concurrent clients in the big test.
const CLIENTS: u64 = 1000;

/// A tunnel whose transport has `pool` settings. Parked connections exist only on the emulated
/// path (`relay: false`): a relayed login belongs to its client, and is never handed to another.
async fn pooled_tunnel(pool: &str) -> Tunnel {
    let transport = format!("{}pool:\n{pool}", e2e::transport_yaml(mysql_port()));
    Tunnel::start_custom(&transport, |url| format!("{}relay: false\n", sidecar_yaml(url, TOKEN)))
        .await
}

async fn processlist(d: &mut Conn) -> Vec<u64> {
    d.query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'app'")
        .await
        .expect("processlist")
}

async fn wait_until_gone(d: &mut Conn, ids: &[u64], secs: u64) -> Vec<u64> {
    let mut left = Vec::new();
    for _ in 0..secs * 5 {
        let now = processlist(d).await;
        left = ids.iter().copied().filter(|id| now.contains(id)).collect();
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    left
}

#[tokio::test]
async fn a_reused_connection_carries_no_session_state() {
    within(60, async {
        let tunnel = pooled_tunnel("  idle_timeout: 30s\n").await;
        let mut first = tunnel.connect().await;
        let id: u64 = first.query_first("SELECT CONNECTION_ID()").await.expect("id").unwrap_or(0);
        first
            .query_drop("CREATE TABLE IF NOT EXISTS pool_probe (id INT PRIMARY KEY) ENGINE=InnoDB")
            .await
            .expect("create");
        first
            .query_drop("SET @leak = 'secret', SESSION sql_mode = 'ANSI_QUOTES'")
            .await
            .expect("vars");
        first.query_drop("CREATE TEMPORARY TABLE leak_tmp (x INT)").await.expect("temp");
        first.query_drop("USE mysql").await.expect("use");
        first.query_drop("BEGIN").await.expect("begin");
        first.query_drop("INSERT INTO tunnel_test.pool_probe VALUES (1)").await.expect("insert");
        first.disconnect().await.expect("quit");
        tokio::time::sleep(Duration::from_millis(500)).await;

        let mut second = tunnel.connect().await;
        let id2: u64 = second.query_first("SELECT CONNECTION_ID()").await.expect("id").unwrap_or(0);
        assert_eq!(id, id2, "the parked connection was reused");
        let state: Option<(Option<String>, String, Option<String>)> =
            second.query_first("SELECT @leak, @@sql_mode, DATABASE()").await.expect("state");
        let direct_mode: Option<String> =
            direct().await.query_first("SELECT @@sql_mode").await.expect("mode");
        assert_eq!(state, Some((None, direct_mode.unwrap_or_default(), Some(DATABASE.to_owned()))));
        let tmp = second.query_drop("SELECT * FROM leak_tmp").await;
        assert!(tmp.is_err(), "temporary table gone");
        let rows: Option<u64> =
            second.query_first("SELECT COUNT(*) FROM pool_probe").await.expect("count");
        assert_eq!(rows, Some(0), "the open transaction was rolled back");
        let in_trans = second.last_ok_packet().map(|ok| ok.status_flags().bits() & 1);
        assert_eq!(in_trans, Some(0));
        second.query_drop("DROP TABLE pool_probe").await.expect("drop");
    })
    .await;
}

#[tokio::test]
async fn idle_connections_are_reaped_after_idle_timeout() {
    within(60, async {
        let tunnel = pooled_tunnel("  idle_timeout: 1s\n").await;
        let mut d = direct().await;
        let mut t = tunnel.connect().await;
        let id: u64 = t.query_first("SELECT CONNECTION_ID()").await.expect("id").unwrap_or(0);
        t.disconnect().await.expect("quit");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(processlist(&mut d).await.contains(&id), "parked, still connected");
        let left = wait_until_gone(&mut d, &[id], 10).await;
        assert!(left.is_empty(), "reaped after idle_timeout");
    })
    .await;
}

#[tokio::test]
async fn too_many_sessions_is_error_1040() {
    within(60, async {
        let transport = format!("{}pool:\n  max_sessions: 2\n", e2e::transport_yaml(mysql_port()));
        let tunnel = Tunnel::start_custom(&transport, |url| sidecar_yaml(url, TOKEN)).await;
        let _a = tunnel.connect().await;
        let _b = tunnel.connect().await;
        match Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!((e.code, e.message.as_str()), (1040, "Too many connections"))
            }
            other => panic!("expected 1040, got {:?}", other.map(|_| ())),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_clients_work_and_leave_nothing_behind() {
    within(300, async {
        // The real binaries, as deployed: one sidecar process, one transport process.
        let (transport_port, sidecar_port) = (free_port(), free_port());
        let transport_yaml = format!(
            "{}pool:\n  idle_timeout: 1s\n  max_idle_per_key: 16\n  max_sessions: 1500\n  max_sessions_per_token: 1500\n",
            e2e::transport_yaml(mysql_port())
                .replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"))
        );
        let sidecar_yaml = sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), TOKEN)
            .replace("127.0.0.1:0", &format!("127.0.0.1:{sidecar_port}"));
        let _transport = Proc::start("transport", &transport_yaml, "thousand");
        wait_port(transport_port).await;
        let _sidecar =
            Proc::start("sidecar", &format!("{sidecar_yaml}handshake_timeout: 60s\n"), "thousand");
        wait_port(sidecar_port).await;
        let mut tasks = Vec::new();
        for i in 0..CLIENTS {
            tasks.push(tokio::spawn(async move {
                let mut conn =
                    Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("connect");
                let got: Option<u64> =
                    conn.query_first(format!("SELECT {i} + 0")).await.expect("query");
                assert_eq!(got, Some(i));
                let id: u64 =
                    conn.query_first("SELECT CONNECTION_ID()").await.expect("id").unwrap_or(0);
                (conn, id)
            }));
        }
        let mut conns = Vec::new();
        for t in tasks {
            conns.push(t.await.expect("client task"));
        }
        let ids: Vec<u64> = conns.iter().map(|(_, id)| *id).collect();
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len() as u64, CLIENTS, "every session has its own upstream connection");
        for (conn, _) in conns {
            conn.disconnect().await.expect("quit");
        }
        let mut d = direct().await;
        let left = wait_until_gone(&mut d, &ids, 30).await;
        assert!(
            left.is_empty(),
            "{} upstream connections left after quit + idle_timeout",
            left.len()
        );
    })
    .await;
}

#[tokio::test]
async fn each_token_has_its_own_session_limit() {
    within(60, async {
        let transport = format!(
            "{}pool:\n  max_sessions_per_token: 1\n",
            e2e::transport_yaml(mysql_port()).replace(
                &format!("tokens: [{TOKEN}]"),
                &format!("tokens: [{TOKEN}, other-team-token]")
            )
        );
        let tunnel = Tunnel::start_custom(&transport, |url| sidecar_yaml(url, TOKEN)).await;
        let other = Tunnel::start_sidecar(
            &sidecar_yaml(&format!("http://{}/", tunnel.transport), "other-team-token"),
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
        let _first = tunnel.connect().await;
        match Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1040),
            other => panic!("expected 1040, got {:?}", other.map(|_| ())),
        }
        let mut theirs = Conn::new(opts(other.port(), Some(DATABASE)))
            .await
            .expect("another token still has room");
        let one: Option<u8> = theirs.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
    })
    .await;
}
