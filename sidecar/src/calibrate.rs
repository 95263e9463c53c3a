//! A benchmark's yardstick (feature `calibrate`, never in a release): extra work of a known
//! size on each command's path, before its request is sent, so that a run can show what a
//! given number of instructions on that path costs in queries per second.

use std::sync::LazyLock;

/// Iterations per command, from `SQLTUNNEL_CALIBRATE_SPIN` (read once; 0 when unset).
static SPIN: LazyLock<u64> = LazyLock::new(|| {
    std::env::var("SQLTUNNEL_CALIBRATE_SPIN").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
});

/// Spins `SQLTUNNEL_CALIBRATE_SPIN` times: about six instructions each (callgrind), on a value
/// the optimizer cannot see through.
pub fn spin() {
    let mut sum = 0u64;
    for i in 0..*SPIN {
        sum = std::hint::black_box(sum.wrapping_add(i));
    }
    std::hint::black_box(sum);
}
