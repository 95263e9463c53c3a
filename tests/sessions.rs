//! Session limits and clean ends: a quit session's upstream connection goes with it (its open
//! transaction rolled back), limits give error 1040 (the transport's sessions, the sidecar's
//! clients), and 1,000 concurrent clients all work and leave nothing behind. Each over a
//! stream and over requests.

use std::time::Duration;

use e2e::processes::{Proc, free_port, wait_port};
use e2e::{
    Carrier, DATABASE, TOKEN, Tunnel, direct, mysql_port, on_both_carriers, opts, sidecar_yaml,
    within,
};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// Concurrent clients in the big test.
const CLIENTS: u64 = 1000;

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

on_both_carriers!(a_quit_session_leaves_no_connection_and_no_open_transaction);
async fn a_quit_session_leaves_no_connection_and_no_open_transaction(carrier: Carrier) {
    within(60, async {
        let tunnel = Tunnel::start_on(carrier).await;
        let table = format!("quit_probe_{}", carrier.name());
        let mut d = direct().await;
        d.query_drop(format!(
            "CREATE TABLE IF NOT EXISTS {table} (id INT PRIMARY KEY) ENGINE=InnoDB"
        ))
        .await
        .expect("create");
        let mut t = tunnel.connect().await;
        let id: u64 = t.query_first("SELECT CONNECTION_ID()").await.expect("id").unwrap_or(0);
        t.query_drop("BEGIN").await.expect("begin");
        t.query_drop(format!("INSERT INTO {table} VALUES (1)")).await.expect("insert");
        t.disconnect().await.expect("quit");
        let left = wait_until_gone(&mut d, &[id], 10).await;
        assert!(left.is_empty(), "the upstream connection ends with its session");
        let rows: Option<u64> =
            d.query_first(format!("SELECT COUNT(*) FROM {table}")).await.expect("n");
        assert_eq!(rows, Some(0), "the open transaction was rolled back");
        d.query_drop(format!("DROP TABLE {table}")).await.expect("drop");
    })
    .await;
}

on_both_carriers!(too_many_sessions_is_error_1040);
async fn too_many_sessions_is_error_1040(carrier: Carrier) {
    within(60, async {
        let transport = format!("{}max_sessions: 2\n", e2e::transport_yaml(mysql_port()));
        let tunnel =
            Tunnel::start_custom(&transport, |url| carrier.sidecar(&sidecar_yaml(url, TOKEN)))
                .await;
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

on_both_carriers!(beyond_max_clients_the_sidecar_answers_1040_and_frees_up);
async fn beyond_max_clients_the_sidecar_answers_1040_and_frees_up(carrier: Carrier) {
    within(60, async {
        let tunnel = Tunnel::start_custom(&e2e::transport_yaml(mysql_port()), |url| {
            format!("{}max_clients: 2\n", carrier.sidecar(&sidecar_yaml(url, TOKEN)))
        })
        .await;
        let a = tunnel.connect().await;
        let mut b = tunnel.connect().await;
        match Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!((e.code, e.message.as_str()), (1040, "Too many connections"))
            }
            other => panic!("expected 1040, got {:?}", other.map(|_| ())),
        }
        a.disconnect().await.expect("quit");
        // The slot is free once the sidecar has seen the quit.
        let mut c = None;
        for _ in 0..50 {
            if let Ok(conn) = Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await {
                c = Some(conn);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut c = c.expect("a client fits again");
        c.query_drop("DO 1").await.expect("works");
        b.query_drop("DO 1").await.expect("the others carry on");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_clients_work_and_leave_nothing_behind() {
    // One carrier after the other: 2,000 at once would pass the server's max_connections.
    for carrier in Carrier::BOTH {
        a_thousand_concurrent_clients_on(carrier).await;
    }
}

async fn a_thousand_concurrent_clients_on(carrier: Carrier) {
    within(300, async {
        // The real binaries, as deployed: one sidecar process, one transport process.
        let (transport_port, sidecar_port) = (free_port(), free_port());
        let transport_yaml = format!(
            "{}max_sessions: 1500\nmax_sessions_per_token: 1500\nmax_sessions_logging_in_per_token: 1500\nmax_streams_per_token: 1500\nmax_connections_per_client: 4096\n",
            e2e::transport_yaml(mysql_port())
                .replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"))
        );
        let sidecar_yaml = carrier
            .sidecar(&sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), TOKEN))
            .replace("127.0.0.1:0", &format!("127.0.0.1:{sidecar_port}"));
        let _transport = Proc::start("transport", &transport_yaml, &format!("thousand-{}", carrier.name()));
        wait_port(transport_port).await;
        let _sidecar = Proc::start(
            "sidecar",
            &format!("{sidecar_yaml}handshake_timeout: 60s\nmax_clients: 1100\n"),
            &format!("thousand-{}", carrier.name()),
        );
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
        assert!(left.is_empty(), "{}: {} upstream connections left after quit", carrier.name(), left.len());
    })
    .await;
}

on_both_carriers!(each_token_has_its_own_session_limit);
async fn each_token_has_its_own_session_limit(carrier: Carrier) {
    within(60, async {
        let transport = format!(
            "{}max_sessions_per_token: 1\n",
            e2e::transport_yaml(mysql_port()).replace(
                &format!("tokens: [{TOKEN}]"),
                &format!("tokens: [{TOKEN}, other-Team-7Wc4Vb9Nm2Kx6Lp3Zq]")
            )
        );
        let tunnel =
            Tunnel::start_custom(&transport, |url| carrier.sidecar(&sidecar_yaml(url, TOKEN)))
                .await;
        let other = Tunnel::start_sidecar(
            &carrier.sidecar(&sidecar_yaml(
                &format!("http://{}/", tunnel.transport),
                "other-Team-7Wc4Vb9Nm2Kx6Lp3Zq",
            )),
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
