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
        let Some((unproven, _)) = &self.unproven else { return self.permit.is_some() };
        match own() {
            Some(share) => {
                let placed = self.settle();
                // Evicted a moment before: the share goes back with it.
                self._own = placed.then_some(share);
                placed
            }
            None => lock(&unproven.permit).is_some(),
        }
    }

    /// The connection becomes a stream: its place is its own from now on, within its
    /// identity's share of connections or not (its streams are bounded by their own share).
    /// False when it was evicted a moment before.
    pub fn settle(&mut self) -> bool {
        if let Some((unproven, waiting)) = self.unproven.take() {
            self.permit = lock(&waiting).release(&unproven);
        }
        self.permit.is_some()
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
#[path = "slots_tests.rs"]
mod tests;
