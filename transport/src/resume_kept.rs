//! The bytes of a step's answer kept for a resume: its last chunks, within the window and the
//! transport's budget, and the digest of the bytes before them. The chunks are hashed only when
//! a resume asks for the digest, or when they leave: most answers are never resumed, and their
//! bytes go out without waiting for a CRC. The budget of kept bytes is the transport's, shared
//! by every session (`max_resume_bytes`), and each identity's sessions together keep at most
//! its share of it (`max_resume_bytes_per_token`): a session that finds no room keeps less of
//! its answer (a cut further back than it kept is a clean lost connection for its client),
//! never more memory.

use std::collections::VecDeque;

use bytes::Bytes;
use common::wire::AnswerDigest;

use crate::Error;
use crate::resume_room::ResumeRoom;

/// What a resumed response sends next from the kept bytes ([`KeptAnswer::chunk_from`]).
#[derive(Debug)]
pub enum KeptChunk {
    /// These bytes (a kept chunk or its end, shared, not copied).
    Bytes(Bytes),
    /// Every kept byte was sent: the rest is the turn's, if it still runs.
    CaughtUp,
    /// The bytes asked for are kept no more (a new step began, a later resume reads them, or
    /// they left the window): the response ends there.
    Gone,
}

/// What keeping a chunk costs beyond its bytes (its handle, offset and place in the list),
/// counted in the budget with them: an answer that trickles in as tiny chunks cannot keep
/// many times its budget in bookkeeping.
pub const KEPT_CHUNK_COST: u64 = 64;

/// Most chunks whose list is kept from one answer to the next, not freed.
const KEEP_LIST_CAPACITY: usize = 16;

/// Where a kept answer stands, as it moves to another process in a take-over (its bytes go
/// beside it).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct KeptPlace {
    /// The answer's byte the kept ones start at.
    pub base: u64,
    /// The digest of the bytes before `base`.
    pub base_digest: AnswerDigest,
    /// The answer's length so far.
    pub len: u64,
}

/// An answer's last bytes, in chunks (shared with what went out, not copied).
#[derive(Debug)]
pub struct KeptAnswer {
    /// Each chunk kept, with the answer's offset of its first byte (a resume finds the chunk
    /// holding a byte by a binary search: answers read as they come are many small chunks).
    chunks: VecDeque<(u64, Bytes)>,
    /// The answer's offset of the first chunk kept.
    base: u64,
    /// The digest of the answer's bytes before `base`.
    base_digest: AnswerDigest,
    /// Bytes of the answer so far.
    len: u64,
    /// Where the kept bytes' room comes from.
    budget: ResumeRoom,
}

impl KeptAnswer {
    /// Nothing kept yet, the room taken from `budget`.
    pub fn new(budget: ResumeRoom) -> Self {
        let (chunks, base_digest) = (VecDeque::new(), AnswerDigest::default());
        Self { chunks, base: 0, base_digest, len: 0, budget }
    }

    /// Takes the room from `budget` from now on (what was kept is let go, hashed).
    pub fn set_budget(&mut self, budget: ResumeRoom) {
        self.forget();
        self.budget = budget;
    }

    /// Keeps a chunk that went out, within `window` and the budget: when the budget has no
    /// room, the oldest chunks go first; when even that is not enough, nothing is kept.
    pub fn record(&mut self, chunk: &Bytes, window: u64) {
        let n = chunk.len() as u64;
        self.len += n;
        while self
            .chunks
            .front()
            .is_some_and(|c| self.len - (self.base + c.1.len() as u64) >= window)
        {
            self.drop_oldest();
        }
        while !self.budget.try_take(n + KEPT_CHUNK_COST) {
            if self.chunks.is_empty() {
                // No room at all: only a resume from the very end is possible.
                self.base_digest.update(chunk);
                self.base = self.len;
                return;
            }
            self.drop_oldest();
        }
        if self.chunks.is_empty() {
            self.base = self.len - n;
        }
        self.chunks.push_back((self.len - n, chunk.clone()));
    }

    /// Drops the oldest kept chunk (hashed now) and gives its room back.
    fn drop_oldest(&mut self) {
        if let Some((_, chunk)) = self.chunks.pop_front() {
            self.base_digest.update(&chunk);
            self.base += chunk.len() as u64;
            self.budget.give_back(chunk.len() as u64 + KEPT_CHUNK_COST);
        }
    }

    /// Drops every kept chunk, hashed (the answer can be resumed only from its end).
    pub fn forget(&mut self) {
        for (_, chunk) in &self.chunks {
            self.base_digest.update(chunk);
        }
        self.release();
        self.base = self.len;
    }

    /// Drops every kept chunk, unhashed, and gives their room back (the answer is done with).
    pub fn release(&mut self) {
        let kept: u64 = self.chunks.iter().map(|c| c.1.len() as u64 + KEPT_CHUNK_COST).sum();
        // A small list is kept for the next answer (most answers are a chunk or a few); one a
        // large answer grew is freed.
        if self.chunks.capacity() > KEEP_LIST_CAPACITY {
            self.chunks = VecDeque::new();
        } else {
            self.chunks.clear();
        }
        self.budget.give_back(kept);
    }

    /// A new answer begins: nothing of the last one is kept or hashed.
    pub fn restart(&mut self) {
        self.release();
        (self.base, self.len, self.base_digest) = (0, 0, AnswerDigest::default());
    }

    /// Where the kept bytes stand, and the bytes (a take-over moves them).
    pub fn export(&self) -> (KeptPlace, Vec<Bytes>) {
        let place = KeptPlace { base: self.base, base_digest: self.base_digest, len: self.len };
        (place, self.chunks.iter().map(|c| c.1.clone()).collect())
    }

    /// Takes what [`Self::export`] gave, within the budget (else the bytes are not kept, and
    /// a resume from among them is refused as for any answer not kept).
    pub fn import(&mut self, place: KeptPlace, bytes: Vec<u8>) {
        self.restart();
        (self.base, self.base_digest, self.len) = (place.base, place.base_digest, place.len);
        let n = bytes.len() as u64;
        let cost = n + KEPT_CHUNK_COST;
        if n == 0 || place.len.checked_sub(place.base) != Some(n) || !self.budget.try_take(cost) {
            self.base_digest = place.base_digest.then(&bytes);
            self.base = place.len;
            return;
        }
        self.chunks.push_back((place.base, Bytes::from(bytes)));
    }

    /// True when `bytes` lie within a chunk kept (they share its memory).
    #[cfg(test)]
    pub fn holds(&self, bytes: &Bytes) -> bool {
        let range = bytes.as_ptr_range();
        self.chunks.iter().any(|(_, c)| {
            let kept = c.as_ptr_range();
            kept.start <= range.start && range.end <= kept.end
        })
    }

    /// True when no byte is kept.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Where the kept bytes' room comes from.
    pub fn room(&self) -> &ResumeRoom {
        &self.budget
    }

    /// The answer's offset of the first byte kept.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The digest of the answer's bytes before `from`, where a resume from there begins; an
    /// error unless the bytes from `from` on are kept.
    pub fn before(&self, from: u64) -> Result<AnswerDigest, Error> {
        if from < self.base || from > self.len {
            return Err(Error::StepRefused(format!(
                "the answer cannot be resumed from byte {from}: {} to {} are kept",
                self.base, self.len
            )));
        }
        let mut before = self.base_digest;
        for (start, chunk) in &self.chunks {
            let skip = from - start;
            if skip < chunk.len() as u64 {
                before.update(&chunk[..skip as usize]);
                break;
            }
            before.update(chunk);
        }
        Ok(before)
    }

    /// The kept bytes from `from` to the end of the chunk holding it (shared: nothing is
    /// copied).
    pub fn chunk_from(&self, from: u64) -> KeptChunk {
        if from == self.len {
            return KeptChunk::CaughtUp;
        }
        if from < self.base || from > self.len {
            return KeptChunk::Gone;
        }
        // The first chunk that starts after `from`; the one before it holds it.
        let after = self.chunks.partition_point(|(start, _)| *start <= from);
        let Some((start, chunk)) = after.checked_sub(1).and_then(|i| self.chunks.get(i)) else {
            return KeptChunk::Gone;
        };
        match usize::try_from(from - start) {
            Ok(skip) if skip < chunk.len() => KeptChunk::Bytes(chunk.slice(skip..)),
            _ => KeptChunk::Gone,
        }
    }
}
