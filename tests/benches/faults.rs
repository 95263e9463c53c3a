//! The long fault run: the seeded random fault workload of `tests/faults.rs` (cuts at random
//! byte offsets in both directions, resets and closes, stalls) with many more operations, with
//! and without zstd answers, over requests and over streams. Prints operations, cuts, stalls, client errors, garbled answers,
//! writes lost or doubled, and this process's peak and final resident memory (transport,
//! sidecar and clients run in it). Exits non-zero when an invariant broke.
//! Usage: `cargo bench -p e2e --bench faults -- [OPERATIONS_PER_CLIENT] [SEED]` (MariaDB at
//! SQLTUNNEL_TEST_MYSQL_PORT).

use e2e::fault_run::{RunPlan, run};
use e2e::faults::FaultPlan;
use e2e::processes::status_kib;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let operations = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_500);
    let seed = args.next().and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    println!("fault run: 4 clients x {operations} operations, seed {seed}");
    let mut broken = false;
    let runs =
        [(false, true, false), (true, false, false), (false, true, true), (true, false, true)];
    for (compressed, passthrough, stream) in runs {
        let faults = FaultPlan::for_run(seed, compressed);
        let plan = RunPlan { faults, clients: 4, operations, compressed, passthrough, stream };
        let report = run(plan).await;
        println!("{}: {}", plan.describe(), report.summary(seed));
        println!(
            "  resident now {} KiB, peak so far {} KiB",
            status_kib("self", "VmRSS:").unwrap_or(0),
            status_kib("self", "VmHWM:").unwrap_or(0)
        );
        let failures = report.failures();
        if !failures.is_empty() {
            println!("{failures}");
            broken = true;
        }
    }
    println!(
        "this process (transport, sidecar and clients): peak RSS {} KiB, final RSS {} KiB",
        status_kib("self", "VmHWM:").unwrap_or(0),
        status_kib("self", "VmRSS:").unwrap_or(0)
    );
    if broken {
        std::process::exit(1);
    }
}
