//! The long fault run: the seeded random fault workload of `tests/faults.rs` (cuts at random
//! byte offsets in both directions, resets and closes, stalls; four mysql_async clients,
//! compressed connections or not, and a PyMySQL client) with many more operations and blobs of
//! 1–4 MB, with and without zstd answers, over requests and over streams. Cuts fall every
//! 2–400 KB of requests and of answers (a tenth of that for zstd answers), or as
//! `SQLTUNNEL_FAULT_CUTS` says (`ci`: the test's ranges, `LO-HI` in KB, `none`);
//! `SQLTUNNEL_FAULT_BLOBS=0` leaves blobs out. Prints operations, blobs, cuts, stalls, client
//! errors, garbled answers, writes lost or doubled, and this process's peak and final resident
//! memory (transport, sidecar and the mysql_async clients run in it). Exits non-zero when an
//! invariant broke.
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
    let cuts = std::env::var("SQLTUNNEL_FAULT_CUTS").unwrap_or_else(|_| "2-400".into());
    let blobs = std::env::var("SQLTUNNEL_FAULT_BLOBS").map_or(true, |v| v != "0");
    println!(
        "fault run: 4 mysql_async clients and a PyMySQL one x {operations} operations, seed {seed}, cuts {cuts}, blobs {}",
        if blobs { "on" } else { "off" }
    );
    let mut broken = false;
    let runs =
        [(false, true, false), (true, false, false), (false, true, true), (true, false, true)];
    for (compressed, passthrough, stream) in runs {
        let Some(faults) = FaultPlan::from_setting(&cuts, seed, compressed) else {
            panic!("SQLTUNNEL_FAULT_CUTS={cuts}: `ci`, `LO-HI` (KB) or `none`");
        };
        let plan = RunPlan {
            faults,
            clients: 4,
            python: true,
            blobs,
            operations,
            compressed,
            passthrough,
            stream,
            take_overs: None,
            idle_sessions: 0,
        };
        let report = run(plan).await;
        println!("{} ({}): {}", plan.describe(), faults.describe(), report.summary(seed));
        println!("  operations by kind: {}", report.kinds());
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
