//! The transport's budget of answer bytes kept for resumes, shared by every session
//! (`max_resume_bytes`): a session that finds no room keeps less of its answer (a cut further
//! back than it kept is a clean lost connection for its client), never more memory.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes kept for resumes, against a limit.
#[derive(Debug)]
pub struct ResumeBudget {
    limit: AtomicU64,
    used: AtomicU64,
}

impl ResumeBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self { limit: AtomicU64::new(limit), used: AtomicU64::new(0) }
    }

    /// A budget without a limit (a session on its own, in unit tests).
    pub fn unlimited() -> Self {
        Self::new(u64::MAX)
    }

    /// Changes the limit (a reload); bytes kept beyond a lower one are given back as their
    /// sessions move on.
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Takes room for `n` bytes; false when it would pass the limit.
    pub fn try_take(&self, n: u64) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= limit)
            })
            .is_ok()
    }

    /// Gives back room for `n` bytes.
    pub fn give_back(&self, n: u64) {
        // The update always applies (it never answers None).
        let _before = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| Some(used.saturating_sub(n)));
    }

    /// Bytes kept now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_taken_within_the_limit_and_given_back() {
        let budget = ResumeBudget::new(100);
        assert!(budget.try_take(60));
        assert!(!budget.try_take(41), "past the limit");
        assert!(budget.try_take(40));
        assert_eq!(budget.used(), 100);
        budget.give_back(70);
        assert!(budget.try_take(70));
        budget.set_limit(50);
        assert!(!budget.try_take(1), "a lower limit holds at once for new room");
        budget.give_back(1_000);
        assert_eq!(budget.used(), 0, "never below zero");
    }
}
