//! A hierarchical timing wheel (Varghese & Lauck): 6 levels of 64 slots over integer ticks,
//! occupancy bitmaps so empty slots are never visited. Pure: no clock, no I/O; [`Clock`] maps
//! `Instant`s to ticks.
//!
//! Layout, built so that expiry and cascading stream through memory (25 bytes per timer for
//! a 4-byte payload, plus partly filled blocks):
//! - A timer's *cell* (`cells.rs`, 16 bytes for a 4-byte payload) holds its deadline, its
//!   payload and a generation checked against its [`Handle`]; beside it, in a dense byte
//!   array, the 4-bit epoch of its current slot entry. Cells never move.
//! - A *slot* (`slots.rs`) is a chain of 256-byte blocks of 8-byte entries: the cell index
//!   and epoch, and the low 32 bits of the tick the entry is filed under, which with the
//!   slot's position is the whole tick. Filing is an append; when a slot comes due it is read
//!   front to back, in place, and each entry is appended to the slot its tick now belongs to,
//!   without touching its cell. Timers are looked at only in the last two moves: when a
//!   level-1 slot comes due, a block's epochs are read (one byte each) and stale entries go,
//!   then the cells of the rest are loaded together, so their cache misses overlap, and
//!   timers pushed later are filed again; at level 0 the same cells are still in cache. A
//!   read block goes back to the pool and is the next one appended to, while still in cache.
//! - Cancelling and moving a timer earlier are lazy: the epoch moves on, and the entry left
//!   behind is dropped when the wheel reaches it (an epoch that comes round again after 16
//!   moves costs work, never correctness: see `cells.rs`). When stale entries outnumber live
//!   timers (by more than 1024), a sweep drops them, reading only epochs.
//! - Each slot keeps its earliest tick, so [`Wheel::next_deadline`] names the first tick
//!   anything is filed under, not the start of a coarse slot.
//!
//! Costs: `insert`, `cancel` and `reset` are O(1) (a sweep is paid for by the stale entries it
//! drops); a later `reset` (the keep-alive case) only rewrites the deadline: the timer is filed
//! again when its current entry comes due. A timer fires at the first `poll` whose tick is at
//! or past its deadline, never before. Deadlines more than [`RANGE`] − 1 ticks ahead are
//! clamped to that horizon (about 795 days at 1 ms per tick); deadlines in the past fire at
//! the next `poll`.
#![forbid(unsafe_code)]

mod cells;
mod clock;
mod level;
mod slots;

pub use cells::Handle;
pub use clock::Clock;
pub use level::RANGE;

use cells::{Cells, Due};
use level::{LEVELS, Occupancy, SLOTS, level_for, slot_for};
use slots::{BLOCK, Entry, Slots};

/// Stale entries tolerated beyond the number of live timers before a sweep.
const STALE_SLACK: usize = 1024;

/// The wheel. `T` is what a timer carries (e.g. a session key).
#[derive(Debug)]
pub struct Wheel<T> {
    cells: Cells<T>,
    slots: Slots,
    occupied: [Occupancy; LEVELS],
    now: u64,
}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Wheel<T> {
    /// An empty wheel standing at tick 0.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty wheel with room for `n` timers before its storage grows.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            cells: Cells::with_capacity(n),
            slots: Slots::with_capacity(LEVELS * SLOTS, n),
            occupied: [Occupancy::default(); LEVELS],
            now: 0,
        }
    }

    /// The tick the wheel has been polled up to.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Live timers.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Bytes of memory the wheel holds (cells, slot blocks and slot chains).
    pub fn memory_bytes(&self) -> usize {
        self.cells.bytes() + self.slots.bytes()
    }

    /// True when no timer is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a timer due at tick `deadline`. Panics if 2^28 timers are live already.
    pub fn insert(&mut self, deadline: u64, value: T) -> Handle {
        let deadline = self.clamp(deadline);
        let (handle, epoch) = self.cells.alloc(deadline, value);
        self.file(Entry::new(handle.index, epoch, deadline), deadline);
        handle
    }

    /// Removes a timer; `None` if the handle is stale (fired, cancelled, or never valid).
    /// Its slot entry is left behind, to be dropped when reached.
    pub fn cancel(&mut self, handle: Handle) -> Option<T> {
        let value = self.cells.remove(handle)?;
        self.tidy();
        Some(value)
    }

    /// Moves a timer's deadline; false if the handle is stale. A later deadline costs no
    /// filing now: the timer is filed again when its current entry comes due. An earlier one
    /// files a new entry under a new epoch and leaves the old one behind.
    pub fn reset(&mut self, handle: Handle, deadline: u64) -> bool {
        let deadline = self.clamp(deadline);
        let Some(old) = self.cells.deadline(handle) else { return false };
        self.cells.set_deadline(handle.index, deadline);
        if deadline < old {
            let epoch = self.cells.renew(handle.index);
            self.file(Entry::new(handle.index, epoch, deadline), deadline);
            self.tidy();
        }
        true
    }

    /// The deadline of a live timer.
    pub fn deadline(&self, handle: Handle) -> Option<u64> {
        self.cells.deadline(handle)
    }

    /// A tick at or before the earliest live deadline, or `None` when no timer is live: the
    /// earliest tick filed in the earliest slot (each slot keeps its own). It is exact unless
    /// a timer was pushed later and not yet filed again, or the earliest entry was left behind
    /// by a cancelled or moved timer.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let (level, slot, start) = self.next_slot()?;
        Some(self.slots.min(level * SLOTS + slot).max(start))
    }

    /// Advances to tick `now` and returns every timer due at or before it, earliest first.
    pub fn poll(&mut self, now: u64) -> Vec<T> {
        let mut fired = Vec::new();
        self.poll_into(now, &mut fired);
        fired
    }

    /// As [`Wheel::poll`], appending to `fired`.
    pub fn poll_into(&mut self, now: u64, fired: &mut Vec<T>) {
        while let Some((level, slot, start)) = self.next_slot() {
            if start > now {
                break;
            }
            self.now = self.now.max(start);
            self.occupied[level].clear(slot);
            let mut chain = self.slots.take(level * SLOTS + slot);
            while let Some((b, n)) = self.slots.front(&chain) {
                match level {
                    0 => self.expire(b, n, fired),
                    1 => self.settle(b, n, start),
                    _ => self.cascade(b, n, start),
                }
                self.slots.pop_front(&mut chain);
            }
        }
        self.now = self.now.max(now);
        if self.is_empty() && self.slots.len() > 0 {
            self.clear();
        }
    }

    /// Level 2 and up: every entry moves down by its tick alone (all of a slot's ticks lie
    /// within 2^30 after its start, so the stamp gives them); no cell is touched.
    fn cascade(&mut self, b: u32, n: usize, start: u64) {
        std::hint::black_box(self.slots.warm_next(b));
        for i in 0..n {
            let entry = self.slots.get(b, i);
            self.file(entry, start + u64::from(entry.stamp.wrapping_sub(start as u32)));
        }
    }

    /// Level 1, the last move before a timer fires. The block's epochs are read first (one
    /// byte per timer, in a dense array) and stale entries go; then the cells of the others
    /// are loaded together (their cache misses overlap), and a timer pushed later is filed
    /// under its deadline. Level 0 finds those cells still in cache.
    fn settle(&mut self, b: u32, n: usize, start: u64) {
        std::hint::black_box(self.slots.warm_next(b));
        let mut current = [false; BLOCK];
        for (i, c) in current.iter_mut().enumerate().take(n) {
            let entry = self.slots.get(b, i);
            *c = self.cells.epoch_is(entry.index(), entry.epoch());
        }
        let indices = (0..n).map(|i| if current[i] { self.slots.get(b, i).index() } else { 0 });
        std::hint::black_box(self.cells.warm(indices));
        for (i, &c) in current.iter().enumerate().take(n) {
            if !c {
                continue;
            }
            let entry = self.slots.get(b, i);
            let tick = start + u64::from(entry.stamp.wrapping_sub(start as u32));
            if let Some(tick) = self.cells.settle(entry.index(), entry.epoch(), tick) {
                self.file(entry, tick);
            }
        }
    }

    /// Level 0: each entry's timer fires, is filed again (pushed later), or is stale.
    fn expire(&mut self, b: u32, n: usize, fired: &mut Vec<T>) {
        for i in 0..n {
            let entry = self.slots.get(b, i);
            match self.cells.due(entry.index(), entry.epoch(), self.now) {
                Due::Stale => {}
                Due::Fire(value) => fired.push(value),
                Due::Refile(deadline) => self.file(entry, deadline),
            }
        }
    }

    fn clamp(&self, deadline: u64) -> u64 {
        deadline.clamp(self.now, self.now.saturating_add(RANGE - 1))
    }

    /// The earliest non-empty slot: the lowest non-empty level holds it, since a level's
    /// timers all fall within the current slot of the level above.
    #[inline]
    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        // Level 0 holds only ticks of the current 64-tick window, at or after `now`.
        let bits = self.occupied[0].0 >> (self.now % SLOTS as u64);
        if bits != 0 {
            let start = self.now + u64::from(bits.trailing_zeros());
            return Some((0, start as usize % SLOTS, start));
        }
        (1..LEVELS).find_map(|level| {
            self.occupied[level].next_due(level, self.now).map(|(slot, start)| (level, slot, start))
        })
    }

    /// Appends `entry` (its cell and epoch) under `tick` (at or after `now`).
    #[inline]
    fn file(&mut self, entry: Entry, tick: u64) {
        let level = level_for(self.now, tick);
        let slot = slot_for(level, tick);
        let entry = Entry::new(entry.index(), entry.epoch(), tick);
        self.slots.push(level * SLOTS + slot, entry, tick);
        self.occupied[level].set(slot);
    }

    /// After a cancel or an earlier reset (the operations that leave entries behind): with no
    /// live timer left, drops every entry; with stale entries more than the live timers (and
    /// a slack), sweeps them out. A poll adds no entry, so entries never exceed twice the most
    /// timers ever live at once, plus the slack.
    fn tidy(&mut self) {
        let live = self.len();
        if live == 0 {
            if self.slots.len() > 0 {
                self.clear();
            }
        } else if self.slots.len().saturating_sub(live) > live + STALE_SLACK {
            self.sweep();
        }
    }

    /// Drops every entry.
    fn clear(&mut self) {
        self.for_each_occupied(|wheel, place| {
            let chain = wheel.slots.take(place);
            wheel.slots.discard(chain);
        });
        self.occupied = [Occupancy::default(); LEVELS];
    }

    /// Drops every stale entry, keeping the others in order and in place. Only the dense epoch
    /// array is read (a freed cell's epoch has moved on too); an entry whose epoch came round
    /// again is kept, to be dropped when reached.
    fn sweep(&mut self) {
        self.for_each_occupied(|wheel, place| {
            wheel.slots.retain(place, |e| wheel.cells.epoch_is(e.index(), e.epoch()));
            if wheel.slots.is_empty(place) {
                wheel.occupied[place / SLOTS].clear(place % SLOTS);
            }
        });
    }

    fn for_each_occupied(&mut self, mut f: impl FnMut(&mut Self, usize)) {
        for level in 0..LEVELS {
            let mut bits = self.occupied[level].0;
            while bits != 0 {
                let slot = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                f(self, level * SLOTS + slot);
            }
        }
    }
}

#[cfg(test)]
mod tests;
