//! A connection's place in `max_connections`, and in its client's `max_connections_per_client`
//! (an address, an IPv6 one by its /64; a trusted proxy's connections count only in the
//! first): one client cannot take every connection, however fast it opens them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
}

/// Why a connection has no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// `max_connections` are open.
    All,
    /// Its client has `max_connections_per_client` open.
    Client,
}

/// One connection's place, given back when dropped; a stream's also holds its place in its
/// identity's share.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    client: Option<(ByClient, ClientKey)>,
    _share: Option<Arc<Taken>>,
}

impl Slots {
    /// Room for `max_connections` connections.
    pub fn new(max_connections: usize) -> Self {
        Self { total: Arc::new(Semaphore::new(max_connections)), by_client: Arc::default() }
    }

    /// A place for a connection from `peer`, counted against its client's `per_client` unless
    /// `peer` is a trusted proxy.
    pub fn take(&self, peer: IpAddr, trusted_proxy: bool, per_client: usize) -> Result<Slot, Full> {
        let permit = self.total.clone().try_acquire_owned().map_err(|_| Full::All)?;
        if trusted_proxy {
            return Ok(Slot { _permit: permit, client: None, _share: None });
        }
        let key = ClientKey::of(peer);
        let mut by_client = lock(&self.by_client);
        let open = by_client.entry(key).or_default();
        if *open >= per_client {
            return Err(Full::Client);
        }
        *open += 1;
        Ok(Slot { _permit: permit, client: Some((self.by_client.clone(), key)), _share: None })
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
        assert_eq!(slots.take(other, false, 3).err(), Some(Full::All));
        drop(first);
        assert_eq!(slots.open_from(client), 0);
        assert!(slots.take(client, false, 3).is_ok());
    }
}
