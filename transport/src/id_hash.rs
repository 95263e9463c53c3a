//! Session ids: 128 bits from the OS's CSPRNG, and the session table's hasher for them: ids
//! the transport made need mixing, not SipHash's defence against keys an attacker chose (a
//! request can only look an id up; every id in the table came from the CSPRNG).

use std::hash::{BuildHasher, Hasher};

/// Odd 64-bit constant (the golden ratio's fraction) that spreads each word over the state.
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// Builds [`IdHasher`]s seeded once per table, so that no two processes place ids alike.
#[derive(Debug, Clone, Copy)]
pub struct IdHashing {
    seed: u64,
}

impl IdHashing {
    /// A seed from the OS's random source (a fixed one if it fails: the ids stay random).
    pub fn new() -> Self {
        let mut bytes = [0u8; 8];
        let seed = getrandom::fill(&mut bytes).map_or(MIX, |()| u64::from_ne_bytes(bytes));
        Self { seed }
    }
}

impl Default for IdHashing {
    fn default() -> Self {
        Self::new()
    }
}

impl BuildHasher for IdHashing {
    type Hasher = IdHasher;

    fn build_hasher(&self) -> IdHasher {
        IdHasher { state: self.seed }
    }
}

/// Folds the bytes of an id, eight at a time, into one word.
#[derive(Debug)]
pub struct IdHasher {
    state: u64,
}

impl IdHasher {
    fn fold(&mut self, word: u64) {
        self.state = (self.state.rotate_left(23) ^ word).wrapping_mul(MIX);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.fold(u64::from_le_bytes(word.try_into().unwrap_or_default()));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.fold(u64::from_le_bytes(last) ^ (rest.len() as u64) << 59);
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.fold(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        // The table takes its bucket from the low bits and a tag from the top seven: both
        // depend on every byte.
        let x = self.state;
        x ^ (x >> 29)
    }
}

/// A new session id: 128 bits from the OS's CSPRNG, as 32 hex digits.
pub fn new_session_id() -> Result<String, crate::Error> {
    let mut bytes = [0u8; common::wire::SESSION_ID_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| crate::Error::Io(std::io::Error::other(e.to_string())))?;
    Ok(crate::identity::config::to_hex(&bytes))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn hash(hashing: &IdHashing, id: &str) -> u64 {
        hashing.hash_one(id)
    }

    /// A random id of 32 hex digits.
    fn random_id(draw: &mut common::seeded::Draw) -> String {
        (0..32).map(|_| char::from(b"0123456789abcdef"[draw.below(16)])).collect()
    }

    #[test]
    fn one_changed_digit_moves_the_bucket_and_the_tag() {
        // The table takes a bucket from the low bits and a tag from the top seven. Changing one
        // digit of an id leaves either the same about as often as chance does (1 in 1024 for
        // ten low bits, 1 in 128 for the tag): over 2000 ids, about 2 and 16.
        let mut draw =
            common::seeded::Draw::seeded("one_changed_digit_moves_the_bucket_and_the_tag");
        let hashing = IdHashing { seed: draw.bits() };
        let (mut same_bucket, mut same_tag) = (0, 0);
        for _ in 0..2000 {
            let id = random_id(&mut draw);
            assert_eq!(hash(&hashing, &id), hash(&hashing, &id));
            let mut other = id.clone().into_bytes();
            let at = draw.below(32);
            other[at] = if other[at] == b'0' { b'1' } else { b'0' };
            let other = String::from_utf8(other).unwrap_or_default();
            let (a, b) = (hash(&hashing, &id), hash(&hashing, &other));
            same_bucket += u32::from(a & 1023 == b & 1023);
            same_tag += u32::from(a >> 57 == b >> 57);
        }
        assert!(same_bucket <= 12, "{same_bucket} of 2000 changed ids kept their bucket");
        assert!(same_tag <= 50, "{same_tag} of 2000 changed ids kept their tag");
    }

    #[test]
    fn random_ids_spread_over_the_buckets() {
        // 4096 ids over 1024 buckets: about 4 each (Poisson), so more than 20 in one bucket
        // would mean the low bits ignore part of the id.
        let mut draw = common::seeded::Draw::seeded("random_ids_spread_over_the_buckets");
        let hashing = IdHashing { seed: draw.bits() };
        let mut per_bucket = vec![0u32; 1024];
        let mut ids = HashSet::new();
        while ids.len() < 4096 {
            let id = random_id(&mut draw);
            if ids.insert(id.clone()) {
                per_bucket[(hash(&hashing, &id) & 1023) as usize] += 1;
            }
        }
        let most = per_bucket.iter().copied().max().unwrap_or(0);
        assert!(most <= 20, "a bucket holds {most} of 4096 ids");
    }

    #[test]
    fn session_ids_are_long_and_distinct() {
        let a = new_session_id().unwrap_or_default();
        let b = new_session_id().unwrap_or_default();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
