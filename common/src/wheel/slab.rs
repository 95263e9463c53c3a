//! Timer storage: a slab of entries with generation-checked handles, each entry linked into
//! its slot's doubly-linked list by index (no pointers, no unsafe).

/// "No entry" in a link.
pub const NIL: u32 = u32::MAX;
/// `place` of an entry that is in no slot (free).
pub const UNPLACED: u16 = u16::MAX;

/// A reference to a timer. Stale once the timer fired or was cancelled: the slot's generation
/// moves on, so an old handle can never touch a reused slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    pub(super) index: u32,
    pub(super) generation: u32,
}

/// One timer (or a free cell).
#[derive(Debug)]
pub struct Entry<T> {
    /// Tick at which it is due.
    pub deadline: u64,
    /// Previous entry in the same slot.
    pub prev: u32,
    /// Next entry in the same slot (or next free cell).
    pub next: u32,
    /// Bumped each time the cell is freed.
    pub generation: u32,
    /// `level * 64 + slot`, or [`UNPLACED`].
    pub place: u16,
    /// The payload; `None` for a free cell.
    pub value: Option<T>,
}

/// The slab.
#[derive(Debug)]
pub struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: u32,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self { entries: Vec::new(), free: NIL, len: 0 }
    }
}

impl<T> Slab<T> {
    /// A slab with room for `n` timers before it grows.
    pub fn with_capacity(n: usize) -> Self {
        Self { entries: Vec::with_capacity(n), free: NIL, len: 0 }
    }

    /// Live timers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes held by the slab's cells.
    pub fn bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry<T>>()
    }

    /// Stores a value; returns its handle.
    pub fn alloc(&mut self, deadline: u64, value: T) -> Handle {
        self.len += 1;
        if self.free != NIL {
            let index = self.free;
            let e = &mut self.entries[index as usize];
            self.free = e.next;
            e.deadline = deadline;
            e.prev = NIL;
            e.next = NIL;
            e.place = UNPLACED;
            e.value = Some(value);
            return Handle { index, generation: e.generation };
        }
        let index = u32::try_from(self.entries.len()).unwrap_or(NIL - 1);
        self.entries.push(Entry {
            deadline,
            prev: NIL,
            next: NIL,
            generation: 0,
            place: UNPLACED,
            value: Some(value),
        });
        Handle { index, generation: 0 }
    }

    /// Frees a cell (already unlinked) and returns its value.
    pub fn release(&mut self, index: u32) -> Option<T> {
        let e = &mut self.entries[index as usize];
        let value = e.value.take();
        e.generation = e.generation.wrapping_add(1);
        e.place = UNPLACED;
        e.next = self.free;
        self.free = index;
        self.len -= 1;
        value
    }

    /// The live entry a handle refers to, if the handle is current.
    pub fn resolve(&self, handle: Handle) -> Option<&Entry<T>> {
        self.entries
            .get(handle.index as usize)
            .filter(|e| e.generation == handle.generation && e.value.is_some())
    }

    /// Entry by index.
    pub fn get(&self, index: u32) -> &Entry<T> {
        &self.entries[index as usize]
    }

    /// Mutable entry by index.
    pub fn get_mut(&mut self, index: u32) -> &mut Entry<T> {
        &mut self.entries[index as usize]
    }
}
