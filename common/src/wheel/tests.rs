//! Unit tests and a model check of the wheel against a `BTreeMap` reference: random operation
//! sequences, resets just before a cascade, generations and stamps that wrap.

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
        assert_eq!(w.next_deadline(), Some(deadline), "each slot knows its earliest tick");
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

#[test]
fn an_entry_left_behind_whose_stamp_wraps_onto_a_new_timer_fires_nothing_early() {
    // The cell is reused by a timer due exactly 2^32 ticks after the cancelled one, so the
    // entry left behind carries the same 32-bit stamp as the new timer's own entry.
    let mut w = Wheel::new();
    let old = w.insert(1000, "old");
    assert_eq!(w.cancel(old), Some("old"));
    let new = w.insert(1000 + (1 << 32), "new");
    assert_eq!(new.index, old.index, "cell reused");
    let keep = w.insert(5, "keep");
    assert_eq!(w.poll(5), vec!["keep"]);
    assert!(w.poll(1000 + (1 << 32) - 1).is_empty());
    assert_eq!(w.len(), 1);
    assert_eq!(w.poll(1000 + (1 << 32)), vec!["new"]);
    assert!(w.is_empty());
    assert!(!w.reset(keep, 1), "fired handle stays stale");
}

#[test]
fn cancelling_the_last_timer_drops_the_entries_left_behind() {
    let mut w = Wheel::new();
    let handles: Vec<_> = (0..100).map(|i| w.insert(1000 + i, i)).collect();
    for h in &handles[1..] {
        w.cancel(*h);
    }
    assert_eq!(w.slots.len(), 100, "cancels are lazy");
    assert!(w.next_deadline().is_some_and(|t| t <= 1000));
    w.cancel(handles[0]);
    assert_eq!(w.slots.len(), 0);
    assert_eq!(w.next_deadline(), None, "nothing live, nothing due");
}

#[test]
fn stale_entries_are_swept_before_they_outnumber_live_timers() {
    let bound = |w: &Wheel<u64>| 2 * w.len() + STALE_SLACK;
    let mut w = Wheel::new();
    let live = w.insert(u64::MAX, 0u64);
    for i in 0..20_000u64 {
        let h = w.insert(1_000_000 + i, i);
        w.cancel(h);
        assert!(w.slots.len() <= bound(&w), "{} entries after {i} cancels", w.slots.len());
    }
    let h = w.insert(20_000_000, 1);
    for back in 0..20_000u64 {
        assert!(w.reset(h, 9_000_000 - back), "earlier than its entry: files a new one");
        assert!(w.reset(h, 20_000_000), "a later reset files nothing");
        assert!(w.slots.len() <= bound(&w), "{} entries after {back} resets", w.slots.len());
    }
    let many: Vec<_> = (0..10_000).map(|i| w.insert(5_000_000 + i, i)).collect();
    for h in &many[..9_000] {
        w.cancel(*h);
    }
    let before = w.slots.len();
    assert_eq!(w.poll(5_009_999).len(), 1000);
    assert!(w.slots.len() <= before, "a poll files no more entries than it takes");
    assert_eq!(w.poll(20_000_000), vec![1]);
    assert_eq!(w.deadline(live), Some(RANGE - 1));
}

#[test]
fn only_an_earlier_reset_files_an_entry() {
    let mut w = Wheel::new();
    let h = w.insert(100, ());
    assert!(w.reset(h, 500));
    assert_eq!(w.slots.len(), 1, "later: the deadline is rewritten, nothing filed");
    assert!(w.reset(h, 50));
    assert_eq!(w.slots.len(), 2, "earlier: a new entry, the old one left behind");
    assert!(w.poll(49).is_empty());
    assert_eq!(w.poll(50), vec![()]);
    assert!(w.is_empty());
    assert_eq!(w.slots.len(), 0, "the entry left behind goes with the last timer");
}

#[test]
fn epochs_that_come_round_again_fire_nothing_early_or_twice() {
    // 17 earlier resets: the first entry (at 10_000) shares its epoch with the current one.
    let mut w = Wheel::new();
    let h = w.insert(10_000, 7);
    for d in (1000..1017).rev() {
        assert!(w.reset(h, d));
    }
    assert!(w.reset(h, 20_000), "pushed later: every entry it has is early");
    for t in [999, 1016, 9_999, 10_000, 19_999] {
        assert!(w.poll(t).is_empty(), "fired at {t}");
    }
    assert_eq!(w.poll(20_000), vec![7]);
    assert!(w.poll(100_000).is_empty(), "fired once");
    assert!(w.is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    /// A deadline `k` × 2^32 ticks after an earlier timer's first one (live or not): equal
    /// 32-bit stamps.
    InsertAlias(usize, u64),
    /// Cancels a timer, then inserts one `k` × 2^32 ticks after its first deadline: the new
    /// timer reuses the cell, and its stamp equals the one of the entry left behind.
    CancelAndAlias(usize, u64),
    ResetEarlier(usize, u64),
    ResetLater(usize, u64),
    Cancel(usize),
    Advance(u64),
    /// To `back` ticks before the next multiple of 64^level: resets then land just before
    /// that level's slot cascades.
    AdvanceToCascade(u32, u64),
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
        1 => (any::<usize>(), 0u64..16).prop_map(|(i, k)| Op::InsertAlias(i, k)),
        1 => (any::<usize>(), 1u64..16).prop_map(|(i, k)| Op::CancelAndAlias(i, k)),
        2 => (any::<usize>(), 0u64..5000).prop_map(|(i, d)| Op::ResetEarlier(i, d)),
        1 => (any::<usize>(), 0u64..500_000).prop_map(|(i, d)| Op::ResetLater(i, d)),
        1 => any::<usize>().prop_map(Op::Cancel),
        2 => jump.prop_map(Op::Advance),
        1 => (1u32..5, 0u64..3).prop_map(|(l, b)| Op::AdvanceToCascade(l, b)),
    ]
}

/// The model: every timer ever inserted (by id: its first deadline), and the live ones
/// (id -> handle, deadline as the model sees it).
#[derive(Default)]
struct Model {
    first: Vec<u64>,
    live: BTreeMap<u64, (Handle, u64)>,
}

impl Model {
    fn pick(&self, i: usize) -> Option<u64> {
        (!self.first.is_empty()).then(|| (i % self.first.len()) as u64)
    }

    fn cancel(&mut self, wheel: &mut Wheel<u64>, id: u64, now: u64) -> Result<(), TestCaseError> {
        if let Some((h, _)) = self.live.remove(&id) {
            prop_assert_eq!(wheel.cancel(h), Some(id));
            prop_assert_eq!(wheel.cancel(h), None, "second cancel is a no-op");
            prop_assert!(!wheel.reset(h, now), "a cancelled handle is stale");
        }
        Ok(())
    }

    fn insert(
        &mut self,
        wheel: &mut Wheel<u64>,
        deadline: u64,
        now: u64,
    ) -> Result<(), TestCaseError> {
        let id = self.first.len() as u64;
        let h = wheel.insert(deadline, id);
        let clamped = deadline.clamp(now, now + RANGE - 1);
        prop_assert_eq!(wheel.deadline(h), Some(clamped));
        self.first.push(clamped);
        self.live.insert(id, (h, clamped));
        Ok(())
    }
}

/// Runs `ops` on `wheel` and on the model.
fn check(mut wheel: Wheel<u64>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut model = Model::default();
    let mut now = wheel.now();
    for op in ops {
        match op {
            Op::Insert(offset) => model.insert(&mut wheel, now + offset, now)?,
            Op::InsertAlias(i, k) | Op::CancelAndAlias(i, k) => {
                if let Some(id) = model.pick(i) {
                    if let Op::CancelAndAlias(..) = op {
                        model.cancel(&mut wheel, id, now)?;
                    }
                    model.insert(&mut wheel, model.first[id as usize] + (k << 32), now)?;
                }
            }
            Op::ResetEarlier(i, back) => {
                if let Some((h, d)) = model.pick(i).and_then(|id| model.live.get_mut(&id)) {
                    let nd = d.saturating_sub(back).max(now);
                    prop_assert!(wheel.reset(*h, nd));
                    *d = nd;
                }
            }
            Op::ResetLater(i, ahead) => {
                if let Some((h, d)) = model.pick(i).and_then(|id| model.live.get_mut(&id)) {
                    let nd = *d + ahead;
                    prop_assert!(wheel.reset(*h, nd));
                    *d = nd.min(now + RANGE - 1);
                }
            }
            Op::Cancel(i) => {
                if let Some(id) = model.pick(i) {
                    model.cancel(&mut wheel, id, now)?;
                }
            }
            Op::Advance(_) | Op::AdvanceToCascade(..) => {
                let model_next = model.live.values().map(|(_, d)| *d).min();
                match (wheel.next_deadline(), model_next) {
                    (Some(next), Some(m)) => prop_assert!(next <= m, "next {} after {}", next, m),
                    (None, None) => {}
                    (got, want) => prop_assert!(false, "next_deadline {:?}, model {:?}", got, want),
                }
                now = match op {
                    Op::AdvanceToCascade(level, back) => {
                        let span = 1u64 << (6 * level);
                        ((now / span + 1) * span).saturating_sub(back).max(now)
                    }
                    Op::Advance(by) => now + by,
                    _ => now,
                };
                let mut fired = wheel.poll(now);
                fired.sort_unstable();
                let due: Vec<u64> =
                    model.live.iter().filter(|(_, (_, d))| *d <= now).map(|(id, _)| *id).collect();
                for id in &due {
                    let (h, _) = model.live[id];
                    prop_assert!(wheel.deadline(h).is_none(), "a fired handle is stale");
                    model.live.remove(id);
                }
                prop_assert_eq!(fired, due, "exactly the due timers fire at {}", now);
                prop_assert_eq!(wheel.now(), now);
            }
        }
        prop_assert_eq!(wheel.len(), model.live.len());
        for (h, d) in model.live.values() {
            prop_assert_eq!(wheel.deadline(*h), Some(*d));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn behaves_like_a_sorted_map(ops in proptest::collection::vec(op(), 1..200)) {
        check(Wheel::new(), ops)?;
    }

    #[test]
    fn behaves_like_a_sorted_map_when_generations_wrap(
        start in 0u64..(1 << 37),
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let mut wheel = Wheel::new();
        wheel.poll(start);
        // 64 free cells whose next timers get the last generations before the wrap.
        let handles: Vec<_> = (0..64).map(|i| wheel.insert(start + i, 0)).collect();
        for h in handles {
            wheel.cancel(h);
        }
        wheel.cells.age(std::num::NonZeroU32::new(u32::MAX - 1).expect("non-zero"));
        check(wheel, ops)?;
    }
}
