//! A connection's place in `max_connections`, and in its client's `max_connections_per_client`
//! (an address, an IPv6 one by its /64; a trusted proxy's connections count only in the
//! first): one client cannot take every connection, however fast it opens them. A connection
//! that has not shown a valid token yet holds its place only until a new connection needs it:
//! with every place taken, one such connection is closed to make room, the oldest of the
//! client holding the most of them when it holds more than one (else the oldest of all).
//! Connections without a token, from however many addresses, cannot hold every place, and a
//! client opening several loses its own before a slow one's connection goes. A connection's
//! place becomes its own within its identity's share (`max_connections_per_token`): one
//! token's connections beyond it stay among those a new connection may take, and a request
//! without a valid token gives a place back until a token is shown again.

use std::collections::{BTreeSet, HashMap, VecDeque};
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
    /// The places of connections that have not shown a token.
    waiting: Arc<Mutex<Waiting>>,
    capacity: usize,
}

/// The connections that have not shown a token: oldest first, and by client (held weakly: one
/// that showed a token or closed is skipped, and swept out now and then).
#[derive(Debug, Default)]
struct Waiting {
    oldest_first: VecDeque<Weak<Unproven>>,
    by_client: HashMap<ClientKey, ClientWaiting>,
    /// Clients by how many places they hold without a token, fewest first.
    ranked: BTreeSet<(usize, ClientKey)>,
}

/// One client's connections without a token.
#[derive(Debug, Default)]
struct ClientWaiting {
    oldest_first: VecDeque<Weak<Unproven>>,
    /// Those that still hold a place.
    holding: usize,
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
    /// Taken out (under the lock of [`Waiting`]) when it shows a token, is evicted or closes.
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    evicted: CancellationToken,
    /// Its client, unless it came through a trusted proxy.
    client: Option<ClientKey>,
}

/// One connection's place, given back when dropped; a stream's also holds its place in its
/// identity's share.
#[derive(Debug)]
pub struct Slot {
    /// Its own once it showed a token ([`Slot::prove`]); until then it is in `unproven`.
    permit: Option<OwnedSemaphorePermit>,
    unproven: Option<(Arc<Unproven>, Arc<Mutex<Waiting>>)>,
    /// Where its place goes back to when a request without a token comes ([`Slot::unprove`]),
    /// and the token its connection is told to close by.
    waiting: (Arc<Mutex<Waiting>>, CancellationToken, Option<ClientKey>, usize),
    client: Option<(ByClient, ClientKey)>,
    /// A stream's place in its identity's streams.
    _share: Option<Arc<Taken>>,
    /// Its place in its identity's connections (`max_connections_per_token`), once proven.
    _own: Option<Taken>,
}

impl Waiting {
    /// Counts `unproven` among its client's.
    fn add(&mut self, unproven: &Arc<Unproven>, capacity: usize) {
        if self.oldest_first.len() >= 2 * capacity.max(8) {
            self.oldest_first.retain(|entry| entry.strong_count() > 0);
        }
        self.oldest_first.push_back(Arc::downgrade(unproven));
        let Some(key) = unproven.client else { return };
        let client = self.by_client.entry(key).or_default();
        if client.oldest_first.len() >= 2 * client.holding + 8 {
            client.oldest_first.retain(|entry| entry.strong_count() > 0);
        }
        client.oldest_first.push_back(Arc::downgrade(unproven));
        self.ranked.remove(&(client.holding, key));
        client.holding += 1;
        self.ranked.insert((client.holding, key));
    }

    /// Takes `unproven`'s place out (it showed a token, was evicted or closed), and counts it
    /// no more among its client's.
    fn release(&mut self, unproven: &Unproven) -> Option<OwnedSemaphorePermit> {
        let permit = lock(&unproven.permit).take()?;
        if let Some(key) = unproven.client
            && let Some(client) = self.by_client.get_mut(&key)
        {
            self.ranked.remove(&(client.holding, key));
            client.holding -= 1;
            match client.holding {
                0 => drop(self.by_client.remove(&key)),
                holding => drop(self.ranked.insert((holding, key))),
            }
        }
        Some(permit)
    }

    /// The place of a connection without a token, which is told to close: the oldest of the
    /// client holding the most such places, when it holds more than one; else the oldest of
    /// all. A client opening connections that show no token loses its own first. (A sidecar
    /// shows its token within a round trip: it seldom holds several at the moment one goes.)
    fn evict(&mut self) -> Option<OwnedSemaphorePermit> {
        loop {
            let most = self.ranked.last().copied().filter(|(holding, _)| *holding > 1);
            let entry = match most {
                Some((_, key)) => self.by_client.get_mut(&key)?.oldest_first.pop_front(),
                None => self.oldest_first.pop_front(),
            }?;
            let Some(victim) = entry.upgrade() else { continue };
            let Some(permit) = self.release(&victim) else { continue };
            victim.evicted.cancel();
            return Some(permit);
        }
    }
}

impl Slots {
    /// Room for `max_connections` connections.
    pub fn new(max_connections: usize) -> Self {
        Self {
            total: Arc::new(Semaphore::new(max_connections)),
            by_client: Arc::default(),
            waiting: Arc::default(),
            capacity: max_connections,
        }
    }

    /// A place for a connection from `peer`, counted against its client's `per_client` unless
    /// `peer` is a trusted proxy; with every place taken, a connection that has not shown a
    /// token gives up its own (and is told so through [`Slot::evicted`]): see
    /// [`Waiting::evict`].
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
        let key = client.as_ref().map(|(_, key)| *key);
        // Dropped on a refusal below, it gives the client's count back.
        let evicted = CancellationToken::new();
        let back = (self.waiting.clone(), evicted.clone(), key, self.capacity);
        let mut slot =
            Slot { permit: None, unproven: None, waiting: back, client, _share: None, _own: None };
        let mut waiting = lock(&self.waiting);
        let permit = match self.total.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => waiting.evict().ok_or(Full::All)?,
        };
        let unproven =
            Arc::new(Unproven { permit: Mutex::new(Some(permit)), evicted, client: key });
        waiting.add(&unproven, self.capacity);
        slot.unproven = Some((unproven, self.waiting.clone()));
        Ok(slot)
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

    /// The connection showed a valid token: its place is its own from now on, taken in its
    /// identity's share of connections by `own` (called once). An identity at its share keeps
    /// its place where it was: a new connection may still take it, so one token's connections
    /// cannot hold every place. False when it was evicted a moment before (it has no place: it
    /// is closing, and runs nothing more).
    pub fn prove(&mut self, own: impl FnOnce() -> Option<Taken>) -> bool {
        let Some((unproven, waiting)) = self.unproven.take() else {
            return self.permit.is_some();
        };
        match own() {
            Some(share) => {
                self._own = Some(share);
                self.permit = lock(&waiting).release(&unproven);
                self.permit.is_some()
            }
            None => {
                let placed = lock(&unproven.permit).is_some();
                self.unproven = Some((unproven, waiting));
                placed
            }
        }
    }

    /// A request without a valid token came on the connection: a place it held as its own goes
    /// back among those a new connection may take (with its identity's share of it), until a
    /// token is shown again.
    pub fn unprove(&mut self) {
        let Some(permit) = self.permit.take() else { return };
        self._own = None;
        let (waiting, evicted, client, capacity) = &self.waiting;
        let permit = Mutex::new(Some(permit));
        let unproven = Arc::new(Unproven { permit, evicted: evicted.clone(), client: *client });
        lock(waiting).add(&unproven, *capacity);
        self.unproven = Some((unproven, waiting.clone()));
    }

    /// Cancelled when a new connection took this one's place, before it showed a token.
    pub fn evicted(&self) -> CancellationToken {
        self.waiting.1.clone()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((unproven, waiting)) = self.unproven.take() {
            drop(lock(&waiting).release(&unproven));
        }
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
    use crate::shares::{IdentityCounts, Share, Shares};

    /// A place in an identity's share of connections, without a limit.
    fn own() -> Option<Taken> {
        let counts = Arc::new(IdentityCounts::default());
        Arc::new(Shares::default()).take_of(&counts, Share::Connections, 1, usize::MAX)
    }

    #[test]
    fn an_identitys_connections_past_its_share_stay_among_those_that_may_go() {
        let slots = Slots::new(3);
        let (shares, counts) = (Arc::new(Shares::default()), Arc::new(IdentityCounts::default()));
        let alices = || shares.take_of(&counts, Share::Connections, 1, 2);
        let attacker: IpAddr = [10, 0, 0, 1].into();
        let mut held: Vec<Slot> =
            (0..3).filter_map(|_| slots.take(attacker, false, 9).ok()).collect();
        assert!(held.iter_mut().all(|slot| slot.prove(alices)), "each keeps a place");
        assert_eq!(counts.held(Share::Connections), 2, "two are her own");
        let newcomer = slots.take([10, 0, 0, 2].into(), false, 9);
        assert!(newcomer.is_ok(), "a new connection finds a place");
        assert!(!held[2].prove(alices), "the one past her share was the one to go");
        assert!(held[0].prove(alices) && held[1].prove(alices));
        drop(held);
        assert_eq!(counts.held(Share::Connections), 0, "given back as they close");
    }

    #[test]
    fn a_request_without_a_token_gives_a_place_back() {
        let slots = Slots::new(1);
        let (client, other): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let mut held = slots.take(client, false, 9).expect("a place");
        assert!(held.prove(own));
        assert_eq!(slots.take(other, false, 9).err(), Some(Full::All), "its place is its own");
        held.unprove();
        let evicted = held.evicted();
        assert!(slots.take(other, false, 9).is_ok(), "a health check gave it back");
        assert!(evicted.is_cancelled(), "and its connection is told to close");
        assert!(!held.prove(own), "it has no place to prove");
    }

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
        assert!(proven.iter_mut().all(|s| s.prove(own)));
        first.iter().for_each(|s| assert!(!s.evicted().is_cancelled()));
        let mut first = first;
        assert!(first.iter_mut().all(|s| s.prove(own)));
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
        assert!(shown.prove(own));
        let (oldest, newer) = (slots.take(peer, false, 10), slots.take(peer, false, 10));
        let (oldest, newer) = (oldest.expect("room"), newer.expect("room"));
        let third = slots.take(peer, false, 10).expect("the oldest without a token made room");
        assert!(oldest.evicted().is_cancelled() && !newer.evicted().is_cancelled());
        assert!(!shown.evicted().is_cancelled() && !third.evicted().is_cancelled());
        // Evicted, it keeps its client's count until it closes; proven late, it has no place.
        assert_eq!(slots.open_from(peer), 4);
        let mut oldest = oldest;
        assert!(!oldest.prove(own), "evicted, it has no place to keep");
        drop(oldest);
        let (mut newer, mut third) = (newer, third);
        assert!(newer.prove(own) && third.prove(own));
        assert_eq!(slots.take(peer, false, 10).err(), Some(Full::All), "every place shown a token");
        drop(third);
        assert!(slots.take(peer, false, 10).is_ok());
        assert_eq!(slots.open_from(peer), 2);
    }

    #[test]
    fn the_client_holding_many_places_without_a_token_loses_one_first() {
        let slots = Slots::new(16);
        let (sidecar, attacker, other): (IpAddr, IpAddr, IpAddr) =
            ([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), [10, 0, 0, 3].into());
        // A sidecar's few connections, the oldest, still showing no token.
        let pool: Vec<Slot> =
            (0..4).map(|_| slots.take(sidecar, false, 64).expect("room")).collect();
        let mut attack: Vec<Slot> =
            (0..12).map(|_| slots.take(attacker, false, 64).expect("room")).collect();
        for n in 0..6 {
            let newer = slots.take(attacker, false, 64).expect("the attacker's oldest made room");
            assert!(attack[n].evicted().is_cancelled(), "the attacker's oldest went");
            attack.push(newer);
        }
        let from_other = slots.take(other, false, 64).expect("room from the attacker's");
        assert!(attack[6].evicted().is_cancelled());
        assert!(pool.iter().all(|s| !s.evicted().is_cancelled()), "the sidecar's stay");
        drop(attack);
        let mut pool = pool;
        pool.truncate(1);
        // No client holds more than one: the oldest of all goes.
        let address = |n: u8| IpAddr::from([10, 0, 1, n]);
        let _rest: Vec<Slot> =
            (0..14).map(|n| slots.take(address(n), false, 64).expect("room")).collect();
        assert!(!pool[0].evicted().is_cancelled());
        let _newest = slots.take(address(14), false, 64).expect("room from the oldest of all");
        assert!(pool[0].evicted().is_cancelled() && !from_other.evicted().is_cancelled());
    }
}
