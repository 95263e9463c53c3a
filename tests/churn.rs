//! No connection churn behind nginx: under steady load through the example config, neither
//! the sidecar → nginx side nor the nginx → transport side opens a new TCP connection (counted
//! by both binaries' metrics), past nginx's default of 1,000 requests per connection; behind
//! nginx's defaults (a connection per request) the transport says so in its log.

use e2e::http::metric;
use e2e::nginx::{Nginx, default_config, example_config};
use e2e::processes::{ProcTunnel, free_port};
use e2e::{DATABASE, opts, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// Client connections of the steady load.
const CLIENTS: usize = 4;
/// Queries each runs while counted: more than nginx's default `keepalive_requests` (1,000).
const QUERIES: u32 = 1_200;

/// The real binaries with nginx from `nginx_config` between them; the ports of the transport's
/// and the sidecar's metrics.
async fn behind_nginx(
    tag: &str,
    nginx_config: fn(u16, u16) -> String,
) -> (ProcTunnel, Nginx, u16, u16) {
    let (nginx_port, transport_metrics, sidecar_metrics) =
        (Nginx::port(), free_port(), free_port());
    let url = format!("  url: http://127.0.0.1:{nginx_port}/db-tunnel/\n");
    let tunnel = ProcTunnel::start(
        tag,
        |t| format!("{t}metrics_listen: 127.0.0.1:{transport_metrics}\n"),
        |s| {
            let s: String = s
                .lines()
                .map(|l| if l.starts_with("  url: ") { url.clone() } else { format!("{l}\n") })
                .collect();
            format!("{s}metrics_listen: 127.0.0.1:{sidecar_metrics}\n")
        },
    )
    .await;
    let nginx = Nginx::start(&nginx_config(tunnel.transport_port, nginx_port), nginx_port).await;
    (tunnel, nginx, transport_metrics, sidecar_metrics)
}

/// New connections so far: sidecar → nginx, nginx → transport.
async fn connections(transport_metrics: u16, sidecar_metrics: u16) -> (u64, u64) {
    let sidecar = metric(sidecar_metrics, None, "sqltunnel_sidecar_transport_connects_total").await;
    let transport =
        metric(transport_metrics, None, "sqltunnel_http_connections_accepted_total").await;
    (sidecar, transport)
}

/// Runs `queries` queries on each connection, all at once; gives the connections back.
async fn load(conns: Vec<Conn>, queries: u32) -> Vec<Conn> {
    let runs: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            tokio::spawn(async move {
                for i in 0..queries {
                    let v: Option<u32> = conn.exec_first("SELECT ?", (i,)).await.expect("query");
                    assert_eq!(v, Some(i));
                }
                conn
            })
        })
        .collect();
    let mut conns = Vec::new();
    for run in runs {
        conns.push(run.await.expect("load"));
    }
    conns
}

#[tokio::test]
async fn steady_load_through_the_example_config_opens_no_connection() {
    within(240, async {
        let (tunnel, _nginx, transport_metrics, sidecar_metrics) =
            behind_nginx("churn-example", |t, p| example_config(&[t], p)).await;
        let mut conns = Vec::new();
        for _ in 0..CLIENTS {
            conns.push(Conn::new(opts(tunnel.sidecar_port, Some(DATABASE))).await.expect("login"));
        }
        // Warm up: every connection of the steady state is opened here. The greeting prepared
        // after the last login is closed unused once stale (`FRESH_FOR`), on a connection of
        // its own when none is idle: that too happens before the count.
        let conns = load(conns, 50).await;
        tokio::time::sleep(sidecar::greetings::FRESH_FOR + std::time::Duration::from_secs(1)).await;
        let conns = load(conns, 50).await;
        let before = connections(transport_metrics, sidecar_metrics).await;
        assert!(before.0 >= 1 && before.1 >= 1, "the metrics count connections: {before:?}");
        let conns = load(conns, QUERIES).await;
        let after = connections(transport_metrics, sidecar_metrics).await;
        assert_eq!(
            after,
            before,
            "new connections (sidecar → nginx, nginx → transport) during {} steady queries",
            CLIENTS as u32 * QUERIES
        );
        drop(conns);
    })
    .await;
}

#[tokio::test]
async fn nginx_defaults_open_a_connection_per_command_and_the_transport_says_so() {
    within(120, async {
        let (tunnel, _nginx, transport_metrics, sidecar_metrics) =
            behind_nginx("churn-defaults", |t, p| default_config(t, p, "")).await;
        let conns =
            vec![Conn::new(opts(tunnel.sidecar_port, Some(DATABASE))).await.expect("login")];
        let before = connections(transport_metrics, sidecar_metrics).await;
        let conns = load(conns, 300).await;
        let after = connections(transport_metrics, sidecar_metrics).await;
        assert!(
            after.1 - before.1 >= 300,
            "one nginx → transport connection per command: {before:?} {after:?}"
        );
        let log = std::fs::read_to_string(&tunnel.transport.log).unwrap_or_default();
        let warnings = log.matches("a proxy in front opens a connection per command").count();
        assert_eq!(warnings, 1, "warned once: {log}");
        drop(conns);
    })
    .await;
}
