//! Unit tests of `slots.rs`: places, per client, evictions and each identity's own.

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
    let mut held: Vec<Slot> = (0..3).filter_map(|_| slots.take(attacker, false, 9).ok()).collect();
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
    let through_proxy: Vec<Slot> = (0..7).filter_map(|_| slots.take(proxy, true, 3).ok()).collect();
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
    let pool: Vec<Slot> = (0..4).map(|_| slots.take(sidecar, false, 64).expect("room")).collect();
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
