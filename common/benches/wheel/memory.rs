//! Memory per timer: each structure alone in a fresh child process, its RSS growth.

use crate::structures::run;
use crate::workload::{Kind, Timer, Workload, rss_kib};

/// Child process: every phase on one structure, alone in a fresh process; prints its RSS
/// growth per timer after inserting and at the peak, over the RSS with the workload in memory.
pub fn child(kind: Kind, n: usize) {
    let w = Workload::new(n);
    let (base, _) = rss_kib();
    let mut t = Timer::new(false);
    t.rss = true;
    run(kind, &w, &mut t);
    let per_timer = |kib: f64| (kib - base) * 1024.0 / n as f64;
    println!("{} {}", per_timer(t.rss_after_insert), per_timer(rss_kib().1));
}

pub fn rss_of(kind: Kind, n: usize) -> Option<(f64, f64)> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new(exe)
        .args(["--child", &format!("{kind:?}"), &n.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace().filter_map(|v| v.parse().ok());
    Some((it.next()?, it.next()?))
}
