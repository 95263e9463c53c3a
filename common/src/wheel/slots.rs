//! Slot storage: each slot of each level is a chain of fixed-size blocks of 8-byte entries
//! (cell index and epoch, filing stamp), drawn from one pool. Filing a timer is an append to its slot's
//! tail block; a cascade or an expiry reads a slot block by block, front to back, in place,
//! and a block it has read goes back to the pool, to be the next one appended to while it is
//! still in cache. Nothing points into a block from outside, so entries move without bookkeeping.

/// Entries per block: 256 bytes, four cache lines.
pub const BLOCK: usize = 32;

/// "No block".
const NIL: u32 = u32::MAX;

/// A timer's entry in a slot: its cell index and epoch (28 and 4 bits), and the low 32 bits
/// of the tick it is filed under (the slot's position gives the rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry {
    /// Cell index << 4 | epoch.
    key: u32,
    /// Low 32 bits of the tick the entry is filed under.
    pub stamp: u32,
}

impl Entry {
    /// The entry of cell `index` (below 2^28) at `epoch` (below 16), filed under `tick`.
    #[inline]
    pub fn new(index: u32, epoch: u8, tick: u64) -> Self {
        Self { key: (index << 4) | u32::from(epoch & 15), stamp: tick as u32 }
    }

    /// The timer's cell.
    #[inline]
    pub fn index(self) -> u32 {
        self.key >> 4
    }

    /// The epoch the entry was filed in.
    #[inline]
    pub fn epoch(self) -> u8 {
        (self.key & 15) as u8
    }
}

#[derive(Debug, Clone)]
struct Block {
    entries: [Entry; BLOCK],
    next: u32,
}

/// A slot's chain: first and last block, how many entries the last one holds, and the
/// earliest tick filed in it (or a tick before it).
#[derive(Debug, Clone, Copy)]
pub struct Chain {
    head: u32,
    tail: u32,
    fill: u32,
    min: u64,
}

impl Chain {
    const EMPTY: Chain = Chain { head: NIL, tail: NIL, fill: BLOCK as u32, min: u64::MAX };
}

/// All slots and their block pool.
#[derive(Debug)]
pub struct Slots {
    blocks: Vec<Block>,
    free: u32,
    chains: Vec<Chain>,
    len: usize,
}

impl Slots {
    /// `places` empty slots, with blocks reserved for `entries` entries.
    pub fn with_capacity(places: usize, entries: usize) -> Self {
        Self {
            blocks: Vec::with_capacity(if entries == 0 { 0 } else { entries / BLOCK + places }),
            free: NIL,
            chains: vec![Chain::EMPTY; places],
            len: 0,
        }
    }

    /// Entries filed, stale ones included.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes held by the blocks and the chains.
    pub fn bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.chains.capacity() * std::mem::size_of::<Chain>()
    }

    /// True when slot `place` holds no entry.
    #[inline]
    pub fn is_empty(&self, place: usize) -> bool {
        self.chains[place].head == NIL
    }

    /// Slot `place`'s earliest tick (or a tick before it); `u64::MAX` when it is empty.
    #[inline]
    pub fn min(&self, place: usize) -> u64 {
        self.chains[place].min
    }

    /// Appends an entry filed under `tick` to slot `place`.
    #[inline]
    pub fn push(&mut self, place: usize, entry: Entry, tick: u64) {
        let mut chain = self.chains[place];
        chain.min = chain.min.min(tick);
        if chain.fill as usize == BLOCK {
            let b = self.alloc_block();
            match chain.tail {
                NIL => chain.head = b,
                tail => self.blocks[tail as usize].next = b,
            }
            chain.tail = b;
            chain.fill = 0;
        }
        self.blocks[chain.tail as usize].entries[chain.fill as usize] = entry;
        chain.fill += 1;
        self.chains[place] = chain;
        self.len += 1;
    }

    /// Detaches slot `place`'s chain, leaving the slot empty; read it with [`Slots::front`].
    #[inline]
    pub fn take(&mut self, place: usize) -> Chain {
        std::mem::replace(&mut self.chains[place], Chain::EMPTY)
    }

    /// The first block of a detached chain and how many entries it holds; `None` once the
    /// chain is used up. Read its entries with [`Slots::get`], then drop it with
    /// [`Slots::pop_front`]: until then pushes never reuse it.
    #[inline]
    pub fn front(&self, chain: &Chain) -> Option<(u32, usize)> {
        match chain.head {
            NIL => None,
            b if b == chain.tail => Some((b, chain.fill as usize)),
            b => Some((b, BLOCK)),
        }
    }

    /// Entry `i` of block `b`.
    #[inline]
    pub fn get(&self, b: u32, i: usize) -> Entry {
        self.blocks[b as usize].entries[i]
    }

    /// Loads one entry per cache line of the block after `b`, so a chain read front to back
    /// finds its next block already on its way; returns a value to be ignored.
    #[inline]
    pub fn warm_next(&self, b: u32) -> u32 {
        match self.blocks.get(self.blocks[b as usize].next as usize) {
            Some(next) => (0..BLOCK).step_by(8).map(|i| next.entries[i].key).fold(0, |a, x| a ^ x),
            None => 0,
        }
    }

    /// Returns the first block of a detached chain to the pool.
    #[inline]
    pub fn pop_front(&mut self, chain: &mut Chain) {
        let Some((b, n)) = self.front(chain) else { return };
        let block = &mut self.blocks[b as usize];
        chain.head = block.next;
        block.next = self.free;
        self.free = b;
        if chain.head == NIL {
            *chain = Chain::EMPTY;
        }
        self.len -= n;
    }

    /// Keeps only the entries of slot `place` for which `keep` holds, in order, compacting
    /// them in place (a read cursor and a write cursor along the chain); emptied blocks go
    /// back to the pool. The slot's earliest tick stays as it was (still a bound).
    pub fn retain(&mut self, place: usize, mut keep: impl FnMut(Entry) -> bool) {
        let mut chain = self.chains[place];
        if chain.head == NIL {
            return;
        }
        let (mut wb, mut wi, mut rb, mut dropped) = (chain.head, 0, chain.head, 0);
        loop {
            let n = if rb == chain.tail { chain.fill as usize } else { BLOCK };
            for ri in 0..n {
                let entry = self.blocks[rb as usize].entries[ri];
                if !keep(entry) {
                    dropped += 1;
                    continue;
                }
                if wi == BLOCK {
                    wb = self.blocks[wb as usize].next;
                    wi = 0;
                }
                self.blocks[wb as usize].entries[wi] = entry;
                wi += 1;
            }
            if rb == chain.tail {
                break;
            }
            rb = self.blocks[rb as usize].next;
        }
        self.len -= dropped;
        // Blocks after the write cursor's go back to the pool (all of them if nothing stayed).
        let mut b = if wi == 0 { chain.head } else { self.blocks[wb as usize].next };
        if wi == 0 {
            chain = Chain::EMPTY;
        } else {
            self.blocks[wb as usize].next = NIL;
            chain.tail = wb;
            chain.fill = wi as u32;
        }
        while b != NIL {
            let next = self.blocks[b as usize].next;
            self.blocks[b as usize].next = self.free;
            self.free = b;
            b = next;
        }
        self.chains[place] = chain;
    }

    /// Drops a detached chain's entries.
    pub fn discard(&mut self, mut chain: Chain) {
        while self.front(&chain).is_some() {
            self.pop_front(&mut chain);
        }
    }

    #[inline]
    fn alloc_block(&mut self) -> u32 {
        if self.free == NIL {
            let b = u32::try_from(self.blocks.len()).expect("fewer than 2^32 blocks");
            self.blocks.push(Block { entries: [Entry::default(); BLOCK], next: NIL });
            return b;
        }
        let b = self.free;
        let block = &mut self.blocks[b as usize];
        self.free = block.next;
        block.next = NIL;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(slots: &mut Slots, place: usize) -> Vec<u32> {
        let mut chain = slots.take(place);
        let mut out = Vec::new();
        while let Some((b, n)) = slots.front(&chain) {
            out.extend((0..n).map(|i| slots.get(b, i).index()));
            slots.pop_front(&mut chain);
        }
        out
    }

    #[test]
    fn chains_keep_order_across_blocks_and_blocks_are_reused() {
        let mut slots = Slots::with_capacity(3, 0);
        for i in 0..(2 * BLOCK as u32 + 5) {
            slots.push(1, Entry::new(i, 0, 0), 0);
        }
        slots.push(2, Entry::new(99, 0, 0), 0);
        assert_eq!(slots.len(), 2 * BLOCK + 6);
        let blocks = slots.blocks.len();
        assert_eq!(drain(&mut slots, 1), (0..(2 * BLOCK as u32 + 5)).collect::<Vec<_>>());
        assert_eq!(drain(&mut slots, 1), Vec::<u32>::new(), "a taken slot is empty");
        for i in 0..(3 * BLOCK as u32) {
            slots.push(0, Entry::new(i, 0, 0), 0);
        }
        assert_eq!(slots.blocks.len(), blocks, "freed blocks are reused first");
        let chain = slots.take(0);
        slots.discard(chain);
        assert_eq!(drain(&mut slots, 2), vec![99]);
        assert_eq!(slots.len(), 0);
        let before = slots.blocks.len();
        for i in 0..(3 * BLOCK as u32 + 7) {
            slots.push(1, Entry::new(i, 0, 0), 0);
        }
        slots.retain(1, |e| e.index() % 3 == 0);
        let kept: Vec<u32> = (0..(3 * BLOCK as u32 + 7)).filter(|i| i % 3 == 0).collect();
        assert_eq!(slots.len(), kept.len());
        for i in 0..5 {
            slots.push(1, Entry::new(1000 + i, 0, 0), 0);
        }
        let mut want = kept.clone();
        want.extend(1000..1005);
        assert_eq!(drain(&mut slots, 1), want, "compacted in order, and appends still work");
        assert_eq!(slots.blocks.len(), before, "blocks emptied by the compaction were reused");
        for i in 0..(2 * BLOCK as u32) {
            slots.push(2, Entry::new(i, 0, 0), 0);
        }
        slots.retain(2, |_| false);
        assert!(slots.is_empty(2));
        assert_eq!(slots.len(), 0);
    }
}
