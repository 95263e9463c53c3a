//! A connection's place in `max_connections`, and in its client's `max_connections_per_client`
//! (an address, an IPv6 one by its /64; a trusted proxy's connections count only in the
//! first): one client cannot take every connection, however fast it opens them. A connection
//! that has not shown a valid token yet holds its place only until a new connection needs it:
//! with every place taken, the oldest such connection is closed to make room, so connections
//! without a token, from however many addresses, never keep out a sidecar.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::refusals::ClientKey;
use crate::session::lock;
use crate::shares::Taken;

/// Connections open by client.
type ByClient = Arc<Mutex<HashMap<ClientKey, usize>>>;

/// Every connection's place.
#[derive(Debug)]
pub struct Slots {
    total: Arc<Semaphore>,
    by_client: ByClient,
    /// The places of connections that have not shown a token, oldest first (held weakly: one
    /// that showed a token or closed is skipped, and swept out now and then).
    unproven: Mutex<VecDeque<Weak<Unproven>>>,
    capacity: usize,
}

/// Why a connection has no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// `max_connections` are open, every one with a token shown.
    All,
    /// Its client has `max_connections_per_client` open.
    Client,
}

/// The place of a connection that has not shown a token: a new connection may take it.
#[derive(Debug)]
struct Unproven {
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    evicted: CancellationToken,
}

/// One connection's place, given back when dropped; a stream's also holds its place in its
/// identity's share.
#[derive(Debug)]
pub struct Slot {
    /// Its own once it showed a token ([`Slot::prove`]); until then it is in `unproven`.
    permit: Option<OwnedSemaphorePermit>,
    unproven: Option<Arc<Unproven>>,
    client: Option<(ByClient, ClientKey)>,
    _share: Option<Arc<Taken>>,
}

impl Slots {
    /// Room for `max_connections` connections.
    pub fn new(max_connections: usize) -> Self {
        Self {
            total: Arc::new(Semaphore::new(max_connections)),
            by_client: Arc::default(),
            unproven: Mutex::default(),
            capacity: max_connections,
        }
    }

    /// A place for a connection from `peer`, counted against its client's `per_client` unless
    /// `peer` is a trusted proxy; with every place taken, the oldest connection that has not
    /// shown a token gives up its own (and is told so through [`Slot::evicted`]).
    pub fn take(&self, peer: IpAddr, trusted_proxy: bool, per_client: usize) -> Result<Slot, Full> {
        let client = match trusted_proxy {
            true => None,
            false => {
                let key = ClientKey::of(peer);
                let mut by_client = lock(&self.by_client);
                let open = by_client.entry(key).or_default();
                if *open >= per_client {
                    return Err(Full::Client);
                }
                *open += 1;
                Some((self.by_client.clone(), key))
            }
        };
        // Dropped on a refusal below, it gives the client's count back.
        let mut slot = Slot { permit: None, unproven: None, client, _share: None };
        let permit = match self.total.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => self.evict_oldest_unproven().ok_or(Full::All)?,
        };
        let unproven = Arc::new(Unproven {
            permit: Mutex::new(Some(permit)),
            evicted: CancellationToken::new(),
        });
        let mut queue = lock(&self.unproven);
        if queue.len() >= 2 * self.capacity.max(8) {
            queue.retain(|entry| entry.strong_count() > 0);
        }
        queue.push_back(Arc::downgrade(&unproven));
        slot.unproven = Some(unproven);
        Ok(slot)
    }

    /// The place of the oldest connection still without a token, which is told to close.
    fn evict_oldest_unproven(&self) -> Option<OwnedSemaphorePermit> {
        let mut queue = lock(&self.unproven);
        while let Some(entry) = queue.pop_front() {
            let Some(victim) = entry.upgrade() else { continue };
            let Some(permit) = lock(&victim.permit).take() else { continue };
            victim.evicted.cancel();
            return Some(permit);
        }
        None
    }

    /// Connections open now from `peer`'s client.
    #[cfg(test)]
    fn open_from(&self, peer: IpAddr) -> usize {
        lock(&self.by_client).get(&ClientKey::of(peer)).copied().unwrap_or(0)
    }
}

impl Slot {
    /// The same place, holding `share` too until it is given back.
    pub fn with(mut self, share: Arc<Taken>) -> Self {
        self._share = Some(share);
        self
    }

    /// The connection showed a valid token: its place is its own from now on. False when it
    /// was evicted a moment before (it has no place: it is closing, and runs nothing more).
    pub fn prove(&mut self) -> bool {
        if let Some(unproven) = self.unproven.take() {
            self.permit = lock(&unproven.permit).take();
        }
        self.permit.is_some()
    }

    /// Cancelled when a new connection took this one's place, before it showed a token.
    pub fn evicted(&self) -> CancellationToken {
        self.unproven.as_ref().map(|u| u.evicted.clone()).unwrap_or_default()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((by_client, key)) = self.client.take() {
            let mut by_client = lock(&by_client);
            if let Some(open) = by_client.get_mut(&key) {
                *open -= 1;
                if *open == 0 {
                    by_client.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_has_its_share_and_a_proxy_is_not_counted() {
        let slots = Slots::new(10);
        let (client, other, proxy): (IpAddr, IpAddr, IpAddr) =
            ([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), [127, 0, 0, 1].into());
        let first: Vec<Slot> = (0..3).filter_map(|_| slots.take(client, false, 3).ok()).collect();
        assert_eq!(first.len(), 3);
        assert_eq!(slots.take(client, false, 3).err(), Some(Full::Client));
        assert!(slots.take(other, false, 3).is_ok(), "another client is not touched");
        let through_proxy: Vec<Slot> =
            (0..7).filter_map(|_| slots.take(proxy, true, 3).ok()).collect();
        assert_eq!(through_proxy.len(), 7, "a proxy's connections count only in all");
        let mut proven = through_proxy;
        assert!(proven.iter_mut().all(Slot::prove));
        first.iter().for_each(|s| assert!(!s.evicted().is_cancelled()));
        let mut first = first;
        assert!(first.iter_mut().all(Slot::prove));
        assert_eq!(slots.take(other, false, 3).err(), Some(Full::All));
        drop(first);
        assert_eq!(slots.open_from(client), 0);
        assert!(slots.take(client, false, 3).is_ok());
    }

    #[test]
    fn a_new_connection_takes_the_place_of_the_oldest_without_a_token() {
        let slots = Slots::new(3);
        let peer: IpAddr = [10, 0, 0, 1].into();
        let mut shown = slots.take(peer, false, 10).expect("room");
        assert!(shown.prove());
        let (oldest, newer) = (slots.take(peer, false, 10), slots.take(peer, false, 10));
        let (oldest, newer) = (oldest.expect("room"), newer.expect("room"));
        let third = slots.take(peer, false, 10).expect("the oldest without a token made room");
        assert!(oldest.evicted().is_cancelled() && !newer.evicted().is_cancelled());
        assert!(!shown.evicted().is_cancelled() && !third.evicted().is_cancelled());
        // Evicted, it keeps its client's count until it closes; proven late, it has no place.
        assert_eq!(slots.open_from(peer), 4);
        let mut oldest = oldest;
        assert!(!oldest.prove(), "evicted, it has no place to keep");
        drop(oldest);
        let (mut newer, mut third) = (newer, third);
        assert!(newer.prove() && third.prove());
        assert_eq!(slots.take(peer, false, 10).err(), Some(Full::All), "every place shown a token");
        drop(third);
        assert!(slots.take(peer, false, 10).is_ok());
        assert_eq!(slots.open_from(peer), 2);
    }
}
