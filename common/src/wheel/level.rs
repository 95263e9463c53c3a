//! Level arithmetic of the hierarchical wheel: 6 levels of 64 slots, a `u64` occupancy bitmap
//! per level, so the next non-empty slot is found with a rotate and a trailing-zeros count.

/// Slots per level.
pub const SLOTS: usize = 64;
/// Bits of a tick number consumed per level.
const BITS: u32 = 6;
/// Number of levels.
pub const LEVELS: usize = 6;
/// Ticks the wheel can look ahead: 64^6 = 2^36 (about 795 days at 1 ms per tick).
pub const RANGE: u64 = 1 << (BITS * LEVELS as u32);

/// Ticks covered by one slot of `level`.
#[inline]
pub const fn slot_span(level: usize) -> u64 {
    1 << (BITS * level as u32)
}

/// Ticks covered by a whole rotation of `level`.
#[inline]
pub const fn level_span(level: usize) -> u64 {
    slot_span(level + 1)
}

/// The level a timer due at `deadline` belongs to when the wheel stands at `now`: the highest
/// 6-bit digit in which the two differ (capped at the top level).
#[inline]
pub fn level_for(now: u64, deadline: u64) -> usize {
    let diff = (now ^ deadline) | (SLOTS as u64 - 1);
    let significant = 63 - diff.leading_zeros();
    ((significant / BITS) as usize).min(LEVELS - 1)
}

/// The slot of `deadline` within `level`.
#[inline]
pub fn slot_for(level: usize, deadline: u64) -> usize {
    ((deadline >> (BITS * level as u32)) & (SLOTS as u64 - 1)) as usize
}

/// Occupancy of one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Occupancy(pub u64);

impl Occupancy {
    /// Marks a slot occupied.
    #[inline]
    pub fn set(&mut self, slot: usize) {
        self.0 |= 1 << slot;
    }

    /// Marks a slot empty.
    #[inline]
    pub fn clear(&mut self, slot: usize) {
        self.0 &= !(1 << slot);
    }

    /// The start tick of the first occupied slot of `level` at or after `now` (the next
    /// rotation for a slot already passed), without visiting empty slots.
    #[inline]
    pub fn next_due(&self, level: usize, now: u64) -> Option<(usize, u64)> {
        if self.0 == 0 {
            return None;
        }
        let now_slot = slot_for(level, now);
        // Level 0: the current slot is due now. Higher levels: the current slot can only hold
        // timers parked for the next rotation, so the search starts one slot later.
        let from = if level == 0 { now_slot } else { (now_slot + 1) % SLOTS };
        let distance = self.0.rotate_right(from as u32).trailing_zeros() as usize;
        let slot = (from + distance) % SLOTS;
        let rotation_start = now & !(level_span(level) - 1);
        let mut start = rotation_start + slot as u64 * slot_span(level);
        if start < now & !(slot_span(level) - 1) || (level > 0 && slot == now_slot) {
            start += level_span(level);
        }
        Some((slot, start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_the_differing_digit() {
        assert_eq!(level_for(0, 0), 0);
        assert_eq!(level_for(0, 63), 0);
        assert_eq!(level_for(0, 64), 1);
        assert_eq!(level_for(63, 64), 1);
        assert_eq!(level_for(0, 4095), 1);
        assert_eq!(level_for(0, 4096), 2);
        assert_eq!(level_for(0, 262_143), 2);
        assert_eq!(level_for(0, 262_144), 3);
        assert_eq!(level_for(0, RANGE - 1), 5);
        assert_eq!(level_for(RANGE - 1, RANGE + 3), 5, "capped at the top level");
    }

    #[test]
    fn next_due_skips_empty_slots_and_wraps() {
        let mut occ = Occupancy::default();
        assert_eq!(occ.next_due(0, 10), None);
        occ.set(40);
        assert_eq!(occ.next_due(0, 10), Some((40, 40)));
        assert_eq!(occ.next_due(0, 64 + 10), Some((40, 64 + 40)));
        let mut top = Occupancy::default();
        top.set(3);
        let now = 5 * slot_span(5) + 7;
        assert_eq!(
            top.next_due(5, now),
            Some((3, RANGE + 3 * slot_span(5))),
            "a passed top slot is next rotation"
        );
        let mut l1 = Occupancy::default();
        l1.set(2);
        assert_eq!(l1.next_due(1, 100), Some((2, 128)));
    }
}
