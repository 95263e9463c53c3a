//! The phases run on each structure: the wheel, a `BinaryHeap` with lazy cancellation, and
//! tokio-util's `DelayQueue`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::wheel::Wheel;
use tokio_util::time::DelayQueue;

use crate::workload::*;

pub fn bench_wheel(w: &Workload, t: &mut Timer) -> Sample {
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

pub fn heap_bytes(heap: &Heap, n: usize) -> f64 {
    (heap.capacity() * std::mem::size_of::<Reverse<(u64, u32, u32)>>() + n * 4) as f64 / n as f64
}

/// Pops every live entry due at or before `now` into `fired`.
pub fn heap_poll(heap: &mut Heap, generation: &[u32], now: u64, fired: &mut Vec<u32>) {
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

pub fn bench_heap(w: &Workload, t: &mut Timer) -> Sample {
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

pub fn bench_delay_queue(w: &Workload, t: &mut Timer) -> Sample {
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

pub fn run(kind: Kind, w: &Workload, t: &mut Timer) -> Sample {
    match kind {
        Kind::Wheel => bench_wheel(w, t),
        Kind::Heap => bench_heap(w, t),
        Kind::DelayQueue => bench_delay_queue(w, t),
    }
}
