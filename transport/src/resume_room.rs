//! Where kept answers take their room: the transport's budget of bytes kept for resumes
//! (`max_resume_bytes`), shared by every session, and each identity's share of it
//! (`max_resume_bytes_per_token`). A step that finds no room first lets idle sessions'
//! finished answers go (`resume_idle`): its identity's own when its share is short, anyone's
//! when the budget is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use crate::resume_idle::{IdleAnswers, Reclaim};
use crate::shares::{IdentityCounts, Share};

/// Where one session's kept bytes take their room: the transport's budget and, for a session
/// of an identity, that identity's share of it.
#[derive(Debug, Clone)]
pub struct ResumeRoom {
    budget: Arc<ResumeBudget>,
    owner: Option<Arc<IdentityCounts>>,
}

impl ResumeRoom {
    /// Room from `budget`, within the share of the identity whose counts are `owner`.
    pub fn new(budget: Arc<ResumeBudget>, owner: Option<Arc<IdentityCounts>>) -> Self {
        Self { budget, owner }
    }

    /// Room without a limit (a session on its own, in unit tests).
    pub fn unlimited() -> Self {
        Self::new(Arc::new(ResumeBudget::new(u64::MAX, u64::MAX)), None)
    }

    /// Takes room for `n` bytes: the owner's share first, then the budget; false (and nothing
    /// taken) when either has none, even once idle sessions' finished answers were let go:
    /// the identity's own for its share, anyone's for the budget.
    #[inline]
    pub(crate) fn try_take(&self, n: u64) -> bool {
        match self.take_once(n) {
            Ok(()) => true,
            Err(short) => self.take_making_room(n, short),
        }
    }

    /// [`Self::try_take`] when `short` had no room: idle sessions' answers let go first.
    #[cold]
    fn take_making_room(&self, n: u64, short: Short) -> bool {
        let idle = &self.budget.idle;
        // More than a limit allows at all: nothing let go would make room.
        let too_large = match short {
            Short::Share((limit, share)) => share > limit,
            Short::Budget => n > self.budget.limit.load(Ordering::Relaxed),
        };
        if too_large {
            return false;
        }
        let freed = match short {
            Short::Share(limit) => {
                let owner = self.owner.as_ref();
                let has_room =
                    || owner.is_none_or(|o| o.held(Share::ResumeBytes) + limit.1 <= limit.0);
                idle.reclaim(Some(self.owner_key()), has_room)
            }
            Short::Budget => idle.reclaim(None, || self.budget.has_room(n)),
        };
        freed && self.take_once(n).is_ok()
    }

    /// [`Self::try_take`] without letting idle sessions' answers go: which was short.
    #[inline]
    fn take_once(&self, n: u64) -> Result<(), Short> {
        let share = usize::try_from(n).unwrap_or(usize::MAX);
        let limit = self.budget.share_limit();
        if !self.owner.as_ref().is_none_or(|owner| owner.add(Share::ResumeBytes, share, limit)) {
            return Err(Short::Share((limit, share)));
        }
        if self.budget.try_take(n) {
            return Ok(());
        }
        if let Some(owner) = &self.owner {
            owner.sub(Share::ResumeBytes, share);
        }
        Err(Short::Budget)
    }

    /// Its identity, as the list of idle answers names it (0: none).
    fn owner_key(&self) -> usize {
        self.owner.as_ref().map_or(0, |o| Arc::as_ptr(o) as usize)
    }

    /// An answer kept with this room finished: its session, `holder`, is listed among those
    /// whose answer may be let go (`None`: it is already).
    pub fn finished(&self, holder: Option<Weak<dyn Reclaim>>) {
        self.budget.idle.finished(holder, self.owner_key());
    }

    /// Gives back room for `n` bytes, to the budget and the owner's share.
    pub(crate) fn give_back(&self, n: u64) {
        self.budget.give_back(n);
        if let Some(owner) = &self.owner {
            owner.sub(Share::ResumeBytes, usize::try_from(n).unwrap_or(usize::MAX));
        }
    }
}

/// What had no room for a take.
enum Short {
    /// The identity's share (its limit, and the bytes asked for).
    Share((usize, usize)),
    /// The transport's budget.
    Budget,
}

/// Bytes kept for resumes, against a limit for all sessions and one for each identity's.
#[derive(Debug)]
pub struct ResumeBudget {
    limit: AtomicU64,
    share_limit: AtomicU64,
    used: AtomicU64,
    /// Sessions whose finished answers may be let go for a step that finds no room.
    idle: IdleAnswers,
}

impl ResumeBudget {
    /// A budget of `limit` bytes, of which one identity's sessions keep at most `share_limit`.
    pub fn new(limit: u64, share_limit: u64) -> Self {
        let (limit, share_limit) = (AtomicU64::new(limit), AtomicU64::new(share_limit));
        Self { limit, share_limit, used: AtomicU64::new(0), idle: IdleAnswers::default() }
    }

    /// Changes the limits (a reload); bytes kept beyond lower ones are given back as their
    /// sessions move on.
    pub fn set_limits(&self, limit: u64, share_limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
        self.share_limit.store(share_limit, Ordering::Relaxed);
    }

    /// Most bytes one identity's sessions keep.
    fn share_limit(&self) -> usize {
        usize::try_from(self.share_limit.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    /// True when `n` more bytes would be within the limit.
    fn has_room(&self, n: u64) -> bool {
        self.used().saturating_add(n) <= self.limit.load(Ordering::Relaxed)
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
        let budget = ResumeBudget::new(100, 100);
        assert!(budget.try_take(60));
        assert!(!budget.try_take(41), "past the limit");
        assert!(budget.try_take(40));
        assert_eq!(budget.used(), 100);
        budget.give_back(70);
        assert!(budget.try_take(70));
        budget.set_limits(50, 50);
        assert!(!budget.try_take(1), "a lower limit holds at once for new room");
        budget.give_back(1_000);
        assert_eq!(budget.used(), 0, "never below zero");
    }

    #[test]
    fn one_identity_keeps_no_more_than_its_share() {
        let budget = Arc::new(ResumeBudget::new(100, 60));
        let (alice, bob) =
            (Arc::new(IdentityCounts::default()), Arc::new(IdentityCounts::default()));
        let room =
            |owner: &Arc<IdentityCounts>| ResumeRoom::new(budget.clone(), Some(owner.clone()));
        let (a1, a2, b) = (room(&alice), room(&alice), room(&bob));
        assert!(a1.try_take(40));
        assert!(!a2.try_take(30), "alice's sessions together are at her share");
        assert!(a2.try_take(20));
        assert!(b.try_take(40), "bob finds the rest of the budget");
        assert!(!b.try_take(1), "the budget is full");
        assert_eq!(bob.held(Share::ResumeBytes), 40, "a refusal takes nothing of the share");
        a1.give_back(40);
        assert_eq!((alice.held(Share::ResumeBytes), budget.used()), (20, 60));
        assert!(b.try_take(20), "bob's share is his own");
    }
}
