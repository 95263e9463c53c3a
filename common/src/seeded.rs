//! A small seeded generator for the tests' random draws (xorshift64*): the seed comes
//! from `SQLTUNNEL_SEED`, else the clock, and is printed, so a failure can be replayed.

use std::time::{SystemTime, UNIX_EPOCH};

/// Draws from one seed.
pub struct Draw(u64);

impl Draw {
    /// A generator for the test `name`, its seed printed.
    pub fn seeded(name: &str) -> Self {
        let seed = std::env::var("SQLTUNNEL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1
            });
        println!("{name}: seed {seed} (SQLTUNNEL_SEED={seed} to replay)");
        Draw(seed)
    }

    /// A generator from `seed` (a part of a run whose seed was printed), never zero.
    pub fn from_seed(seed: u64) -> Self {
        Draw(seed | 1)
    }

    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.bits() >> 33) as usize % n
    }
}
