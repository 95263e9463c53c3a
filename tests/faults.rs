//! Seeded random faults between the sidecar and the transport: connections cut at random byte
//! offsets in either direction (resets and closes), pieces stalled, while four mysql_async
//! clients (compressed connections or not) and a PyMySQL client run a mixed workload. Every
//! answer must be the server's, every acknowledged write there exactly once, and no client may
//! see an error: the transport holds every session throughout, and in two runs a new transport
//! takes the running one over every 2–5 s meanwhile. The seed is printed;
//! `SQLTUNNEL_FAULT_SEED` replays one, `SQLTUNNEL_FAULT_CUTS` (`ci`, `LO-HI` in KB, `none`)
//! sets where cuts fall, `SQLTUNNEL_FAULT_BLOBS=1` adds blobs to every run. In the plain
//! stream run, four sessions stay idle after 3 MB answers that nearly fill the identity's
//! share of the resume budget: the running steps' answers are kept by taking their room.
//! `scripts/bench.sh faults` runs a long pass.

use e2e::fault_run::{RunPlan, run};
use e2e::faults::FaultPlan;
use e2e::within;

/// Blob statements are cut every 2–400 KB of requests: an upload resumes from the offset the
/// transport holds (the others cut requests every 0.4–40 KB).
const BLOB_REQUEST_CUTS: (u64, u64) = (2_000, 400_000);

/// The seed: `SQLTUNNEL_FAULT_SEED`, else drawn now.
fn seed() -> u64 {
    std::env::var("SQLTUNNEL_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    })
}

/// How a run's tunnel is set up, and whether it writes blobs.
#[derive(Clone, Copy)]
struct Setup {
    compressed: bool,
    passthrough: bool,
    stream: bool,
    blobs: bool,
    take_overs: bool,
    /// Sessions left idle nearly fill the identity's resume share.
    idle: bool,
}

/// A take-over every 2–5 s, in the runs that have them.
const TAKE_OVER_EVERY: (u64, u64) = (2_000, 5_000);

async fn faulted_run(setup: Setup) {
    let Setup { compressed, passthrough, stream, blobs, take_overs, idle } = setup;
    let seed = seed();
    if let Ok(level) = std::env::var("SQLTUNNEL_TEST_LOG") {
        let config = common::telemetry::LogConfig { level, ..Default::default() };
        drop(common::telemetry::init(&config));
    }
    println!("fault run seed {seed} (SQLTUNNEL_FAULT_SEED={seed} replays it)");
    let faults = match std::env::var("SQLTUNNEL_FAULT_CUTS") {
        Ok(setting) => FaultPlan::from_setting(&setting, seed, compressed)
            .unwrap_or_else(|| panic!("SQLTUNNEL_FAULT_CUTS={setting}: `ci`, `LO-HI` or `none`")),
        Err(_) if blobs => {
            FaultPlan::for_run(seed, compressed).requests_cut_every(BLOB_REQUEST_CUTS)
        }
        Err(_) => FaultPlan::for_run(seed, compressed),
    };
    let plan = RunPlan {
        faults,
        clients: env_or("SQLTUNNEL_FAULT_CLIENTS", 4),
        // A blob run moves about 0.3 MB per operation, against 0.2 MB: fewer of them.
        operations: env_or("SQLTUNNEL_FAULT_OPS", if blobs { 100 } else { 250 }),
        python: true,
        blobs: blobs || std::env::var("SQLTUNNEL_FAULT_BLOBS").is_ok_and(|v| v == "1"),
        compressed,
        passthrough,
        stream,
        take_overs: take_overs.then_some(TAKE_OVER_EVERY),
        idle_sessions: if idle { 4 } else { 0 },
    };
    let report = within(400, run(plan)).await;
    println!("{} ({}): {}", plan.describe(), faults.describe(), report.summary(seed));
    println!("  operations by kind: {}", report.kinds());
    println!("  slowest by kind: {}", report.slowest());
    if faults.up_cut.0 != u64::MAX {
        assert!(report.cuts > 20, "the run was cut often: {}", report.summary(seed));
    }
    if take_overs {
        assert!(report.take_overs >= 3, "the run was taken over: {}", report.summary(seed));
    }
    assert_eq!(report.failures(), "", "{}", report.summary(seed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_neither_garble_nor_lose_nor_fail() {
    faulted_run(Setup {
        compressed: false,
        passthrough: true,
        stream: false,
        blobs: false,
        take_overs: false,
        idle: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_of_compressed_answers_with_listed_logins() {
    faulted_run(Setup {
        compressed: true,
        passthrough: false,
        stream: false,
        blobs: false,
        take_overs: false,
        idle: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_of_streams_neither_garble_nor_lose_nor_fail() {
    faulted_run(Setup {
        compressed: false,
        passthrough: true,
        stream: true,
        blobs: false,
        take_overs: false,
        idle: true,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_of_compressed_streams_with_listed_logins() {
    faulted_run(Setup {
        compressed: true,
        passthrough: false,
        stream: true,
        blobs: false,
        take_overs: false,
        idle: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_of_streams_with_blobs_of_one_to_four_mb_write_each_once() {
    faulted_run(Setup {
        compressed: false,
        passthrough: true,
        stream: true,
        blobs: true,
        take_overs: false,
        idle: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_and_take_overs_neither_garble_nor_lose_nor_fail() {
    let setup = Setup {
        compressed: false,
        passthrough: true,
        stream: false,
        blobs: false,
        take_overs: true,
        idle: false,
    };
    faulted_run(setup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_of_compressed_streams_and_take_overs() {
    let setup = Setup {
        compressed: true,
        passthrough: false,
        stream: true,
        blobs: false,
        take_overs: true,
        idle: false,
    };
    faulted_run(setup).await;
}

/// A number from the environment, else `default`.
fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
