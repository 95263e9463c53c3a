//! Connection set-up benchmark: connect, `SELECT 1`, quit, one after another, directly and
//! through the tunnel (whose sidecar prepares each new session's greeting ahead).
//! Usage: `cargo bench -p e2e --bench connect -- DIRECT_PORT TUNNEL_PORT [ROUNDS]`.

use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

async fn one(port: u16) -> Duration {
    let start = Instant::now();
    let mut conn = Conn::new(e2e::opts(port, Some(e2e::DATABASE))).await.expect("connect");
    let _: Option<u8> = conn.query_first("SELECT 1").await.expect("select");
    conn.disconnect().await.expect("quit");
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let (Some(direct), Some(tunnel)) =
        (args.first().and_then(|a| a.parse().ok()), args.get(1).and_then(|a| a.parse().ok()))
    else {
        eprintln!("usage: connect DIRECT_PORT TUNNEL_PORT [ROUNDS]");
        return;
    };
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200);
    // Warm up both paths (and park a connection in the tunnel's pool).
    one(direct).await;
    one(tunnel).await;
    let (mut d, mut t) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        d.push(one(direct).await);
        t.push(one(tunnel).await);
    }
    let (dm, tm) = (median(d), median(t));
    println!(
        "connect + SELECT 1 + quit, median of {rounds}: direct {:.0} us, tunnel {:.0} us, ratio {:.2}",
        dm.as_secs_f64() * 1e6,
        tm.as_secs_f64() * 1e6,
        tm.as_secs_f64() / dm.as_secs_f64()
    );
}
