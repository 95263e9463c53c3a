//! Timer cells: one per live timer, indexed by its handle, holding its deadline and payload,
//! and beside each cell the stamp of its current entry in the slots (the low 32 bits of the
//! tick that entry is filed under). A generation per cell makes a stale handle harmless; the
//! stamp makes a stale slot entry (left behind by a cancel or an earlier reset) harmless: it is
//! dropped when the wheel reaches it. Payloads stay here, so a cascade never touches a cell.

use std::num::NonZeroU32;

/// "No cell" in the free list.
const NIL: u32 = u32::MAX;

/// A reference to a timer. Stale once the timer fired or was cancelled: the cell's generation
/// moves on, so an old handle can never touch a reused cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    pub(super) index: u32,
    pub(super) generation: u32,
}

/// One cell: 16 bytes for a 4-byte payload (so a cell never straddles two cache lines). The
/// deadline is kept as two `u32` halves so the cell needs only 4-byte alignment, and the
/// generation is non-zero so it doubles as the tag.
#[derive(Debug)]
enum Cell<T> {
    /// A timer: due at `deadline` (low half, high half).
    Live { deadline: [u32; 2], generation: NonZeroU32, value: T },
    /// A free cell: the next free one and the generation its next timer gets.
    Free { next: u32, generation: NonZeroU32 },
}

/// What the wheel does with a slot entry that has come due.
#[derive(Debug, PartialEq, Eq)]
pub enum Due<T> {
    /// The entry is stale (its timer was cancelled, fired or moved): drop it.
    Stale,
    /// The timer fires: here is its payload; its cell is free again.
    Fire(T),
    /// The timer was pushed later: file it again under this tick (its stamp already says so).
    Refile(u64),
}

/// The cells, their free list, and beside them the stamp of each cell's current entry: a dense
/// 4-byte array, so telling a stale entry from a current one touches 4 bytes, not a cell.
#[derive(Debug)]
pub struct Cells<T> {
    cells: Vec<Cell<T>>,
    stamps: Vec<u32>,
    free: u32,
    live: usize,
}

fn split(tick: u64) -> [u32; 2] {
    [tick as u32, (tick >> 32) as u32]
}

fn join([low, high]: [u32; 2]) -> u64 {
    (u64::from(high) << 32) | u64::from(low)
}

fn next_generation(g: NonZeroU32) -> NonZeroU32 {
    NonZeroU32::new(g.get().wrapping_add(1)).unwrap_or(NonZeroU32::MIN)
}

impl<T> Cells<T> {
    /// Room for `n` timers before the cell array grows.
    pub fn with_capacity(n: usize) -> Self {
        Self { cells: Vec::with_capacity(n), stamps: Vec::with_capacity(n), free: NIL, live: 0 }
    }

    /// Live timers.
    #[inline]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Bytes held by the cells and their stamps.
    pub fn bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Cell<T>>()
            + self.stamps.capacity() * std::mem::size_of::<u32>()
    }

    /// Stores a timer due at `deadline` whose entry is filed with `stamp`.
    #[inline]
    pub fn alloc(&mut self, deadline: u64, stamp: u32, value: T) -> Handle {
        self.live += 1;
        let deadline = split(deadline);
        if let Some(Cell::Free { next, generation }) = self.cells.get(self.free as usize) {
            let (index, generation) = (self.free, *generation);
            self.free = *next;
            self.cells[index as usize] = Cell::Live { deadline, generation, value };
            self.stamps[index as usize] = stamp;
            return Handle { index, generation: generation.get() };
        }
        let index = u32::try_from(self.cells.len())
            .ok()
            .filter(|&i| i != NIL)
            .expect("a wheel holds fewer than 2^32 - 1 timers");
        let generation = NonZeroU32::MIN;
        self.cells.push(Cell::Live { deadline, generation, value });
        self.stamps.push(stamp);
        Handle { index, generation: generation.get() }
    }

    /// The deadline and entry stamp of the timer `handle` refers to, if it is live.
    #[inline]
    pub fn get(&self, handle: Handle) -> Option<(u64, u32)> {
        match self.cells.get(handle.index as usize) {
            Some(Cell::Live { deadline, generation, .. })
                if generation.get() == handle.generation =>
            {
                Some((join(*deadline), self.stamps[handle.index as usize]))
            }
            _ => None,
        }
    }

    /// Rewrites a live timer's deadline, and its stamp when given (a new entry was filed).
    #[inline]
    pub fn set(&mut self, index: u32, new_deadline: u64, new_stamp: Option<u32>) {
        if let Some(Cell::Live { deadline, .. }) = self.cells.get_mut(index as usize) {
            *deadline = split(new_deadline);
            if let Some(s) = new_stamp {
                self.stamps[index as usize] = s;
            }
        }
    }

    /// Frees the timer `handle` refers to and returns its payload; `None` if it is not live.
    #[inline]
    pub fn remove(&mut self, handle: Handle) -> Option<T> {
        self.get(handle)?;
        self.release(handle.index)
    }

    /// True when the stamp of cell `index` is `stamp`: the entry may be its timer's current
    /// one (false means it is certainly stale). Reads only the dense stamp array.
    #[inline]
    pub fn stamp_is(&self, index: u32, stamp: u32) -> bool {
        self.stamps.get(index as usize) == Some(&stamp)
    }

    /// Decides the fate of a slot entry (`index`, `stamp`) reached at tick `now`.
    #[inline]
    pub fn due(&mut self, index: u32, stamp: u32, now: u64) -> Due<T> {
        match self.settle(index, stamp, now) {
            None => Due::Stale,
            Some(tick) if tick > now => Due::Refile(tick),
            Some(_) => self.release(index).map_or(Due::Stale, Due::Fire),
        }
    }

    /// The tick to file the slot entry (`index`, `stamp`, filed under `tick`) under as its
    /// slot cascades: `None` if the entry is stale, the timer's deadline if it was pushed
    /// past `tick` (the stamp then names the new entry), else `tick`.
    #[inline]
    pub fn settle(&mut self, index: u32, stamp: u32, tick: u64) -> Option<u64> {
        if !self.stamp_is(index, stamp) {
            return None;
        }
        let Some(Cell::Live { deadline, .. }) = self.cells.get(index as usize) else {
            return None;
        };
        let deadline = join(*deadline);
        if deadline > tick {
            self.stamps[index as usize] = deadline as u32;
            return Some(deadline);
        }
        Some(tick)
    }

    /// Loads the cells at `indices` without branching on what they hold, so their cache
    /// misses overlap instead of coming one after another; returns a value to be ignored.
    #[inline]
    pub fn warm(&self, indices: impl Iterator<Item = u32>) -> usize {
        indices
            .map(|i| self.cells.get(i as usize).is_some_and(|c| matches!(c, Cell::Live { .. })))
            .map(usize::from)
            .sum()
    }

    /// True when the slot entry (`index`, `stamp`) is its timer's current one.
    #[inline]
    pub fn is_current(&self, index: u32, stamp: u32) -> bool {
        self.stamp_is(index, stamp)
            && matches!(self.cells.get(index as usize), Some(Cell::Live { .. }))
    }

    fn release(&mut self, index: u32) -> Option<T> {
        let cell = self.cells.get_mut(index as usize)?;
        let Cell::Live { generation, .. } = cell else { return None };
        let free = Cell::Free { next: self.free, generation: next_generation(*generation) };
        let Cell::Live { value, .. } = std::mem::replace(cell, free) else { return None };
        // The entry that was current is stale from now on, even before the cell is reused.
        self.stamps[index as usize] = self.stamps[index as usize].wrapping_add(1);
        self.free = index;
        self.live -= 1;
        Some(value)
    }

    /// Test hook: every free cell's next timer gets generation `g` (to reach the wrap).
    #[cfg(test)]
    pub fn age(&mut self, g: NonZeroU32) {
        for cell in &mut self.cells {
            if let Cell::Free { generation, .. } = cell {
                *generation = g;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_is_sixteen_bytes_for_a_four_byte_payload() {
        assert_eq!(std::mem::size_of::<Cell<u32>>(), 16);
    }

    #[test]
    fn generations_wrap_past_zero_and_stale_handles_stay_stale() {
        let mut cells = Cells::with_capacity(1);
        let first = cells.alloc(10, 10, 'a');
        assert_eq!(cells.remove(first), Some('a'));
        cells.age(NonZeroU32::MAX);
        let last = cells.alloc(20, 20, 'b');
        assert_eq!(last.generation, u32::MAX);
        assert_eq!(cells.remove(last), Some('b'));
        let wrapped = cells.alloc(30, 30, 'c');
        assert_eq!((wrapped.index, wrapped.generation), (first.index, 1), "0 is skipped");
        assert_eq!(cells.get(last), None);
        assert_eq!(cells.remove(last), None);
        assert_eq!(cells.get(wrapped), Some((30, 30)));
    }

    #[test]
    fn entries_resolve_by_stamp() {
        let mut cells = Cells::with_capacity(1);
        let h = cells.alloc(1 << 40, 7, ());
        assert_eq!(cells.get(h), Some((1 << 40, 7)));
        assert_eq!(cells.due(h.index, 6, 1 << 41), Due::Stale, "another stamp is a stale entry");
        assert_eq!(cells.due(h.index, 7, 5), Due::Refile(1 << 40), "not due: filed again");
        assert!(cells.is_current(h.index, 0), "the stamp now names the refiled entry");
        assert_eq!(cells.due(h.index, 0, 1 << 40), Due::Fire(()));
        assert_eq!(cells.due(h.index, 0, 1 << 40), Due::Stale, "fired once only");
        assert_eq!(cells.len(), 0);
    }
}
