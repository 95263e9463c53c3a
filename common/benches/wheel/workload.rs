//! The workloads, the phase timer and what is measured (ns per operation, page faults, RSS).

use std::time::Instant;

/// Phases, in order.
pub const PHASES: [&str; 7] = [
    "insert",
    "reset later",
    "reset random",
    "cancel half",
    "expire rest",
    "keep-alive",
    "steady state",
];
/// Session timeout of the keep-alive phase, ms.
pub const TIMEOUT: u64 = 30_000;
/// Clock step of the keep-alive and steady-state phases (the reaper's tick), ms.
pub const STEP: u64 = 10;
/// Simulated length of the keep-alive phase, ms.
pub const KEEP_ALIVE_SPAN: u64 = 60_000;
/// Simulated length of the steady-state phase, ms.
pub const STEADY_SPAN: u64 = 30_000;

/// xorshift64*: deterministic, dependency-free.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn deadline_ms(&mut self) -> u64 {
        1_000 + self.next() % 599_001
    }
}

/// splitmix64 of (id, k): the k-th replacement deadline of a steady-state timer, the same
/// whatever order a structure fires its timers in.
pub fn rearm(id: u32, k: u32) -> u64 {
    let mut z = ((u64::from(id) << 32) | u64::from(k)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    1_000 + (z ^ (z >> 31)) % 59_001
}

pub struct Workload {
    pub first: Vec<u64>,
    pub later: Vec<u64>,
    pub random: Vec<u64>,
    /// Keep-alive: heartbeat period and phase of each session, ms (one read per session, as
    /// the reaper reads one timestamp per session).
    pub heartbeat: Vec<(u32, u32)>,
}

impl Workload {
    pub fn new(n: usize) -> Self {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let first: Vec<u64> = (0..n).map(|_| rng.deadline_ms()).collect();
        let later = first.iter().map(|d| d + 1 + rng.next() % 30_000).collect();
        let random = (0..n).map(|_| rng.deadline_ms()).collect();
        let heartbeat = (0..n)
            .map(|_| {
                let period = 1_000 + rng.next() % 4_001;
                (period as u32, (rng.next() % period) as u32)
            })
            .collect();
        Self { first, later, random, heartbeat }
    }

    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// When session `i` was last heard from at `t` (t ≥ 5 s).
    pub fn last_seen(&self, i: usize, t: u64) -> u64 {
        let (p, o) = self.heartbeat[i];
        let (p, o) = (u64::from(p), u64::from(o));
        t - (t - o) % p
    }

    /// The keep-alive phase starts here, every session having been heard from.
    pub fn keep_alive_start(&self) -> u64 {
        10_000
    }

    /// Initial deadline of steady-state timer `i`.
    pub fn steady_first(&self, i: usize) -> u64 {
        rearm(i as u32, u32::MAX)
    }
}

/// The three structures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Wheel,
    Heap,
    DelayQueue,
}

/// One structure's figures in one round: ns per op of each phase, operations of the two
/// simulated phases (the same for every structure), bytes per timer after inserting and at
/// the peak (where the structure can count them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    pub ns: [f64; 7],
    pub ops: [usize; 2],
    pub bytes: [f64; 2],
}

pub fn per_op(start: Instant, ops: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / ops.max(1) as f64
}

/// Minor page faults of this process so far (field 10 of /proc/self/stat).
pub fn minor_faults() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1.to_owned();
            after.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Times phases and, with `--faults`, counts the page faults each one takes.
/// With `rss`, it notes the RSS when the insert phase ends.
pub struct Timer {
    pub faults: bool,
    pub start: Instant,
    pub faults_at_start: u64,
    pub rss: bool,
    pub rss_after_insert: f64,
    /// Phases 1–5 only (for profiling).
    pub main_only: bool,
}

impl Timer {
    pub fn new(faults: bool) -> Self {
        Self {
            faults,
            start: Instant::now(),
            faults_at_start: 0,
            rss: false,
            rss_after_insert: 0.0,
            main_only: false,
        }
    }
    pub fn start(&mut self) {
        if self.faults {
            self.faults_at_start = minor_faults();
        }
        self.start = Instant::now();
    }
    pub fn stop(&mut self, kind: Kind, phase: usize, ops: usize) -> f64 {
        let ns = per_op(self.start, ops);
        if self.rss && phase == 0 {
            self.rss_after_insert = rss_kib().0;
        }
        if self.faults {
            let f = minor_faults() - self.faults_at_start;
            eprintln!("    {kind:?} {:<13} {f:>9} page faults ({:.3} per op)", PHASES[phase], {
                f as f64 / ops.max(1) as f64
            });
        }
        ns
    }
}

/// (VmRSS, VmHWM) of this process, KiB.
pub fn rss_kib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
