//! Unit tests and a model check of the wheel against a `BTreeMap` reference.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

#[test]
fn fires_at_deadline_not_before() {
    let mut w = Wheel::new();
    w.insert(100, "a");
    assert!(w.poll(99).is_empty());
    assert_eq!(w.next_deadline(), Some(100));
    assert_eq!(w.poll(100), vec!["a"]);
    assert!(w.is_empty());
    assert_eq!(w.next_deadline(), None);
}

#[test]
fn level_boundaries() {
    for deadline in
        [0, 1, 63, 64, 65, 4095, 4096, 4097, 262_143, 262_144, 16_777_215, 16_777_216, RANGE - 1]
    {
        let mut w = Wheel::new();
        w.insert(deadline, deadline);
        if deadline > 0 {
            assert!(w.poll(deadline - 1).is_empty(), "{deadline} fired early");
        }
        assert_eq!(w.poll(deadline), vec![deadline], "{deadline} did not fire on time");
    }
}

#[test]
fn past_deadlines_fire_next_poll_and_far_ones_are_clamped() {
    let mut w = Wheel::new();
    w.poll(1000);
    w.insert(5, 1);
    assert_eq!(w.poll(1000), vec![1]);
    let h = w.insert(u64::MAX, 2);
    assert_eq!(w.deadline(h), Some(1000 + RANGE - 1));
}

#[test]
fn stale_handles_cannot_touch_a_reused_slot() {
    let mut w = Wheel::new();
    let old = w.insert(10, 1);
    assert_eq!(w.cancel(old), Some(1));
    let new = w.insert(20, 2);
    assert_eq!(new.index, old.index, "slot reused");
    assert_eq!(w.cancel(old), None);
    assert!(!w.reset(old, 5));
    assert_eq!(w.poll(19), Vec::<i32>::new());
    assert_eq!(w.poll(20), vec![2]);
    assert!(!w.reset(new, 100), "fired handles are stale too");
}

#[test]
fn later_reset_defers_without_early_fire() {
    let mut w = Wheel::new();
    let h = w.insert(70, "k");
    assert!(w.reset(h, 5000));
    assert!(w.poll(4999).is_empty());
    assert_eq!(w.len(), 1);
    assert_eq!(w.poll(5000), vec!["k"]);
    let h = w.insert(9000, "e");
    assert!(w.reset(h, 5001));
    assert_eq!(w.next_deadline(), Some(5001));
    assert_eq!(w.poll(5001), vec!["e"]);
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    ResetEarlier(usize, u64),
    ResetLater(usize, u64),
    Cancel(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let jump = prop_oneof![
        Just(0u64),
        Just(1),
        Just(63),
        Just(64),
        Just(4095),
        Just(4096),
        Just(262_143),
        Just(262_144),
        0u64..300,
        0u64..100_000,
        0u64..(1 << 40),
    ];
    prop_oneof![
        3 => (0u64..300_000).prop_map(Op::Insert),
        1 => (0u64..(1 << 38)).prop_map(Op::Insert),
        1 => (any::<usize>(), 0u64..5000).prop_map(|(i, d)| Op::ResetEarlier(i, d)),
        1 => (any::<usize>(), 0u64..500_000).prop_map(|(i, d)| Op::ResetLater(i, d)),
        1 => any::<usize>().prop_map(Op::Cancel),
        2 => jump.prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn behaves_like_a_sorted_map(ops in proptest::collection::vec(op(), 1..200)) {
        let mut wheel = Wheel::new();
        // id -> (handle, deadline as the model sees it)
        let mut model: BTreeMap<u64, (Handle, u64)> = BTreeMap::new();
        let mut ids = Vec::new();
        let mut next_id = 0u64;
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Insert(offset) => {
                    let deadline = now + offset;
                    let h = wheel.insert(deadline, next_id);
                    let clamped = deadline.min(now + RANGE - 1);
                    model.insert(next_id, (h, clamped));
                    ids.push(next_id);
                    next_id += 1;
                }
                Op::ResetEarlier(i, back) | Op::ResetLater(i, back) if ids.is_empty() => { let _ = (i, back); }
                Op::ResetEarlier(i, back) => {
                    let id = ids[i % ids.len()];
                    if let Some((h, d)) = model.get_mut(&id) {
                        let nd = d.saturating_sub(back).max(now);
                        prop_assert!(wheel.reset(*h, nd));
                        *d = nd;
                    }
                }
                Op::ResetLater(i, ahead) => {
                    let id = ids[i % ids.len()];
                    if let Some((h, d)) = model.get_mut(&id) {
                        let nd = *d + ahead;
                        prop_assert!(wheel.reset(*h, nd));
                        *d = nd.min(now + RANGE - 1);
                    }
                }
                Op::Cancel(i) if !ids.is_empty() => {
                    let id = ids[i % ids.len()];
                    if let Some((h, _)) = model.remove(&id) {
                        prop_assert_eq!(wheel.cancel(h), Some(id));
                        prop_assert_eq!(wheel.cancel(h), None, "second cancel is a no-op");
                    }
                }
                Op::Cancel(_) => {}
                Op::Advance(by) => {
                    if let (Some(next), Some(model_next)) = (wheel.next_deadline(), model.values().map(|(_, d)| *d).min()) {
                        prop_assert!(next <= model_next, "next_deadline {} later than model's {}", next, model_next);
                    }
                    now += by;
                    let mut fired = wheel.poll(now);
                    fired.sort_unstable();
                    let mut due: Vec<u64> = model.iter().filter(|(_, (_, d))| *d <= now).map(|(id, _)| *id).collect();
                    due.sort_unstable();
                    for id in &due { model.remove(id); }
                    prop_assert_eq!(fired, due, "exactly the due timers fire at {}", now);
                }
            }
            prop_assert_eq!(wheel.len(), model.len());
        }
    }
}
