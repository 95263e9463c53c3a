//! Timer cells: one per live timer, indexed by its handle, holding its deadline and payload,
//! and beside each cell, in a dense byte array, the 4-bit epoch of its current slot entry. A
//! generation per cell makes a stale handle harmless; the epoch makes a stale slot entry (left
//! behind by a cancel or an earlier reset) harmless: it is dropped when the wheel reaches it.
//! Payloads stay here, so a cascade never touches a cell.
//!
//! Epochs wrap after 16 moves, so an entry left behind may look current again. That costs
//! work, never correctness: a timer fires only from a live cell whose deadline has passed, it
//! frees the cell as it fires, and a "current" entry that finds the deadline later files the
//! timer again under its deadline.

use std::num::NonZeroU32;

/// "No cell" in the free list.
const NIL: u32 = u32::MAX;
/// Epochs are 4 bits (they share a `u32` with the cell index in a slot entry).
pub const EPOCH_BITS: u32 = 4;
/// Cells a wheel can hold: indices use the other 28 bits.
pub const MAX_CELLS: usize = 1 << (32 - EPOCH_BITS);

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
    /// The timer was pushed later: file it again under this tick.
    Refile(u64),
}

/// The cells, their free list, and the epoch of each cell's current entry: a dense byte
/// array, so telling a stale entry from a current one touches one byte, not a cell.
#[derive(Debug)]
pub struct Cells<T> {
    cells: Vec<Cell<T>>,
    epochs: Vec<u8>,
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
        Self { cells: Vec::with_capacity(n), epochs: Vec::with_capacity(n), free: NIL, live: 0 }
    }

    /// Live timers.
    #[inline]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Bytes held by the cells and their epochs.
    pub fn bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Cell<T>>() + self.epochs.capacity()
    }

    /// Stores a timer due at `deadline`; returns its handle and the epoch of its entry.
    #[inline]
    pub fn alloc(&mut self, deadline: u64, value: T) -> (Handle, u8) {
        self.live += 1;
        let deadline = split(deadline);
        if let Some(Cell::Free { next, generation }) = self.cells.get(self.free as usize) {
            let (index, generation) = (self.free, *generation);
            self.free = *next;
            self.cells[index as usize] = Cell::Live { deadline, generation, value };
            return (Handle { index, generation: generation.get() }, self.epochs[index as usize]);
        }
        let index = self.cells.len();
        assert!(index < MAX_CELLS, "a wheel holds at most 2^28 timers");
        let generation = NonZeroU32::MIN;
        self.cells.push(Cell::Live { deadline, generation, value });
        self.epochs.push(0);
        (Handle { index: index as u32, generation: generation.get() }, 0)
    }

    /// The deadline of the timer `handle` refers to, if it is live.
    #[inline]
    pub fn deadline(&self, handle: Handle) -> Option<u64> {
        match self.cells.get(handle.index as usize) {
            Some(Cell::Live { deadline, generation, .. })
                if generation.get() == handle.generation =>
            {
                Some(join(*deadline))
            }
            _ => None,
        }
    }

    /// Rewrites a live timer's deadline.
    #[inline]
    pub fn set_deadline(&mut self, index: u32, new_deadline: u64) {
        if let Some(Cell::Live { deadline, .. }) = self.cells.get_mut(index as usize) {
            *deadline = split(new_deadline);
        }
    }

    /// A new entry is filed for cell `index` while its current one stays behind: moves the
    /// epoch on and returns it.
    #[inline]
    pub fn renew(&mut self, index: u32) -> u8 {
        let epoch = &mut self.epochs[index as usize];
        *epoch = epoch.wrapping_add(1) & ((1 << EPOCH_BITS) - 1);
        *epoch
    }

    /// Frees the timer `handle` refers to and returns its payload; `None` if it is not live.
    #[inline]
    pub fn remove(&mut self, handle: Handle) -> Option<T> {
        self.deadline(handle)?;
        self.release(handle.index)
    }

    /// True when the epoch of cell `index` is `epoch`: the entry may be its timer's current
    /// one (false means it is certainly stale). Reads only the dense epoch array.
    #[inline]
    pub fn epoch_is(&self, index: u32, epoch: u8) -> bool {
        self.epochs.get(index as usize) == Some(&epoch)
    }

    /// Decides the fate of a slot entry (`index`, `epoch`) reached at tick `now`.
    #[inline]
    pub fn due(&mut self, index: u32, epoch: u8, now: u64) -> Due<T> {
        match self.settle(index, epoch, now) {
            None => Due::Stale,
            Some(tick) if tick > now => Due::Refile(tick),
            Some(_) => self.release(index).map_or(Due::Stale, Due::Fire),
        }
    }

    /// Where a slot entry (`index`, `epoch`) filed under `tick` goes as its slot is read:
    /// `None` if it is stale, the timer's deadline if it was pushed past `tick`, else `tick`.
    #[inline]
    pub fn settle(&self, index: u32, epoch: u8, tick: u64) -> Option<u64> {
        if !self.epoch_is(index, epoch) {
            return None;
        }
        match self.cells.get(index as usize) {
            Some(Cell::Live { deadline, .. }) => Some(join(*deadline).max(tick)),
            _ => None,
        }
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

    fn release(&mut self, index: u32) -> Option<T> {
        let cell = self.cells.get_mut(index as usize)?;
        let Cell::Live { generation, .. } = cell else { return None };
        let free = Cell::Free { next: self.free, generation: next_generation(*generation) };
        let Cell::Live { value, .. } = std::mem::replace(cell, free) else { return None };
        // The entry that was current is stale from now on, even before the cell is reused.
        self.renew(index);
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
        let (first, _) = cells.alloc(10, 'a');
        assert_eq!(cells.remove(first), Some('a'));
        cells.age(NonZeroU32::MAX);
        let (last, _) = cells.alloc(20, 'b');
        assert_eq!(last.generation, u32::MAX);
        assert_eq!(cells.remove(last), Some('b'));
        let (wrapped, _) = cells.alloc(30, 'c');
        assert_eq!((wrapped.index, wrapped.generation), (first.index, 1), "0 is skipped");
        assert_eq!(cells.deadline(last), None);
        assert_eq!(cells.remove(last), None);
        assert_eq!(cells.deadline(wrapped), Some(30));
    }

    #[test]
    fn entries_resolve_by_epoch_and_epochs_wrap() {
        let mut cells = Cells::with_capacity(1);
        let (h, e) = cells.alloc(1 << 40, ());
        assert_eq!(cells.deadline(h), Some(1 << 40));
        assert_eq!(cells.due(h.index, e + 1, 1 << 41), Due::Stale, "another epoch: stale");
        assert_eq!(cells.due(h.index, e, 5), Due::Refile(1 << 40), "not due: filed again");
        let mut epoch = e;
        for _ in 0..16 {
            epoch = cells.renew(h.index);
        }
        assert_eq!(epoch, e, "after 16 moves the first entry's epoch comes round again");
        assert!(cells.epoch_is(h.index, e));
        assert_eq!(cells.due(h.index, e, 1 << 40), Due::Fire(()));
        assert_eq!(cells.due(h.index, e, 1 << 40), Due::Stale, "fired once only");
        assert!(!cells.epoch_is(h.index, e), "freeing a cell moves its epoch on");
        assert_eq!(cells.len(), 0);
    }
}
