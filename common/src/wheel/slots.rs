//! Slot storage: each slot of each level is a chain of fixed-size blocks of 8-byte entries
//! (cell index, filing stamp), drawn from one pool. Filing a timer is an append to its slot's
//! tail block; a cascade or an expiry reads a slot block by block, front to back, and a block
//! it has read goes back to the pool, to be the next one appended to while it is still in
//! cache. Nothing points into a block from outside, so entries move without bookkeeping.

/// Entries per block: 256 bytes, four cache lines.
pub const BLOCK: usize = 32;

/// "No block".
const NIL: u32 = u32::MAX;

/// A timer's entry in a slot: its cell and the low 32 bits of the tick it is filed under
/// (the slot's position gives the rest, and the cell keeps the stamp of its current entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry {
    /// Index of the timer's cell.
    pub index: u32,
    /// Low 32 bits of the tick the entry is filed under.
    pub stamp: u32,
}

#[derive(Debug, Clone)]
struct Block {
    entries: [Entry; BLOCK],
    next: u32,
}

/// A slot's chain: first and last block, and how many entries the last one holds.
#[derive(Debug, Clone, Copy)]
pub struct Chain {
    head: u32,
    tail: u32,
    fill: u32,
}

impl Chain {
    const EMPTY: Chain = Chain { head: NIL, tail: NIL, fill: BLOCK as u32 };
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
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes held by the blocks and the chains.
    pub fn bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.chains.capacity() * std::mem::size_of::<Chain>()
    }

    /// True when slot `place` holds no entry.
    pub fn is_empty(&self, place: usize) -> bool {
        self.chains[place].head == NIL
    }

    /// Appends an entry to slot `place`.
    pub fn push(&mut self, place: usize, entry: Entry) {
        let mut chain = self.chains[place];
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

    /// Detaches slot `place`'s chain, leaving the slot empty; read it with [`Slots::pop`].
    pub fn take(&mut self, place: usize) -> Chain {
        std::mem::replace(&mut self.chains[place], Chain::EMPTY)
    }

    /// Copies the first block of a detached chain into `buf`, returns the block to the pool
    /// and says how many entries it held (0 once the chain is used up).
    pub fn pop(&mut self, chain: &mut Chain, buf: &mut [Entry; BLOCK]) -> usize {
        let b = chain.head;
        if b == NIL {
            return 0;
        }
        let block = &mut self.blocks[b as usize];
        let n = if b == chain.tail { chain.fill as usize } else { BLOCK };
        buf[..n].copy_from_slice(&block.entries[..n]);
        chain.head = block.next;
        block.next = self.free;
        self.free = b;
        if chain.head == NIL {
            *chain = Chain::EMPTY;
        }
        self.len -= n;
        n
    }

    /// Drops a detached chain's entries.
    pub fn discard(&mut self, mut chain: Chain) {
        let mut buf = [Entry::default(); BLOCK];
        while self.pop(&mut chain, &mut buf) > 0 {}
    }

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
        let mut buf = [Entry::default(); BLOCK];
        let mut out = Vec::new();
        loop {
            let n = slots.pop(&mut chain, &mut buf);
            if n == 0 {
                return out;
            }
            out.extend(buf[..n].iter().map(|e| e.index));
        }
    }

    #[test]
    fn chains_keep_order_across_blocks_and_blocks_are_reused() {
        let mut slots = Slots::with_capacity(3, 0);
        for i in 0..(2 * BLOCK as u32 + 5) {
            slots.push(1, Entry { index: i, stamp: 0 });
        }
        slots.push(2, Entry { index: 99, stamp: 0 });
        assert_eq!(slots.len(), 2 * BLOCK + 6);
        let blocks = slots.blocks.len();
        assert_eq!(drain(&mut slots, 1), (0..(2 * BLOCK as u32 + 5)).collect::<Vec<_>>());
        assert_eq!(drain(&mut slots, 1), Vec::<u32>::new(), "a taken slot is empty");
        for i in 0..(3 * BLOCK as u32) {
            slots.push(0, Entry { index: i, stamp: 0 });
        }
        assert_eq!(slots.blocks.len(), blocks, "freed blocks are reused first");
        let chain = slots.take(0);
        slots.discard(chain);
        assert_eq!(drain(&mut slots, 2), vec![99]);
        assert_eq!(slots.len(), 0);
    }
}
