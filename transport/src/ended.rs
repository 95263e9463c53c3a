//! Sessions that ended lately, kept for the keep-alives that ask about them (which ended, and
//! whether their upstream closed or reset the connection), and each identity's news of them:
//! a keep-alive long poll waits for its own identity's sessions only, so sessions ending
//! elsewhere never wake it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use tokio::sync::watch;

use crate::identity::IdentityId;

/// Most ended sessions remembered.
const MAX_ENDED: usize = 4096;

/// Identities whose news channels are kept before those nobody waits on are dropped.
const MIN_PRUNE_AT: usize = 64;

/// Sessions that ended, oldest first, and each waiting identity's news.
#[derive(Debug, Default)]
pub struct EndedSessions {
    list: Mutex<VecDeque<Ended>>,
    news: Mutex<News>,
}

/// The channels of the identities a keep-alive waits for, each sent the sequence of its
/// latest session that ended.
#[derive(Debug, Default)]
struct News {
    by_identity: HashMap<IdentityId, watch::Sender<u64>>,
    /// The size at which channels nobody waits on are dropped.
    prune_at: usize,
}

/// A session that ended.
#[derive(Debug)]
struct Ended {
    seq: u64,
    id: String,
    owner: IdentityId,
    /// Its upstream reset the connection.
    reset: bool,
    /// Its upstream closed the connection (it was not ended by the transport).
    by_upstream: bool,
}

impl EndedSessions {
    /// Records that session `id` of `owner` ended (`by_upstream`: its upstream closed it;
    /// `reset`: with a reset), and wakes the keep-alives of `owner` waiting for news.
    pub fn record(&self, id: &str, owner: &IdentityId, reset: bool, by_upstream: bool) {
        let mut list = lock(&self.list);
        let seq = list.back().map_or(1, |e| e.seq + 1);
        if list.len() >= MAX_ENDED {
            list.pop_front();
        }
        let (id, owner) = (id.to_owned(), owner.clone());
        list.push_back(Ended { seq, id, owner: owner.clone(), reset, by_upstream });
        drop(list);
        let mut news = lock(&self.news);
        if let Some(channel) = news.by_identity.get(&owner)
            && channel.send(seq).is_err()
        {
            // Nobody waits on it any more.
            news.by_identity.remove(&owner);
        }
    }

    /// True when session `id` of `owner` ended lately because its upstream closed it.
    pub fn closed_by_upstream(&self, id: &str, owner: &IdentityId) -> bool {
        let list = lock(&self.list);
        list.iter().rev().any(|e| e.by_upstream && e.id == id && e.owner == *owner)
    }

    /// News of `owner`'s sessions ending from now on, and where the record stands now (for
    /// [`Self::since`]).
    pub fn news(&self, owner: &IdentityId) -> (watch::Receiver<u64>, u64) {
        let mut news = lock(&self.news);
        if news.by_identity.len() >= news.prune_at.max(MIN_PRUNE_AT) {
            news.by_identity.retain(|_, channel| channel.receiver_count() > 0);
            news.prune_at = 2 * news.by_identity.len();
        }
        let channel =
            news.by_identity.entry(owner.clone()).or_insert_with(|| watch::Sender::new(0));
        let receiver = channel.subscribe();
        drop(news);
        let now = lock(&self.list).back().map_or(0, |e| e.seq);
        (receiver, now)
    }

    /// Sessions of `owner` that ended after `since`, and whether the upstream reset the
    /// connection.
    pub fn since(&self, since: u64, owner: &IdentityId) -> Vec<(String, bool)> {
        let list = lock(&self.list);
        // Newest last: only the entries after `since` are looked at.
        let newer = list.iter().rev().take_while(|e| e.seq > since);
        let mut ended: Vec<_> =
            newer.filter(|e| e.owner == *owner).map(|e| (e.id.clone(), e.reset)).collect();
        ended.reverse();
        ended
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keep_alive_hears_of_its_own_identitys_sessions_only() {
        let ended = EndedSessions::default();
        let (alice, bob) = (IdentityId::named("alice"), IdentityId::named("bob"));
        ended.record("old", &alice, false, false);
        let (mut news, since) = ended.news(&alice);
        assert_eq!(since, 1);
        ended.record("b1", &bob, false, false);
        assert!(!news.has_changed().unwrap_or(true), "bob's sessions do not wake alice's");
        ended.record("a1", &alice, true, true);
        assert!(news.has_changed().unwrap_or(false));
        assert_eq!(*news.borrow_and_update(), 3);
        assert_eq!(ended.since(since, &alice), vec![("a1".to_owned(), true)]);
        assert!(ended.closed_by_upstream("a1", &alice) && !ended.closed_by_upstream("b1", &bob));
        drop(news);
        ended.record("a2", &alice, false, false);
        assert!(lock(&ended.news).by_identity.is_empty(), "a channel nobody waits on goes");
    }
}
