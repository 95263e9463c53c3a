//! Timer benchmark: the same workloads on `common::wheel::Wheel`, on tokio-util's `DelayQueue`
//! and on a `BinaryHeap` with lazy cancellation, in one run, at 1 ms ticks.
//!
//! - Phases 1–5 (one structure, in order): N timers due uniformly in [1 s, 600 s]: insert
//!   all, reset each once later (keep-alive), reset each once to a random deadline, cancel
//!   half, expire the rest (ns per fired timer; the wheel polls at each `next_deadline`, the
//!   others drain once after the clock jumps).
//! - Keep-alive (the reaper): N sessions, each heard from every 1–5 s; a timer is due 30 s
//!   after the session was last heard from and, when it comes due, is filed again at the
//!   session's latest heartbeat + 30 s. The clock moves in 10 ms steps for 60 s; ns per
//!   fired-and-refiled timer.
//! - Steady state: N timers due in [1 s, 60 s]; every 10 ms step fires what is due and files a
//!   replacement for each, and cancels (and replaces) as many random timers: constant
//!   population, 30 s; ns per operation (insert, fire or cancel).
//!
//! Every size gets a warm-up round, then rounds in alternating order (all six orders of the
//! three structures in turn); it prints medians, the DelayQueue ÷ wheel ratio, and bytes per
//! timer (the wheel's own count, and RSS growth of each structure in a fresh child process).
//!
//! Run: `cargo bench -p sqltunnel-common --bench wheel -- [N...] [--rounds R] [--no-heap]
//! [--only Wheel|Heap|DelayQueue] [--no-rss] [--faults] [--main-only]` (default N: 10^4, 10^6,
//! 10^7; R: 5, or 3 above 10^6). `--faults` prints page faults per phase; `--main-only` stops
//! after phase 5 (for profiling).

mod memory;
mod structures;
mod workload;

use memory::{child, rss_of};
use structures::run;
use workload::{Kind, PHASES, Sample, Timer, Workload};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

/// Every order of the three structures, used in turn.
const ORDERS: [[Kind; 3]; 6] = [
    [Kind::Wheel, Kind::Heap, Kind::DelayQueue],
    [Kind::DelayQueue, Kind::Heap, Kind::Wheel],
    [Kind::Heap, Kind::DelayQueue, Kind::Wheel],
    [Kind::Wheel, Kind::DelayQueue, Kind::Heap],
    [Kind::DelayQueue, Kind::Wheel, Kind::Heap],
    [Kind::Heap, Kind::Wheel, Kind::DelayQueue],
];

fn kind_named(name: &str) -> Option<Kind> {
    [Kind::Wheel, Kind::Heap, Kind::DelayQueue].into_iter().find(|k| format!("{k:?}") == name)
}

impl Options {
    fn runs(&self, kind: Kind) -> bool {
        self.only.map_or(kind != Kind::Heap || self.heap, |only| only == kind)
    }
}

struct Options {
    sizes: Vec<usize>,
    rounds: Option<usize>,
    heap: bool,
    only: Option<Kind>,
    rss: bool,
    faults: bool,
    main_only: bool,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut o = Options {
        sizes: Vec::new(),
        rounds: None,
        heap: true,
        only: None,
        rss: true,
        faults: false,
        main_only: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => o.rounds = it.next().and_then(|r| r.parse().ok()),
            "--no-heap" => o.heap = false,
            "--only" => o.only = it.next().and_then(|k| kind_named(k)),
            "--no-rss" => o.rss = false,
            "--faults" => o.faults = true,
            "--main-only" => o.main_only = true,
            _ => o.sizes.extend(a.parse::<usize>().ok()),
        }
    }
    if o.sizes.is_empty() {
        o.sizes = vec![10_000, 1_000_000, 10_000_000];
    }
    o
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, kind, n] = args.as_slice() {
        if flag == "--child" {
            child(kind_named(kind).expect("kind"), n.parse().expect("size"));
            return;
        }
    }
    let o = options();
    for &n in &o.sizes {
        let rounds = o.rounds.unwrap_or(if n > 1_000_000 { 3 } else { 5 });
        let w = Workload::new(n);
        let warm = Workload::new(n.min(200_000));
        for kind in ORDERS[0] {
            if o.runs(kind) {
                run(kind, &warm, &mut Timer::new(false));
            }
        }
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); 3];
        for round in 0..rounds {
            for kind in ORDERS[round % ORDERS.len()] {
                if !o.runs(kind) {
                    continue;
                }
                if o.faults {
                    eprintln!("  round {round}, {kind:?}");
                }
                let mut timer = Timer::new(o.faults);
                timer.main_only = o.main_only;
                samples[kind as usize].push(run(kind, &w, &mut timer));
            }
        }
        report(n, rounds, &samples, &o);
    }
}

fn report(n: usize, rounds: usize, samples: &[Vec<Sample>], o: &Options) {
    let med = |k: Kind, f: &dyn Fn(&Sample) -> f64| {
        let v: Vec<f64> = samples[k as usize].iter().map(f).collect();
        if v.is_empty() { f64::NAN } else { median(v) }
    };
    let spread = |k: Kind, i: usize| {
        let v: Vec<f64> = samples[k as usize].iter().map(|s| s.ns[i]).collect();
        let (lo, hi) = v.iter().fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        100.0 * (hi - lo) / 2.0 / median(v)
    };
    let ops = |k: Kind| samples[k as usize].first().map(|s| s.ops);
    for kind in [Kind::Heap, Kind::DelayQueue] {
        if let (Some(a), Some(b)) = (ops(Kind::Wheel), ops(kind)) {
            if a != b {
                println!(
                    "  NOTE: simulated phases ran {a:?} operations on the wheel, {b:?} on {kind:?}"
                );
            }
        }
    }
    println!("N = {n}: medians of {rounds} rounds, ns per operation (± half the range, %)");
    println!(
        "  {:<13} {:>16} {:>16} {:>16} {:>9}",
        "phase", "wheel", "heap", "DelayQueue", "DQ/wheel"
    );
    for (i, phase) in PHASES.iter().enumerate() {
        let cell = |k: Kind| {
            if samples[k as usize].is_empty() {
                format!("{:>16}", "-")
            } else {
                format!("{:>9.1} ±{:>4.0}%", med(k, &|s| s.ns[i]), spread(k, i))
            }
        };
        println!(
            "  {:<13} {} {} {} {:>8.1}x",
            phase,
            cell(Kind::Wheel),
            cell(Kind::Heap),
            cell(Kind::DelayQueue),
            med(Kind::DelayQueue, &|s| s.ns[i]) / med(Kind::Wheel, &|s| s.ns[i])
        );
    }
    if let Some([k, s]) = ops(Kind::Wheel) {
        println!("  (keep-alive: {k} timers fired and refiled; steady state: {s} operations)");
    }
    println!(
        "  bytes/timer: wheel {:.1} after inserting, {:.1} at peak (its own count); heap {:.1}, {:.1}",
        med(Kind::Wheel, &|s| s.bytes[0]),
        med(Kind::Wheel, &|s| s.bytes[1]),
        med(Kind::Heap, &|s| s.bytes[0]),
        med(Kind::Heap, &|s| s.bytes[1]),
    );
    if o.rss {
        let mut line =
            String::from("  RSS growth per timer (fresh process), after inserting / peak:");
        for kind in [Kind::Wheel, Kind::Heap, Kind::DelayQueue] {
            if !o.runs(kind) {
                continue;
            }
            if let Some((a, p)) = rss_of(kind, n) {
                line += &format!(" {kind:?} {a:.1} / {p:.1};");
            }
        }
        println!("{line}");
    }
}
