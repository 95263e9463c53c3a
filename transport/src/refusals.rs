//! Refused tokens: each refusal is logged with the client (at most one line per client every
//! 10 s, with the count), and a client that keeps guessing is slowed down, but never at the
//! cost of the door: a refusal is held at most [`MAX_HOLD`], at most [`MAX_HELD_PER_CLIENT`]
//! of one client and [`MAX_HELD`] in all are held at once, and anything beyond is answered at
//! once with 429 (its connection closed). A client is its address, an IPv6 one by its /64.
//! Requests with a valid token never wait.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::warn;

use crate::session::lock;

/// Refusals answered at once, before slowing down.
const FREE: u32 = 5;
/// Added to the spacing of a client's refusals for each one beyond `FREE`.
const STEP: Duration = Duration::from_millis(50);
/// Widest spacing of a client's refusals.
const MAX_SPACING: Duration = Duration::from_secs(1);
/// Longest a refusal is held before it is answered.
pub const MAX_HOLD: Duration = Duration::from_secs(2);
/// Most refusals of one client held at once.
pub const MAX_HELD_PER_CLIENT: u32 = 4;
/// Most refusals held at once, over all clients.
pub const MAX_HELD: usize = 256;
/// A client quiet this long starts afresh.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// Least time between two log lines about one client.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// Most clients remembered; beyond it, the tenth least recently refused are forgotten.
const MAX_CLIENTS: usize = 10_000;

/// A client as the slow-down counts it: an IPv4 address, or an IPv6 /64 (one host's share).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientKey(u128);

impl ClientKey {
    /// The key of `ip` (an IPv4-mapped IPv6 address is its IPv4 address).
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(u128::from(u32::from(v4))),
                None => Self((u128::from(v6) >> 64 << 64) | 1),
            },
        }
    }
}

/// What is remembered of a client that sent wrong tokens.
#[derive(Debug)]
struct Strikes {
    count: u32,
    last: Instant,
    next_answer: Instant,
    logged: Option<Instant>,
    unlogged: u32,
    held: u32,
}

/// How a refused request is answered.
#[derive(Debug)]
pub enum Answer {
    /// Now: 401.
    Now,
    /// At this instant (within [`MAX_HOLD`]), holding its place until the [`Held`] is dropped.
    At(Instant, Held),
    /// Now, with 429 and the connection closed: the client has too many refusals held, or
    /// its next one would be held longer than [`MAX_HOLD`].
    Throttled,
}

/// A refusal's place among those held; given back when dropped.
#[derive(Debug)]
pub struct Held {
    refusals: Arc<Table>,
    client: ClientKey,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut table = lock(&self.refusals.clients);
        table.held = table.held.saturating_sub(1);
        if let Some(strikes) = table.by_client.get_mut(&self.client) {
            strikes.held = strikes.held.saturating_sub(1);
        }
    }
}

#[derive(Debug, Default)]
struct Clients {
    by_client: HashMap<ClientKey, Strikes>,
    held: usize,
}

#[derive(Debug, Default)]
struct Table {
    clients: Mutex<Clients>,
}

/// Refusals by client.
#[derive(Debug, Default)]
pub struct Refusals {
    table: Arc<Table>,
}

impl Refusals {
    /// Records a refused request from `client`; says when and how it is answered.
    pub fn refuse(&self, client: IpAddr) -> Answer {
        let now = Instant::now();
        let key = ClientKey::of(client);
        let mut table = lock(&self.table.clients);
        if table.by_client.len() >= MAX_CLIENTS && !table.by_client.contains_key(&key) {
            forget_least_recent(&mut table.by_client);
        }
        let held_in_all = table.held;
        let strikes = table.by_client.entry(key).or_insert(Strikes {
            count: 0,
            last: now,
            next_answer: now,
            logged: None,
            unlogged: 0,
            held: 0,
        });
        if now.duration_since(strikes.last) >= FORGET_AFTER {
            strikes.count = 0;
        }
        strikes.count = strikes.count.saturating_add(1);
        strikes.last = now;
        strikes.unlogged += 1;
        if strikes.logged.is_none_or(|at| now.duration_since(at) >= LOG_EVERY) {
            warn!(
                peer = %client,
                refused = strikes.unlogged,
                in_a_row = strikes.count,
                "refused requests with a wrong or missing token"
            );
            strikes.logged = Some(now);
            strikes.unlogged = 0;
        }
        if strikes.count <= FREE {
            return Answer::Now;
        }
        let spacing = STEP.saturating_mul(strikes.count - FREE).min(MAX_SPACING);
        let at = strikes.next_answer.max(now) + spacing;
        if at.duration_since(now) > MAX_HOLD
            || strikes.held >= MAX_HELD_PER_CLIENT
            || held_in_all >= MAX_HELD
        {
            return Answer::Throttled;
        }
        strikes.next_answer = at;
        strikes.held += 1;
        table.held += 1;
        Answer::At(at, Held { refusals: self.table.clone(), client: key })
    }

    /// Refusals held now, over all clients.
    pub fn held(&self) -> usize {
        lock(&self.table.clients).held
    }
}

/// Forgets the tenth of the clients refused least recently (a selection, not a sort: the
/// table stays cheap however many addresses a flood uses).
fn forget_least_recent(clients: &mut HashMap<ClientKey, Strikes>) {
    let mut lasts: Vec<Instant> = clients.values().map(|s| s.last).collect();
    let cut = lasts.len() / 10;
    let (_, oldest_kept, _) = lasts.select_nth_unstable(cut);
    let oldest_kept = *oldest_kept;
    clients.retain(|_, s| s.last >= oldest_kept || s.held > 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer_at(answer: &Answer) -> Option<Instant> {
        match answer {
            Answer::At(at, _) => Some(*at),
            _ => None,
        }
    }

    #[test]
    fn a_guessing_client_is_spaced_out_then_throttled_and_others_are_not() {
        let refusals = Refusals::default();
        let guesser: IpAddr = [10, 0, 0, 1].into();
        for _ in 0..FREE {
            assert!(matches!(refusals.refuse(guesser), Answer::Now), "the first are free");
        }
        let start = Instant::now();
        let mut held = Vec::new();
        let mut throttled = 0;
        for _ in 0..100 {
            match refusals.refuse(guesser) {
                Answer::At(at, h) => {
                    assert!(at.duration_since(start) <= MAX_HOLD + Duration::from_millis(50));
                    held.push(h);
                }
                Answer::Throttled => throttled += 1,
                Answer::Now => panic!("a guesser is not answered at once"),
            }
        }
        assert_eq!(held.len(), MAX_HELD_PER_CLIENT as usize, "at most this many are held");
        assert_eq!(throttled, 100 - MAX_HELD_PER_CLIENT as usize);
        assert_eq!(refusals.held(), held.len());
        drop(held);
        assert_eq!(refusals.held(), 0, "a held refusal gives its place back");
        assert!(matches!(refusals.refuse([10, 0, 0, 2].into()), Answer::Now));
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap_or(IpAddr::from([0; 16]));
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap_or(IpAddr::from([0; 16]));
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap_or(IpAddr::from([0; 16]));
        assert_eq!(ClientKey::of(a), ClientKey::of(b));
        assert_ne!(ClientKey::of(a), ClientKey::of(c));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap_or(IpAddr::from([0; 16]));
        assert_eq!(ClientKey::of(mapped), ClientKey::of([10, 0, 0, 1].into()));
        let refusals = Refusals::default();
        for _ in 0..FREE {
            refusals.refuse(a);
        }
        assert!(answer_at(&refusals.refuse(b)).is_some(), "b is slowed as a's /64");
    }

    #[test]
    fn the_total_held_is_capped() {
        let refusals = Refusals::default();
        let mut held = Vec::new();
        let mut throttled = 0;
        for client in 0..(MAX_HELD as u32) {
            let ip: IpAddr = std::net::Ipv4Addr::from(0x0a00_0000 + client).into();
            for _ in 0..=FREE {
                match refusals.refuse(ip) {
                    Answer::At(_, h) => held.push(h),
                    Answer::Throttled => throttled += 1,
                    Answer::Now => {}
                }
            }
        }
        assert_eq!(held.len(), MAX_HELD);
        assert_eq!(throttled, 0);
        let one_more: IpAddr = [192, 168, 0, 1].into();
        for _ in 0..FREE {
            refusals.refuse(one_more);
        }
        assert!(matches!(refusals.refuse(one_more), Answer::Throttled));
    }

    #[test]
    fn a_full_table_forgets_the_least_recent_not_everyone() {
        let refusals = Refusals::default();
        let guesser: IpAddr = [10, 255, 0, 1].into();
        for _ in 0..FREE {
            refusals.refuse(guesser);
        }
        for client in 0..(MAX_CLIENTS as u32 + 10) {
            refusals.refuse(std::net::Ipv4Addr::from(0x0b00_0000 + client).into());
        }
        // The guesser was among the least recent and is forgotten; a recent one is not.
        let recent: IpAddr = std::net::Ipv4Addr::from(0x0b00_0000 + MAX_CLIENTS as u32).into();
        let table = lock(&refusals.table.clients);
        assert!(table.by_client.contains_key(&ClientKey::of(recent)));
        assert!(table.by_client.len() > MAX_CLIENTS * 8 / 10, "{}", table.by_client.len());
    }
}
