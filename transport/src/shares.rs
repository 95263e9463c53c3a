//! Each identity's share of what the transport holds at once: its WebSocket streams, its
//! upstream connects in flight, its bytes of request bodies and of answers kept for resumes,
//! the connections whose place is its own, its audit lines waiting, so that one token (or one
//! leaked single-sign-on user) cannot take what the others need. A share is taken with a
//! guard and given back when the guard drops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::identity::IdentityId;

/// What a share counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// WebSocket streams (`max_streams_per_token`).
    Streams,
    /// Upstream connects in flight (`max_opening_per_token`).
    Opening,
    /// Bytes of request bodies held (`max_inflight_bytes_per_token`).
    InflightBytes,
    /// Bytes of answers kept for resumes (`max_resume_bytes_per_token`).
    ResumeBytes,
    /// HTTP connections whose place is its own (`max_connections_per_token`).
    Connections,
    /// Places of audit lines waiting for their commands to end or for the writer (a quarter
    /// of the audit queue).
    AuditLines,
}

impl Share {
    /// The config key that sets it.
    pub fn key(self) -> &'static str {
        match self {
            Share::Streams => "max_streams_per_token",
            Share::Opening => "max_opening_per_token",
            Share::InflightBytes => "max_inflight_bytes_per_token",
            Share::ResumeBytes => "max_resume_bytes_per_token",
            Share::Connections => "max_connections_per_token",
            Share::AuditLines => "audit_lines_per_token",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What every identity holds now: its counts, found by one lookup when a share is taken and
/// then reached through the guard, with no lookup (identities holding nothing are not kept).
#[derive(Debug, Default)]
pub struct Shares {
    held: Mutex<Table>,
    /// Told whenever a share is given back (a take may be waiting for room).
    released: tokio::sync::Notify,
}

/// The identities' counts by id; an entry whose counts are gone is refreshed in place, and the
/// entries of identities that hold nothing go when the table has doubled since it last looked.
#[derive(Debug, Default)]
struct Table {
    ids: HashMap<IdentityId, Weak<IdentityCounts>>,
    /// The size at which it next drops dead entries (at least [`MIN_PRUNE_AT`]).
    prune_at: usize,
}

/// Entries a table keeps before it first looks for dead ones.
const MIN_PRUNE_AT: usize = 64;

/// One identity's counts, one per [`Share`]; alive while one of its shares is taken, or while
/// a session of the identity keeps them at hand ([`Shares::counts`]).
#[derive(Debug, Default)]
pub struct IdentityCounts([AtomicUsize; 6]);

impl IdentityCounts {
    /// Adds `more` to `share`'s count unless it would pass `max`.
    pub(crate) fn add(&self, share: Share, more: usize, max: usize) -> bool {
        let count = &self.0[share.index()];
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                now.checked_add(more).filter(|&then| then <= max)
            })
            .is_ok()
    }

    /// Takes `less` off `share`'s count (room taken with [`Self::add`], which nothing waits
    /// for: bytes kept for resumes).
    pub(crate) fn sub(&self, share: Share, less: usize) {
        let count = &self.0[share.index()];
        // The update always applies (it never answers None).
        let _before = count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            Some(now.saturating_sub(less))
        });
    }

    /// What `share` counts now.
    pub(crate) fn held(&self, share: Share) -> usize {
        self.0[share.index()].load(Ordering::Acquire)
    }
}

/// A share taken; given back when dropped.
#[derive(Debug)]
pub struct Taken {
    shares: Arc<Shares>,
    held: Arc<IdentityCounts>,
    share: Share,
    amount: usize,
}

impl Taken {
    /// Gives back all but `keep` of it (a body smaller than the room it took).
    pub fn shrink_to(&mut self, keep: usize) {
        let back = self.amount.saturating_sub(keep);
        if back > 0 {
            self.give_back(back);
            self.amount -= back;
        }
    }

    /// One of it, split off as a share of its own (given back when that one drops).
    pub fn split_one(&mut self) -> Option<Taken> {
        self.amount = self.amount.checked_sub(1)?;
        let (shares, held, share) = (self.shares.clone(), self.held.clone(), self.share);
        Some(Taken { shares, held, share, amount: 1 })
    }

    /// Takes `more` of the same share, unless that would pass `max`.
    pub fn grow(&mut self, more: usize, max: usize) -> bool {
        let grown = self.held.add(self.share, more, max);
        if grown {
            self.amount += more;
        }
        grown
    }

    fn give_back(&self, amount: usize) {
        self.held.0[self.share.index()].fetch_sub(amount, Ordering::AcqRel);
        self.shares.released.notify_waiters();
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if self.amount > 0 {
            self.give_back(self.amount);
        }
    }
}

impl Shares {
    /// Takes `amount` of identity `id`'s `share`, unless it would then hold more than `max`.
    pub fn take(
        self: &Arc<Self>,
        id: &IdentityId,
        share: Share,
        amount: usize,
        max: usize,
    ) -> Option<Taken> {
        self.take_of(&self.counts(id), share, amount, max)
    }

    /// [`Self::take`] of the identity whose `counts` are at hand (no lookup).
    pub fn take_of(
        self: &Arc<Self>,
        counts: &Arc<IdentityCounts>,
        share: Share,
        amount: usize,
        max: usize,
    ) -> Option<Taken> {
        let held = counts.clone();
        held.add(share, amount, max).then(|| Taken { shares: self.clone(), held, share, amount })
    }

    /// Identity `id`'s counts (made when it holds none): kept, they spare later takes the
    /// lookup.
    pub fn counts(&self, id: &IdentityId) -> Arc<IdentityCounts> {
        let mut table = lock(&self.held);
        match table.ids.get_mut(id) {
            Some(entry) => entry.upgrade().unwrap_or_else(|| {
                let held = Arc::new(IdentityCounts::default());
                *entry = Arc::downgrade(&held);
                held
            }),
            None => {
                if table.ids.len() >= table.prune_at.max(MIN_PRUNE_AT) {
                    table.ids.retain(|_, held| held.strong_count() > 0);
                    table.prune_at = 2 * table.ids.len();
                }
                let held = Arc::new(IdentityCounts::default());
                table.ids.insert(id.clone(), Arc::downgrade(&held));
                held
            }
        }
    }

    /// [`Self::take`], waiting up to `wait` for the identity to give some back.
    pub async fn take_within(
        self: &Arc<Self>,
        id: &IdentityId,
        share: Share,
        amount: usize,
        max: usize,
        wait: std::time::Duration,
    ) -> Option<Taken> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if let Some(taken) = self.take(id, share, amount, max) {
                return Some(taken);
            }
            tokio::time::timeout_at(deadline, released).await.ok()?;
        }
    }

    /// What identity `id` holds of `share` now.
    #[cfg(test)]
    fn held(&self, id: &IdentityId, share: Share) -> usize {
        let held = lock(&self.held).ids.get(id).and_then(Weak::upgrade);
        held.map_or(0, |held| held.0[share.index()].load(Ordering::Acquire))
    }

    /// How many identities the table keeps an entry for.
    #[cfg(test)]
    fn kept(&self) -> usize {
        lock(&self.held).ids.values().filter(|held| held.strong_count() > 0).count()
    }
}

/// Room a body holds in the budget of bytes held at once (`max_inflight_bytes`, a permit a
/// byte) and in its identity's share of it, given back when dropped.
#[derive(Debug)]
pub struct Room {
    pub(crate) permit: tokio::sync::OwnedSemaphorePermit,
    pub(crate) share: Taken,
}

impl Room {
    /// Room of `permit` in the budget and `share` in the identity's.
    pub fn new(permit: tokio::sync::OwnedSemaphorePermit, share: Taken) -> Self {
        Self { permit, share }
    }

    /// Gives back all but `keep` bytes of it.
    pub fn shrink_to(&mut self, keep: usize) {
        drop(self.permit.split(self.permit.num_permits().saturating_sub(keep)));
        self.share.shrink_to(keep);
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_capped_per_identity_and_given_back() {
        let shares = Arc::new(Shares::default());
        let (alice, bob) = (IdentityId::named("alice"), IdentityId::named("bob"));
        let a1 = shares.take(&alice, Share::Streams, 1, 2);
        let a2 = shares.take(&alice, Share::Streams, 1, 2);
        assert!(a1.is_some() && a2.is_some());
        assert!(shares.take(&alice, Share::Streams, 1, 2).is_none(), "alice is at her share");
        assert!(shares.take(&bob, Share::Streams, 1, 2).is_some(), "bob is not touched");
        assert!(shares.take(&alice, Share::Opening, 1, 2).is_some(), "each share on its own");
        drop(a1);
        assert!(shares.take(&alice, Share::Streams, 1, 2).is_some());
        drop(a2);
        assert_eq!(shares.held(&alice, Share::Streams), 0);
        assert_eq!(shares.kept(), 0, "nothing kept for identities holding nothing");
    }

    #[test]
    fn bytes_grow_and_shrink() {
        let shares = Arc::new(Shares::default());
        let alice = IdentityId::named("alice");
        let Some(mut body) = shares.take(&alice, Share::InflightBytes, 100, 1000) else {
            panic!("room");
        };
        assert!(body.grow(800, 1000));
        assert!(!body.grow(200, 1000), "past the share");
        body.shrink_to(50);
        assert_eq!(shares.held(&alice, Share::InflightBytes), 50);
        drop(body);
        assert_eq!(shares.held(&alice, Share::InflightBytes), 0);
    }

    #[test]
    fn the_table_keeps_no_more_than_twice_the_identities_holding_something() {
        let shares = Arc::new(Shares::default());
        let kept = shares.take(&IdentityId::named("kept"), Share::Streams, 1, 1);
        for n in 0..1000 {
            let passing = IdentityId::named(&format!("passing-{n}"));
            assert!(shares.take(&passing, Share::Streams, 1, 1).is_some());
        }
        let size = lock(&shares.held).ids.len();
        assert!(size <= 2 * MIN_PRUNE_AT, "{size}");
        assert_eq!(shares.kept(), 1);
        assert!(shares.take(&IdentityId::named("kept"), Share::Streams, 1, 1).is_none());
        drop(kept);
        assert!(shares.take(&IdentityId::named("kept"), Share::Streams, 1, 1).is_some());
    }

    #[test]
    fn counts_kept_by_a_session_are_the_identitys_own() {
        let shares = Arc::new(Shares::default());
        let alice = IdentityId::named("alice");
        let kept = shares.counts(&alice);
        let taken = shares.take_of(&kept, Share::InflightBytes, 600, 1000);
        assert!(taken.is_some());
        assert!(shares.take(&alice, Share::InflightBytes, 600, 1000).is_none(), "one share");
        drop(taken);
        assert!(Arc::ptr_eq(&kept, &shares.counts(&alice)), "found again while kept");
        assert!(shares.take(&alice, Share::InflightBytes, 1000, 1000).is_some());
        assert_eq!(shares.held(&alice, Share::InflightBytes), 0);
    }
}
