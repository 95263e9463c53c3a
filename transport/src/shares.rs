//! Each identity's share of what the transport holds at once: its WebSocket streams, its
//! upstream connects in flight and its bytes of request bodies, so that one token (or one
//! leaked single-sign-on user) cannot take what the others need. A share is taken with a
//! guard and given back when the guard drops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
}

impl Share {
    /// The config key that sets it.
    pub fn key(self) -> &'static str {
        match self {
            Share::Streams => "max_streams_per_token",
            Share::Opening => "max_opening_per_token",
            Share::InflightBytes => "max_inflight_bytes_per_token",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What every identity holds now (identities holding nothing are not kept).
#[derive(Debug, Default)]
pub struct Shares {
    held: Mutex<HashMap<IdentityId, [usize; 3]>>,
    /// Told whenever a share is given back (a take may be waiting for room).
    released: tokio::sync::Notify,
}

/// A share taken; given back when dropped.
#[derive(Debug)]
pub struct Taken {
    shares: Arc<Shares>,
    id: IdentityId,
    share: Share,
    amount: usize,
}

impl Taken {
    /// Gives back all but `keep` of it (a body smaller than the room it took).
    pub fn shrink_to(&mut self, keep: usize) {
        let back = self.amount.saturating_sub(keep);
        if back > 0 {
            self.shares.give_back(&self.id, self.share, back);
            self.amount -= back;
        }
    }

    /// Takes `more` of the same share, unless that would pass `max`.
    pub fn grow(&mut self, more: usize, max: usize) -> bool {
        let mut held = lock(&self.shares.held);
        let counts = held.entry(self.id.clone()).or_default();
        let now = &mut counts[self.share.index()];
        if now.saturating_add(more) > max {
            return false;
        }
        *now += more;
        self.amount += more;
        true
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.shares.give_back(&self.id, self.share, self.amount);
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
        let mut held = lock(&self.held);
        let counts = held.entry(id.clone()).or_default();
        let now = &mut counts[share.index()];
        if now.saturating_add(amount) > max {
            if counts.iter().all(|&n| n == 0) {
                held.remove(id);
            }
            return None;
        }
        *now += amount;
        Some(Taken { shares: self.clone(), id: id.clone(), share, amount })
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
        lock(&self.held).get(id).map_or(0, |counts| counts[share.index()])
    }

    fn give_back(&self, id: &IdentityId, share: Share, amount: usize) {
        let mut held = lock(&self.held);
        if let Some(counts) = held.get_mut(id) {
            counts[share.index()] = counts[share.index()].saturating_sub(amount);
            if counts.iter().all(|&n| n == 0) {
                held.remove(id);
            }
        }
        drop(held);
        self.released.notify_waiters();
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
        assert!(lock(&shares.held).is_empty(), "nothing kept for identities holding nothing");
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
}
