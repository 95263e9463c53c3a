//! A hierarchical timing wheel (Varghese & Lauck): 6 levels of 64 slots over integer ticks,
//! occupancy bitmaps so empty slots are never visited, slab storage with generation-checked
//! handles. Pure: no clock, no I/O; [`Clock`] maps `Instant`s to ticks.
//!
//! Costs: `insert`, `cancel` and an earlier `reset` are O(1); a later `reset` (the keep-alive
//! case) only rewrites the deadline: the timer stays where it is and is moved when its old slot
//! comes due. A timer fires at the first `poll` whose tick is at or past its deadline, never
//! before. Deadlines more than [`RANGE`] − 1 ticks ahead are clamped to that horizon
//! (about 795 days at 1 ms per tick); deadlines in the past fire at the next `poll`.
#![forbid(unsafe_code)]

mod clock;
mod level;
mod slab;

pub use clock::Clock;
pub use level::RANGE;
pub use slab::Handle;

use level::{LEVELS, Occupancy, SLOTS, level_for, slot_for};
use slab::{NIL, Slab, UNPLACED};

/// The wheel. `T` is what a timer carries (e.g. a session key).
#[derive(Debug)]
pub struct Wheel<T> {
    slab: Slab<T>,
    heads: Vec<u32>,
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
        Self {
            slab: Slab::default(),
            heads: vec![NIL; LEVELS * SLOTS],
            occupied: [Occupancy::default(); LEVELS],
            now: 0,
        }
    }

    /// An empty wheel with room for `n` timers before its slab grows.
    pub fn with_capacity(n: usize) -> Self {
        Self { slab: Slab::with_capacity(n), ..Self::new() }
    }

    /// The tick the wheel has been polled up to.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Live timers.
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// Bytes of memory the wheel holds (slab cells and slot heads).
    pub fn memory_bytes(&self) -> usize {
        self.slab.bytes() + self.heads.capacity() * std::mem::size_of::<u32>()
    }

    /// True when no timer is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a timer due at tick `deadline`.
    pub fn insert(&mut self, deadline: u64, value: T) -> Handle {
        let deadline = self.clamp(deadline);
        let handle = self.slab.alloc(deadline, value);
        self.link(handle.index);
        handle
    }

    /// Removes a timer; `None` if the handle is stale (fired, cancelled, or never valid).
    pub fn cancel(&mut self, handle: Handle) -> Option<T> {
        self.slab.resolve(handle)?;
        self.unlink(handle.index);
        self.slab.release(handle.index)
    }

    /// Moves a timer's deadline; false if the handle is stale. A later deadline costs no
    /// relinking now: the timer is re-filed when its current slot comes due.
    pub fn reset(&mut self, handle: Handle, deadline: u64) -> bool {
        let deadline = self.clamp(deadline);
        let Some(entry) = self.slab.resolve(handle) else { return false };
        let old = entry.deadline;
        self.slab.get_mut(handle.index).deadline = deadline;
        if deadline < old {
            self.unlink(handle.index);
            self.link(handle.index);
        }
        true
    }

    /// The deadline of a live timer.
    pub fn deadline(&self, handle: Handle) -> Option<u64> {
        self.slab.resolve(handle).map(|e| e.deadline)
    }

    /// A tick at or before the earliest live deadline (exact unless a timer was pushed later
    /// and not yet re-filed), or `None` when empty.
    pub fn next_deadline(&self) -> Option<u64> {
        self.next_slot().map(|(_, _, start)| start)
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
            let mut index = self.take_slot(level, slot);
            while index != NIL {
                let next = self.slab.get(index).next;
                self.slab.get_mut(index).place = UNPLACED;
                if self.slab.get(index).deadline <= self.now {
                    fired.extend(self.slab.release(index));
                } else {
                    self.link(index);
                }
                index = next;
            }
        }
        self.now = self.now.max(now);
    }

    fn clamp(&self, deadline: u64) -> u64 {
        deadline.clamp(self.now, self.now.saturating_add(RANGE - 1))
    }

    /// The earliest non-empty slot: lower levels always come due before higher ones.
    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        (0..LEVELS).find_map(|level| {
            self.occupied[level].next_due(level, self.now).map(|(slot, start)| (level, slot, start))
        })
    }

    fn link(&mut self, index: u32) {
        let deadline = self.slab.get(index).deadline.max(self.now);
        let level = level_for(self.now, deadline);
        let slot = slot_for(level, deadline);
        let place = level * SLOTS + slot;
        let head = self.heads[place];
        let e = self.slab.get_mut(index);
        e.place = place as u16;
        e.prev = NIL;
        e.next = head;
        if head != NIL {
            self.slab.get_mut(head).prev = index;
        }
        self.heads[place] = index;
        self.occupied[level].set(slot);
    }

    fn unlink(&mut self, index: u32) {
        let e = self.slab.get(index);
        let (prev, next, place) = (e.prev, e.next, e.place);
        if place == UNPLACED {
            return;
        }
        if prev == NIL {
            self.heads[place as usize] = next;
        } else {
            self.slab.get_mut(prev).next = next;
        }
        if next != NIL {
            self.slab.get_mut(next).prev = prev;
        }
        if self.heads[place as usize] == NIL {
            self.occupied[place as usize / SLOTS].clear(place as usize % SLOTS);
        }
        let e = self.slab.get_mut(index);
        e.place = UNPLACED;
        e.prev = NIL;
        e.next = NIL;
    }

    /// Detaches a whole slot's list and returns its first entry.
    fn take_slot(&mut self, level: usize, slot: usize) -> u32 {
        let place = level * SLOTS + slot;
        self.occupied[level].clear(slot);
        std::mem::replace(&mut self.heads[place], NIL)
    }
}

#[cfg(test)]
mod tests;
