//! Resumable uploads: a statement or a LOAD DATA LOCAL file piece whose connection breaks
//! mid-body continues from the byte the transport holds, so statements of 1–4 MB get through
//! a link cut every 2–400 KB, on both carriers, exactly once. Each run's cuts come from a seed
//! it prints (`SQLTUNNEL_FAULT_SEED` replays it).

use std::sync::atomic::Ordering;

use e2e::faults::{FaultPlan, FaultProxy};
use e2e::{DATABASE, TOKEN, Tunnel, direct, mysql_port, opts, transport_yaml, within};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// The seed: `SQLTUNNEL_FAULT_SEED`, else drawn now.
fn seed() -> u64 {
    std::env::var("SQLTUNNEL_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    })
}

/// Cuts every 2–400 KB of requests and of answers, half resets.
fn plan(seed: u64) -> FaultPlan {
    FaultPlan {
        down_cut: (2_000, 400_000),
        up_cut: (2_000, 400_000),
        ..FaultPlan::cuts(seed, 1, 1)
    }
}

/// A tunnel whose sidecar reaches its transport through `proxy` (made on the transport's
/// port), on the carrier `stream` names.
async fn faulted_tunnel(seed: u64, stream: bool) -> (Tunnel, FaultProxy) {
    let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let proxy = FaultProxy::start(listener.local_addr().expect("addr"), plan(seed)).await;
    let transport = transport_yaml(mysql_port())
        .replace("session_timeout: 30s\n", "session_timeout: 60s\nheartbeat_interval: 1s\n");
    let carrier = if stream { "on" } else { "off" };
    let sidecar = format!(
        "listen: 127.0.0.1:0\ntransport:\n  url: http://127.0.0.1:{}/\n  token: {TOKEN}\n  connect_timeout: 2s\n  stream: {carrier}\n",
        proxy.port
    );
    proxy.arm(false);
    let tunnel = Tunnel::start_with(listener, &transport, &sidecar).await;
    (tunnel, proxy)
}

/// Random bytes of `len`, and their CRC-32 as MariaDB's `CRC32()` gives it.
fn blob(rng: &mut SmallRng, len: usize) -> (Vec<u8>, u32) {
    let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
    let crc = crc32fast::hash(&bytes);
    (bytes, crc)
}

async fn uploads_survive_cuts(stream: bool) {
    let seed = seed();
    let carrier = if stream { "stream" } else { "requests" };
    println!("uploads over {carrier}: seed {seed} (SQLTUNNEL_FAULT_SEED={seed} replays it)");
    let (tunnel, proxy) = faulted_tunnel(seed, stream).await;
    let table = format!("uploads_{}_{seed:x}", &carrier[..1]);
    let mut d = direct().await;
    d.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.expect("drop");
    d.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY, b LONGBLOB)"))
        .await
        .expect("create");
    let dir = std::env::temp_dir().join(format!("sqltunnel-uploads-{table}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("rows.csv");
    let handler = mysql_async::WhiteListFsHandler::new(&[&file][..]);
    let opts =
        Opts::from(opts(tunnel.sidecar.port(), Some(DATABASE)).local_infile_handler(Some(handler)));
    let mut c = Conn::new(opts).await.expect("login");
    proxy.arm(true);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut sent = Vec::new();
    for id in 0..6u32 {
        let len = rng.random_range(1_000_000..4_000_000);
        let (bytes, crc) = blob(&mut rng, len);
        // Binary (prepared) and text (a hex literal, twice the size) statements.
        let outcome = if id % 3 == 2 {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            c.query_drop(format!("INSERT INTO {table} VALUES ({id}, X'{hex}')")).await
        } else {
            c.exec_drop(format!("INSERT INTO {table} VALUES (?, ?)"), (id, bytes.clone())).await
        };
        outcome
            .unwrap_or_else(|e| panic!("seed {seed}: insert {id} of {} bytes: {e}", bytes.len()));
        sent.push((id, bytes.len() as u64, crc));
    }
    // A 3 MB file, loaded in pieces the sidecar sends as they are read.
    let lines: String = (0..60_000).map(|i| format!("{},{:040x}\n", 1_000 + i, i)).collect();
    std::fs::write(&file, &lines).expect("file");
    c.query_drop(format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE {table} FIELDS TERMINATED BY ','",
        file.display()
    ))
    .await
    .unwrap_or_else(|e| panic!("seed {seed}: load data: {e}"));
    assert_eq!(c.affected_rows(), 60_000, "seed {seed}: every line loaded once");
    proxy.arm(false);
    let cuts = proxy.counts.cuts();
    let rows: Vec<(u32, u64, u32)> = d
        .query(format!("SELECT id, LENGTH(b), CRC32(b) FROM {table} WHERE id < 1000 ORDER BY id"))
        .await
        .expect("read back");
    assert_eq!(rows, sent, "seed {seed}: each blob there once, whole");
    let loaded: Option<u64> = d
        .query_first(format!("SELECT COUNT(*) FROM {table} WHERE id >= 1000"))
        .await
        .expect("count");
    assert_eq!(loaded, Some(60_000), "seed {seed}");
    println!(
        "uploads over {carrier}: 6 blobs and a 3 MB file through {cuts} cuts ({} connections)",
        proxy.counts.connections.load(Ordering::Relaxed)
    );
    assert!(cuts >= 10, "seed {seed}: the link was cut often ({cuts})");
    c.disconnect().await.expect("quit");
    d.query_drop(format!("DROP TABLE {table}")).await.expect("drop");
    drop(std::fs::remove_dir_all(&dir));
    drop(tunnel);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_statements_and_files_get_through_a_link_cut_every_few_hundred_kilobytes_over_requests()
 {
    within(240, uploads_survive_cuts(false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_statements_and_files_get_through_a_link_cut_every_few_hundred_kilobytes_over_a_stream()
 {
    within(240, uploads_survive_cuts(true)).await;
}
