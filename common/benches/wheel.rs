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

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use common::wheel::Wheel;
use tokio_util::time::DelayQueue;

/// Phases, in order.
const PHASES: [&str; 7] = [
    "insert",
    "reset later",
    "reset random",
    "cancel half",
    "expire rest",
    "keep-alive",
    "steady state",
];
/// Session timeout of the keep-alive phase, ms.
const TIMEOUT: u64 = 30_000;
/// Clock step of the keep-alive and steady-state phases (the reaper's tick), ms.
const STEP: u64 = 10;
/// Simulated length of the keep-alive phase, ms.
const KEEP_ALIVE_SPAN: u64 = 60_000;
/// Simulated length of the steady-state phase, ms.
const STEADY_SPAN: u64 = 30_000;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn deadline_ms(&mut self) -> u64 {
        1_000 + self.next() % 599_001
    }
}

/// splitmix64 of (id, k): the k-th replacement deadline of a steady-state timer, the same
/// whatever order a structure fires its timers in.
fn rearm(id: u32, k: u32) -> u64 {
    let mut z = ((u64::from(id) << 32) | u64::from(k)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    1_000 + (z ^ (z >> 31)) % 59_001
}

struct Workload {
    first: Vec<u64>,
    later: Vec<u64>,
    random: Vec<u64>,
    /// Keep-alive: heartbeat period and phase of each session, ms (one read per session, as
    /// the reaper reads one timestamp per session).
    heartbeat: Vec<(u32, u32)>,
}

impl Workload {
    fn new(n: usize) -> Self {
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

    fn len(&self) -> usize {
        self.first.len()
    }

    /// When session `i` was last heard from at `t` (t ≥ 5 s).
    fn last_seen(&self, i: usize, t: u64) -> u64 {
        let (p, o) = self.heartbeat[i];
        let (p, o) = (u64::from(p), u64::from(o));
        t - (t - o) % p
    }

    /// The keep-alive phase starts here, every session having been heard from.
    fn keep_alive_start(&self) -> u64 {
        10_000
    }

    /// Initial deadline of steady-state timer `i`.
    fn steady_first(&self, i: usize) -> u64 {
        rearm(i as u32, u32::MAX)
    }
}

/// The three structures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Wheel,
    Heap,
    DelayQueue,
}

/// One structure's figures in one round: ns per op of each phase, operations of the two
/// simulated phases (the same for every structure), bytes per timer after inserting and at
/// the peak (where the structure can count them).
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    ns: [f64; 7],
    ops: [usize; 2],
    bytes: [f64; 2],
}

fn per_op(start: Instant, ops: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / ops.max(1) as f64
}

/// Minor page faults of this process so far (field 10 of /proc/self/stat).
fn minor_faults() -> u64 {
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
struct Timer {
    faults: bool,
    start: Instant,
    faults_at_start: u64,
    rss: bool,
    rss_after_insert: f64,
    /// Phases 1–5 only (for profiling).
    main_only: bool,
}

impl Timer {
    fn new(faults: bool) -> Self {
        Self {
            faults,
            start: Instant::now(),
            faults_at_start: 0,
            rss: false,
            rss_after_insert: 0.0,
            main_only: false,
        }
    }
    fn start(&mut self) {
        if self.faults {
            self.faults_at_start = minor_faults();
        }
        self.start = Instant::now();
    }
    fn stop(&mut self, kind: Kind, phase: usize, ops: usize) -> f64 {
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

fn bench_wheel(w: &Workload, t: &mut Timer) -> Sample {
    let n = w.len();
    let mut s = Sample::default();
    let mut wheel = Wheel::with_capacity(n);
    t.start();
    let handles: Vec<_> =
        w.first.iter().enumerate().map(|(i, &d)| wheel.insert(d, i as u32)).collect();
    s.ns[0] = t.stop(Kind::Wheel, 0, n);
    s.bytes[0] = wheel.memory_bytes() as f64 / n as f64;
    let mut peak = wheel.memory_bytes();
    for (phase, deadlines) in [(1, &w.later), (2, &w.random)] {
        t.start();
        for (h, &d) in handles.iter().zip(deadlines) {
            wheel.reset(*h, d);
        }
        s.ns[phase] = t.stop(Kind::Wheel, phase, n);
        peak = peak.max(wheel.memory_bytes());
    }
    t.start();
    for h in handles.iter().step_by(2) {
        wheel.cancel(*h);
    }
    s.ns[3] = t.stop(Kind::Wheel, 3, n / 2);
    peak = peak.max(wheel.memory_bytes());
    let mut fired = Vec::with_capacity(n / 2 + 1);
    t.start();
    let mut now = 0;
    while let Some(next) = wheel.next_deadline() {
        now = next.max(now);
        wheel.poll_into(now, &mut fired);
    }
    s.ns[4] = t.stop(Kind::Wheel, 4, fired.len());
    assert_eq!(fired.len(), n - n.div_ceil(2));
    drop(wheel);
    s.bytes[1] = peak as f64 / n as f64;
    if t.main_only {
        return s;
    }

    // Keep-alive.
    let mut wheel = Wheel::with_capacity(n);
    let t0 = w.keep_alive_start();
    for i in 0..n {
        wheel.insert(w.last_seen(i, t0) + TIMEOUT, i as u32);
    }
    t.start();
    let mut refiled = 0;
    for now in (t0 + STEP..=t0 + KEEP_ALIVE_SPAN).step_by(STEP as usize) {
        fired.clear();
        wheel.poll_into(now, &mut fired);
        for &i in &fired {
            wheel.insert(w.last_seen(i as usize, now) + TIMEOUT, i);
        }
        refiled += fired.len();
    }
    s.ns[5] = t.stop(Kind::Wheel, 5, refiled);
    s.ops[0] = refiled;
    drop(wheel);

    // Steady state.
    let mut wheel = Wheel::with_capacity(n);
    let mut handles: Vec<_> = (0..n).map(|i| wheel.insert(w.steady_first(i), i as u32)).collect();
    let mut armed = vec![0u32; n];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut ops = 0;
    t.start();
    for now in (STEP..=STEADY_SPAN).step_by(STEP as usize) {
        fired.clear();
        wheel.poll_into(now, &mut fired);
        for &i in &fired {
            let k = &mut armed[i as usize];
            *k += 1;
            handles[i as usize] = wheel.insert(now + rearm(i, *k), i);
        }
        for _ in 0..fired.len() {
            let i = (rng.next() % n as u64) as u32;
            wheel.cancel(handles[i as usize]);
            let k = &mut armed[i as usize];
            *k += 1;
            handles[i as usize] = wheel.insert(now + rearm(i, *k), i);
        }
        ops += 4 * fired.len();
    }
    s.ns[6] = t.stop(Kind::Wheel, 6, ops);
    s.ops[1] = ops;
    s
}

/// A min-heap of (deadline, id, generation); an entry whose generation is stale was reset or
/// cancelled and is skipped when popped.
type Heap = BinaryHeap<Reverse<(u64, u32, u32)>>;

fn heap_bytes(heap: &Heap, n: usize) -> f64 {
    (heap.capacity() * std::mem::size_of::<Reverse<(u64, u32, u32)>>() + n * 4) as f64 / n as f64
}

/// Pops every live entry due at or before `now` into `fired`.
fn heap_poll(heap: &mut Heap, generation: &[u32], now: u64, fired: &mut Vec<u32>) {
    while let Some(&Reverse((d, i, g))) = heap.peek() {
        if d > now {
            break;
        }
        heap.pop();
        if generation[i as usize] == g {
            fired.push(i);
        }
    }
}

fn bench_heap(w: &Workload, t: &mut Timer) -> Sample {
    let n = w.len();
    let mut s = Sample::default();
    let mut heap = Heap::with_capacity(n);
    let mut generation = vec![0u32; n];
    t.start();
    for (i, &d) in w.first.iter().enumerate() {
        heap.push(Reverse((d, i as u32, 0)));
    }
    s.ns[0] = t.stop(Kind::Heap, 0, n);
    s.bytes[0] = heap_bytes(&heap, n);
    for (phase, deadlines) in [(1, &w.later), (2, &w.random)] {
        t.start();
        for (i, &d) in deadlines.iter().enumerate() {
            generation[i] += 1;
            heap.push(Reverse((d, i as u32, generation[i])));
        }
        s.ns[phase] = t.stop(Kind::Heap, phase, n);
    }
    t.start();
    for g in generation.iter_mut().step_by(2) {
        *g = u32::MAX;
    }
    s.ns[3] = t.stop(Kind::Heap, 3, n / 2);
    s.bytes[1] = heap_bytes(&heap, n);
    t.start();
    let mut fired = Vec::with_capacity(n / 2 + 1);
    heap_poll(&mut heap, &generation, u64::MAX, &mut fired);
    s.ns[4] = t.stop(Kind::Heap, 4, fired.len());
    assert_eq!(fired.len(), n - n.div_ceil(2));
    drop(heap);

    // Keep-alive.
    let mut heap = Heap::with_capacity(n);
    let generation = vec![0u32; n];
    let t0 = w.keep_alive_start();
    for i in 0..n {
        heap.push(Reverse((w.last_seen(i, t0) + TIMEOUT, i as u32, 0)));
    }
    t.start();
    let mut refiled = 0;
    for now in (t0 + STEP..=t0 + KEEP_ALIVE_SPAN).step_by(STEP as usize) {
        fired.clear();
        heap_poll(&mut heap, &generation, now, &mut fired);
        for &i in &fired {
            heap.push(Reverse((w.last_seen(i as usize, now) + TIMEOUT, i, 0)));
        }
        refiled += fired.len();
    }
    s.ns[5] = t.stop(Kind::Heap, 5, refiled);
    s.ops[0] = refiled;
    drop(heap);

    // Steady state.
    let mut heap = Heap::with_capacity(n);
    let mut generation = vec![0u32; n];
    for i in 0..n {
        heap.push(Reverse((w.steady_first(i), i as u32, 0)));
    }
    let mut armed = vec![0u32; n];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut ops = 0;
    t.start();
    for now in (STEP..=STEADY_SPAN).step_by(STEP as usize) {
        fired.clear();
        heap_poll(&mut heap, &generation, now, &mut fired);
        let cancels = fired.len();
        fired.extend((0..cancels).map(|_| (rng.next() % n as u64) as u32));
        // Fired ones get a new entry; cancelled ones too, under a new generation.
        for &i in &fired {
            let (k, g) = (&mut armed[i as usize], &mut generation[i as usize]);
            *k += 1;
            *g += 1;
            heap.push(Reverse((now + rearm(i, *k), i, *g)));
        }
        ops += 4 * cancels;
    }
    s.ns[6] = t.stop(Kind::Heap, 6, ops);
    s.ops[1] = ops;
    s
}

/// Drains every entry `queue` has expired by now, without waiting. Unconstrained: tokio's
/// co-operative budget would otherwise cut the drain short every 128 entries (a task would
/// yield and come back; here that cost is left out, in `DelayQueue`'s favour).
async fn drain_expired(queue: &mut DelayQueue<u32>, fired: &mut Vec<u32>) {
    tokio::task::unconstrained(async {
        let mut cx = Context::from_waker(Waker::noop());
        while let Poll::Ready(Some(e)) = queue.poll_expired(&mut cx) {
            fired.push(e.into_inner());
        }
    })
    .await
}

fn bench_delay_queue(w: &Workload, t: &mut Timer) -> Sample {
    let n = w.len();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut s = Sample::default();
        let mut queue = DelayQueue::with_capacity(n);
        let base = tokio::time::Instant::now();
        let at = |ms: u64| base + Duration::from_millis(ms);
        t.start();
        let keys: Vec<_> =
            w.first.iter().enumerate().map(|(i, &d)| queue.insert_at(i as u32, at(d))).collect();
        s.ns[0] = t.stop(Kind::DelayQueue, 0, n);
        for (phase, deadlines) in [(1, &w.later), (2, &w.random)] {
            t.start();
            for (k, &d) in keys.iter().zip(deadlines) {
                queue.reset_at(k, at(d));
            }
            s.ns[phase] = t.stop(Kind::DelayQueue, phase, n);
        }
        t.start();
        for k in keys.iter().step_by(2) {
            queue.remove(k);
        }
        s.ns[3] = t.stop(Kind::DelayQueue, 3, n / 2);
        tokio::time::advance(Duration::from_secs(700)).await;
        let mut fired = Vec::with_capacity(n / 2 + 1);
        t.start();
        drain_expired(&mut queue, &mut fired).await;
        s.ns[4] = t.stop(Kind::DelayQueue, 4, fired.len());
        assert_eq!(fired.len(), n - n.div_ceil(2));
        drop(queue);

        // Keep-alive: the clock goes on; its ms count as the wheel's from here.
        let mut queue = DelayQueue::with_capacity(n);
        let t0 = w.keep_alive_start();
        let base = tokio::time::Instant::now() - Duration::from_millis(t0);
        let at = |ms: u64| base + Duration::from_millis(ms);
        for i in 0..n {
            queue.insert_at(i as u32, at(w.last_seen(i, t0) + TIMEOUT));
        }
        t.start();
        let mut refiled = 0;
        for now in (t0 + STEP..=t0 + KEEP_ALIVE_SPAN).step_by(STEP as usize) {
            tokio::time::advance(Duration::from_millis(STEP)).await;
            fired.clear();
            drain_expired(&mut queue, &mut fired).await;
            for &i in &fired {
                queue.insert_at(i, at(w.last_seen(i as usize, now) + TIMEOUT));
            }
            refiled += fired.len();
        }
        s.ns[5] = t.stop(Kind::DelayQueue, 5, refiled);
        s.ops[0] = refiled;
        drop(queue);

        // Steady state: the clock's ms count as the wheel's from 0 here.
        let mut queue = DelayQueue::with_capacity(n);
        let base = tokio::time::Instant::now();
        let at = |ms: u64| base + Duration::from_millis(ms);
        let mut keys: Vec<_> =
            (0..n).map(|i| queue.insert_at(i as u32, at(w.steady_first(i)))).collect();
        let mut armed = vec![0u32; n];
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut ops = 0;
        t.start();
        for now in (STEP..=STEADY_SPAN).step_by(STEP as usize) {
            tokio::time::advance(Duration::from_millis(STEP)).await;
            fired.clear();
            drain_expired(&mut queue, &mut fired).await;
            for &i in &fired {
                let k = &mut armed[i as usize];
                *k += 1;
                keys[i as usize] = queue.insert_at(i, at(now + rearm(i, *k)));
            }
            for _ in 0..fired.len() {
                let i = (rng.next() % n as u64) as u32;
                queue.remove(&keys[i as usize]);
                let k = &mut armed[i as usize];
                *k += 1;
                keys[i as usize] = queue.insert_at(i, at(now + rearm(i, *k)));
            }
            ops += 4 * fired.len();
        }
        s.ns[6] = t.stop(Kind::DelayQueue, 6, ops);
        s.ops[1] = ops;
        s
    })
}

fn run(kind: Kind, w: &Workload, t: &mut Timer) -> Sample {
    match kind {
        Kind::Wheel => bench_wheel(w, t),
        Kind::Heap => bench_heap(w, t),
        Kind::DelayQueue => bench_delay_queue(w, t),
    }
}

/// (VmRSS, VmHWM) of this process, KiB.
fn rss_kib() -> (f64, f64) {
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

/// Child process: every phase on one structure, alone in a fresh process; prints its RSS
/// growth per timer after inserting and at the peak, over the RSS with the workload in memory.
fn child(kind: Kind, n: usize) {
    let w = Workload::new(n);
    let (base, _) = rss_kib();
    let mut t = Timer::new(false);
    t.rss = true;
    run(kind, &w, &mut t);
    let per_timer = |kib: f64| (kib - base) * 1024.0 / n as f64;
    println!("{} {}", per_timer(t.rss_after_insert), per_timer(rss_kib().1));
}

fn rss_of(kind: Kind, n: usize) -> Option<(f64, f64)> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new(exe)
        .args(["--child", &format!("{kind:?}"), &n.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace().filter_map(|v| v.parse().ok());
    Some((it.next()?, it.next()?))
}

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
