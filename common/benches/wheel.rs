//! Timer benchmark: the same workload on `common::wheel::Wheel`, on tokio-util's `DelayQueue`
//! and on a `BinaryHeap` with lazy cancellation, in one run. N timers due uniformly in
//! [1 s, 600 s] at 1 ms ticks: insert all, reset each once later (keep-alive), reset each once
//! to a random deadline, cancel half, expire the rest. Prints ns/op per phase, bytes per timer
//! and the ratio to DelayQueue. Run: `cargo bench -p sqltunnel-common --bench wheel [N...]`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::time::{Duration, Instant};

use common::wheel::Wheel;
use tokio_util::time::DelayQueue;

/// Phases, in order.
const PHASES: [&str; 5] = ["insert", "reset later", "reset random", "cancel half", "expire rest"];

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

struct Workload {
    first: Vec<u64>,
    later: Vec<u64>,
    random: Vec<u64>,
}

fn workload(n: usize) -> Workload {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let first: Vec<u64> = (0..n).map(|_| rng.deadline_ms()).collect();
    let later = first.iter().map(|d| d + 1 + rng.next() % 30_000).collect();
    let random = (0..n).map(|_| rng.deadline_ms()).collect();
    Workload { first, later, random }
}

/// Nanoseconds per op of each phase, and bytes per timer after inserting.
type Result = ([f64; 5], f64);

fn per_op(start: Instant, ops: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / ops.max(1) as f64
}

fn bench_wheel(w: &Workload) -> Result {
    let n = w.first.len();
    let mut ns = [0.0; 5];
    let mut wheel = Wheel::with_capacity(n);
    let t = Instant::now();
    let handles: Vec<_> =
        w.first.iter().enumerate().map(|(i, &d)| wheel.insert(d, i as u32)).collect();
    ns[0] = per_op(t, n);
    let bytes = wheel.memory_bytes() as f64 / n as f64;
    let t = Instant::now();
    for (h, &d) in handles.iter().zip(&w.later) {
        wheel.reset(*h, d);
    }
    ns[1] = per_op(t, n);
    let t = Instant::now();
    for (h, &d) in handles.iter().zip(&w.random) {
        wheel.reset(*h, d);
    }
    ns[2] = per_op(t, n);
    let t = Instant::now();
    for h in handles.iter().step_by(2) {
        wheel.cancel(*h);
    }
    ns[3] = per_op(t, n / 2);
    let t = Instant::now();
    let mut fired = Vec::with_capacity(n / 2 + 1);
    let mut now = 0;
    while let Some(next) = wheel.next_deadline() {
        now = next.max(now);
        wheel.poll_into(now, &mut fired);
    }
    ns[4] = per_op(t, fired.len());
    assert_eq!(fired.len(), n - n.div_ceil(2));
    (ns, bytes)
}

fn bench_heap(w: &Workload) -> Result {
    let n = w.first.len();
    let mut ns = [0.0; 5];
    let mut heap: BinaryHeap<Reverse<(u64, u32, u32)>> = BinaryHeap::with_capacity(n);
    // generation per timer; an entry whose generation is stale was reset or cancelled.
    let mut generation = vec![0u32; n];
    let t = Instant::now();
    for (i, &d) in w.first.iter().enumerate() {
        heap.push(Reverse((d, i as u32, 0)));
    }
    ns[0] = per_op(t, n);
    let bytes = (heap.capacity() * std::mem::size_of::<Reverse<(u64, u32, u32)>>() + n * 4) as f64
        / n as f64;
    for (phase, deadlines) in [(1, &w.later), (2, &w.random)] {
        let t = Instant::now();
        for (i, &d) in deadlines.iter().enumerate() {
            generation[i] += 1;
            heap.push(Reverse((d, i as u32, generation[i])));
        }
        ns[phase] = per_op(t, n);
    }
    let t = Instant::now();
    for g in generation.iter_mut().step_by(2) {
        *g = u32::MAX;
    }
    ns[3] = per_op(t, n / 2);
    let t = Instant::now();
    let mut fired = 0;
    while let Some(Reverse((_, i, g))) = heap.pop() {
        if generation[i as usize] == g {
            fired += 1;
        }
    }
    ns[4] = per_op(t, fired);
    (ns, bytes)
}

fn rss_kib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .map(|v| v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0.0))
            })
        })
        .unwrap_or(0.0)
}

fn bench_delay_queue(w: &Workload) -> Result {
    let n = w.first.len();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut ns = [0.0; 5];
        let before = rss_kib();
        let mut queue = DelayQueue::with_capacity(n);
        let t = Instant::now();
        let keys: Vec<_> = w
            .first
            .iter()
            .enumerate()
            .map(|(i, &d)| queue.insert(i as u32, Duration::from_millis(d)))
            .collect();
        ns[0] = per_op(t, n);
        let bytes = (rss_kib() - before) * 1024.0 / n as f64;
        for (phase, deadlines) in [(1, &w.later), (2, &w.random)] {
            let t = Instant::now();
            for (k, &d) in keys.iter().zip(deadlines) {
                queue.reset(k, Duration::from_millis(d));
            }
            ns[phase] = per_op(t, n);
        }
        let t = Instant::now();
        for k in keys.iter().step_by(2) {
            queue.remove(k);
        }
        ns[3] = per_op(t, n / 2);
        tokio::time::advance(Duration::from_secs(700)).await;
        let t = Instant::now();
        let mut fired = 0;
        while poll_fn(|cx| queue.poll_expired(cx)).await.is_some() {
            fired += 1;
        }
        ns[4] = per_op(t, fired);
        (ns, bytes)
    })
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![10_000, 1_000_000, 10_000_000] } else { sizes };
    for n in sizes {
        let w = workload(n);
        let (wheel, wheel_bytes) = bench_wheel(&w);
        let (heap, heap_bytes) = bench_heap(&w);
        let (dq, dq_bytes) = bench_delay_queue(&w);
        println!("N = {n}");
        println!(
            "  {:<14} {:>10} {:>12} {:>12} {:>16}",
            "phase (ns/op)", "wheel", "heap", "DelayQueue", "DelayQueue/wheel"
        );
        for (i, phase) in PHASES.iter().enumerate() {
            println!(
                "  {:<14} {:>10.1} {:>12.1} {:>12.1} {:>15.1}x",
                phase,
                wheel[i],
                heap[i],
                dq[i],
                dq[i] / wheel[i]
            );
        }
        println!(
            "  {:<14} {:>10.1} {:>12.1} {:>12.1}  (DelayQueue: RSS growth, approximate)",
            "bytes/timer", wheel_bytes, heap_bytes, dq_bytes
        );
    }
}
