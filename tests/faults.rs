//! Seeded random faults between the sidecar and the transport: connections cut at random byte
//! offsets in either direction (resets and closes), pieces stalled, while clients run a mixed
//! workload. Every answer must be the server's, every acknowledged write there exactly once,
//! and no client may see an error: the transport holds every session throughout. The seed is
//! printed; `SQLTUNNEL_FAULT_SEED` replays one. `scripts/bench.sh --faults` runs a long pass.

use e2e::fault_run::{RunPlan, run};
use e2e::faults::FaultPlan;
use e2e::within;

/// The seed: `SQLTUNNEL_FAULT_SEED`, else drawn now.
fn seed() -> u64 {
    std::env::var("SQLTUNNEL_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    })
}

async fn faulted_run(compressed: bool, passthrough: bool, stream: bool) {
    let seed = seed();
    if let Ok(level) = std::env::var("SQLTUNNEL_TEST_LOG") {
        let config = common::telemetry::LogConfig { level, ..Default::default() };
        drop(common::telemetry::init(&config));
    }
    println!("fault run seed {seed} (SQLTUNNEL_FAULT_SEED={seed} replays it)");
    let faults = FaultPlan::for_run(seed, compressed);
    let plan = RunPlan {
        faults,
        clients: env_or("SQLTUNNEL_FAULT_CLIENTS", 4),
        operations: env_or("SQLTUNNEL_FAULT_OPS", 250),
        compressed,
        passthrough,
        stream,
    };
    let report = within(240, run(plan)).await;
    println!("{}: {}", plan.describe(), report.summary(seed));
    assert!(report.cuts > 20, "the run was cut often: {}", report.summary(seed));
    assert_eq!(report.failures(), "", "{}", report.summary(seed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_neither_garble_nor_lose_nor_fail() {
    faulted_run(false, true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_of_compressed_answers_with_listed_logins() {
    faulted_run(true, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_of_streams_neither_garble_nor_lose_nor_fail() {
    faulted_run(false, true, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_of_compressed_streams_with_listed_logins() {
    faulted_run(true, false, true).await;
}

/// A number from the environment, else `default`.
fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
