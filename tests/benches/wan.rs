//! The network bench: the shaping proxy (25 ms each way: a 50 ms round trip) between a direct
//! client and MariaDB, and the same proxy between the sidecar and the transport. Reports, direct
//! against tunnel, round trips per query, per new connection, per prepared execute, per LOAD
//! DATA LOCAL and per pipeline of 10 commands; round trips per PyMySQL `connect()`, the first
//! after the sidecar started (cold) and later ones (warm), over requests and over a stream; the
//! time of a DBeaver-like Connector/J connect sequence; and, at 20 Mbit/s, the time of a 1M-row
//! SELECT. Medians of interleaved rounds.
//! Usage: `cargo bench -p e2e --bench wan -- [ROUNDS] [connects]` (MariaDB at
//! SQLTUNNEL_TEST_MYSQL_PORT; `connects`: the PyMySQL connects alone).

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use e2e::processes::{Proc, free_port, wait_port};
use e2e::raw::RawClient;
use e2e::shaper::{Shape, Shaper, tunnel_through};
use e2e::{DATABASE, PASSWORD, TOKEN, Tunnel, USER, mysql_port, sidecar_yaml, transport_yaml};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// Delay each way.
const ONE_WAY: Duration = Duration::from_millis(25);
const RTT: f64 = 0.050;

/// A direct path and a tunnel, each through a shaper with `shape`; their MySQL ports.
struct Paths {
    direct: u16,
    tunnel: u16,
    _shapers: (Shaper, Shaper),
    _tunnel: Tunnel,
}

async fn paths(shape: Shape, sidecar_extra: &str) -> Paths {
    let db: SocketAddr = format!("127.0.0.1:{}", mysql_port()).parse().expect("addr");
    let direct = Shaper::start(db, shape).await;
    let (tunnel, link) = tunnel_through(shape, &transport_yaml(mysql_port()), sidecar_extra).await;
    Paths {
        direct: direct.port,
        tunnel: tunnel.sidecar.port(),
        _shapers: (direct, link),
        _tunnel: tunnel,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn timed<F: Future>(f: F) -> (f64, F::Output) {
    let start = Instant::now();
    let out = f.await;
    (start.elapsed().as_secs_f64(), out)
}

fn opts(port: u16, file: &str) -> mysql_async::OptsBuilder {
    let handler = mysql_async::WhiteListFsHandler::new(&[file][..]);
    e2e::opts(port, Some(DATABASE)).local_infile_handler(Some(handler))
}

/// Commands a pipelining client sends at once (MariaDB Connector/J's batches).
const PIPELINED: usize = 10;

/// Round trips of one run of each kind on `port`: query, new connection, prepared execute,
/// LOAD DATA LOCAL, a pipeline of [`PIPELINED`] commands.
async fn round_trips(port: u16, file: &str) -> [f64; 5] {
    let (connect, conn) = timed(Conn::new(opts(port, file))).await;
    let mut conn = conn.expect("connect");
    let (query, _) = timed(conn.query_drop("DO 1")).await;
    let stmt = conn.prep("SELECT ?").await.expect("prepare");
    let (execute, _) = timed(conn.exec_drop(&stmt, (1,))).await;
    let load = format!("LOAD DATA LOCAL INFILE '{file}' INTO TABLE wan_load");
    let (infile, loaded) = timed(conn.query_drop(load)).await;
    loaded.expect("load data");
    drop(conn.disconnect().await);
    let mut raw = RawClient::login(port, USER, PASSWORD, DATABASE).await;
    let commands = vec![b"\x03DO 1".to_vec(); PIPELINED];
    let (pipeline, ()) = timed(async {
        raw.write_pipeline(&commands).await;
        for _ in 0..PIPELINED {
            assert_eq!(raw.read().await[0], 0, "an OK");
        }
    })
    .await;
    [query / RTT, connect / RTT, execute / RTT, infile / RTT, pipeline / RTT]
}

/// Warm connects timed after the cold one in each round.
const WARM_CONNECTS: usize = 5;

/// Round trips of PyMySQL's `connect()` on `port` (login and setup commands, TLS off): the
/// first of a run, and the median of the [`WARM_CONNECTS`] after it.
async fn pymysql_connects(port: u16) -> (f64, f64) {
    let (port, count) = (port.to_string(), (WARM_CONNECTS + 1).to_string());
    let out = e2e::clients::python("pymysql_connect_timing.py", &[&port, &count]).await;
    let trips: Vec<f64> = out.lines().filter_map(|l| l.trim().parse::<f64>().ok()).collect();
    assert_eq!(trips.len(), WARM_CONNECTS + 1, "{out}");
    (trips[0] / RTT, median(trips[1..].iter().map(|s| s / RTT).collect()))
}

/// A transport and a sidecar as deployed, each a process (a runtime on its thread and its
/// shards), the sidecar reaching the transport through a shaper with `shape` on `carrier`
/// (its `transport.stream` line); the sidecar's port, and what to drop to stop them.
async fn processes(shape: Shape, carrier: &str) -> (u16, (Proc, Proc, Shaper)) {
    let (transport_port, sidecar_port) = (free_port(), free_port());
    let yaml =
        transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"));
    let tag = format!("wan-{}", carrier.trim().replace(": ", "-"));
    let transport = Proc::start("transport", &yaml, &tag);
    wait_port(transport_port).await;
    let shaper = Shaper::start(([127, 0, 0, 1], transport_port).into(), shape).await;
    let yaml = sidecar_yaml(&format!("http://127.0.0.1:{}/", shaper.port), TOKEN)
        .replace("127.0.0.1:0", &format!("127.0.0.1:{sidecar_port}"))
        .replace("  connect_timeout: 2s\n", &format!("  connect_timeout: 2s\n{carrier}"));
    let sidecar = Proc::start("sidecar", &yaml, &tag);
    // Its log, not a connection: one that left would give its greeting to the next client.
    sidecar.log_grows("sidecar listening", 0).await;
    (sidecar_port, (transport, sidecar, shaper))
}

/// PyMySQL's connects over each carrier, cold (a fresh sidecar and transport each round) and
/// warm, against the same directly. The halves run as processes here: in-process, the
/// sidecar's first shard would be this bench's runtime, whose tasks change threads.
async fn connects(shape: Shape, rounds: usize) {
    let db: SocketAddr = format!("127.0.0.1:{}", mysql_port()).parse().expect("addr");
    let direct = Shaper::start(db, shape).await;
    let carriers = ["  stream: off\n", "  stream: on\n"];
    let mut cold = vec![Vec::new(); 3];
    let mut warm = vec![Vec::new(); 3];
    for _ in 0..rounds {
        let (c, w) = pymysql_connects(direct.port).await;
        cold[0].push(c);
        warm[0].push(w);
        for (i, carrier) in carriers.iter().enumerate() {
            let (port, running) = processes(shape, carrier).await;
            let (c, w) = pymysql_connects(port).await;
            cold[i + 1].push(c);
            warm[i + 1].push(w);
            drop(running);
        }
    }
    let (cold, warm) = (cold.into_iter().map(median), warm.into_iter().map(median));
    for (way, (c, w)) in ["direct", "requests", "stream"].iter().zip(cold.zip(warm)) {
        println!("round trips per PyMySQL connect(), {way:<8} cold {c:>5.2} RT  warm {w:>5.2} RT");
    }
}

/// Seconds to read `SELECT seq FROM seq_1_to_1000000` to its end on `port`.
async fn million_rows(port: u16) -> f64 {
    let mut conn = Conn::new(e2e::opts(port, Some(DATABASE))).await.expect("connect");
    let (secs, rows) = timed(async {
        let mut result = conn.query_iter("SELECT seq FROM seq_1_to_1000000").await.expect("query");
        let mut rows = 0u64;
        while result.next().await.expect("row").is_some() {
            rows += 1;
        }
        rows
    })
    .await;
    assert_eq!(rows, 1_000_000);
    drop(conn.disconnect().await);
    secs
}

/// Milliseconds of the Connector/J connect sequence (median of `rounds`, in one JVM).
async fn connector_j(classpath: &str, port: u16, rounds: usize) -> f64 {
    let out =
        e2e::java::run(classpath, "ConnectTiming", &[&port.to_string(), &rounds.to_string()]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("milliseconds")
}

/// CPU seconds this process has used (user + system), from /proc.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks: f64 =
        fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    ticks / 100.0
}

fn line(what: &str, direct: f64, tunnel: f64, unit: &str) {
    println!(
        "{what:<44} direct {direct:>8.2} {unit:<4} tunnel {tunnel:>8.2} {unit:<4} tunnel/direct {:.2}",
        tunnel / direct
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(7);
    let shape = Shape { delay: ONE_WAY, bits_per_second: None };
    if args.get(1).is_some_and(|a| a == "connects") {
        println!("== PyMySQL connects: {} ms round trip, medians of {rounds}", RTT * 1e3);
        return connects(shape, rounds).await;
    }
    let file = std::env::temp_dir().join(format!("sqltunnel-wan-{}.csv", std::process::id()));
    let rows: String = (0..64).map(|i| format!("{i},row {i}\n")).collect();
    std::fs::write(&file, rows).expect("file");
    let file = file.to_string_lossy().into_owned();
    let mut setup = e2e::direct().await;
    setup.query_drop("CREATE TABLE IF NOT EXISTS wan_load (id INT, v TEXT)").await.expect("table");

    let p = paths(shape, "").await;
    println!(
        "== network bench: {} ms round trip through the shaping proxy, medians of {rounds}",
        RTT * 1e3
    );
    round_trips(p.direct, &file).await;
    round_trips(p.tunnel, &file).await;
    let (mut d, mut t) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        d.push(round_trips(p.direct, &file).await);
        t.push(round_trips(p.tunnel, &file).await);
    }
    let kinds = [
        "a query (DO 1)",
        "a new connection (mysql_async login)",
        "a prepared execute",
        "a LOAD DATA LOCAL (64 rows)",
        "a pipeline of 10 commands",
    ];
    for (i, kind) in kinds.iter().enumerate() {
        let dm = median(d.iter().map(|r| r[i]).collect());
        let tm = median(t.iter().map(|r| r[i]).collect());
        line(&format!("round trips per {kind}"), dm, tm, "RT");
    }
    setup.query_drop("DROP TABLE wan_load").await.expect("drop");

    connects(shape, rounds).await;

    let classpath = tokio::task::spawn_blocking(|| e2e::java::compile("ConnectTiming")).await;
    let classpath = classpath.expect("compile");
    let jd = connector_j(&classpath, p.direct, rounds).await;
    let jt = connector_j(&classpath, p.tunnel, rounds).await;
    line("Connector/J connect sequence", jd, jt, "ms");
    drop(p);

    let slow = Shape { delay: ONE_WAY, bits_per_second: Some(20_000_000) };
    let plain = paths(slow, "  compression: off\n").await;
    let zstd = paths(slow, "  compression: on\n").await;
    let (mut d, mut t, mut z) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds.min(3) {
        d.push(million_rows(plain.direct).await);
        t.push(million_rows(plain.tunnel).await);
        z.push(million_rows(zstd.tunnel).await);
    }
    let d = median(d);
    line("1M-row SELECT at 20 Mbit/s, no compression", d, median(t), "s");
    line("1M-row SELECT at 20 Mbit/s, zstd", d, median(z), "s");
    drop((plain, zstd));

    // What zstd costs where it gains nothing: loopback, no shaping; the CPU of this whole
    // process (client, sidecar, transport, proxy).
    let plain = paths(Shape::default(), "  compression: off\n").await;
    let zstd = paths(Shape::default(), "  compression: on\n").await;
    let (mut wall, mut cpu) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..rounds.min(5) {
        for (i, port) in [plain.tunnel, zstd.tunnel].into_iter().enumerate() {
            let before = cpu_seconds();
            wall[i].push(million_rows(port).await);
            cpu[i].push(cpu_seconds() - before);
        }
    }
    let [w0, w1] = wall.map(median);
    let [c0, c1] = cpu.map(median);
    println!(
        "loopback 1M-row SELECT through the tunnel: no compression {w0:.2} s ({c0:.2} s CPU), zstd {w1:.2} s ({c1:.2} s CPU): zstd costs {:.0} ns CPU per row",
        (c1 - c0) * 1e9 / 1e6
    );
}
