//! Refused tokens: each refusal is logged with the peer (at most one line per peer every
//! 10 s, with the count), and a peer that keeps guessing is slowed down. Its refusals are
//! answered one after another, further apart the more there were, however many connections it
//! opens. Requests with a valid token never wait.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::warn;

use crate::session::lock;

/// Refusals answered at once, before slowing down.
const FREE: u32 = 5;
/// Added to the spacing of a peer's refusals for each one beyond `FREE`.
const STEP: Duration = Duration::from_millis(50);
/// Widest spacing of a peer's refusals.
const MAX_SPACING: Duration = Duration::from_secs(1);
/// A peer quiet this long starts afresh.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// Least time between two log lines about one peer.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// Most peers remembered (beyond it, the quiet ones are forgotten first).
const MAX_PEERS: usize = 10_000;

/// What is remembered of a peer that sent wrong tokens.
#[derive(Debug)]
struct Strikes {
    count: u32,
    last: Instant,
    next_answer: Instant,
    logged: Option<Instant>,
    unlogged: u32,
}

/// Refusals by peer address.
#[derive(Debug, Default)]
pub struct Refusals {
    peers: Mutex<HashMap<IpAddr, Strikes>>,
}

impl Refusals {
    /// Records a refused request from `peer`; returns when its answer may be sent.
    pub fn refuse(&self, peer: IpAddr) -> Instant {
        let now = Instant::now();
        let mut peers = lock(&self.peers);
        if peers.len() >= MAX_PEERS && !peers.contains_key(&peer) {
            peers.retain(|_, s| now.duration_since(s.last) < FORGET_AFTER);
            if peers.len() >= MAX_PEERS {
                peers.clear();
            }
        }
        let strikes = peers.entry(peer).or_insert(Strikes {
            count: 0,
            last: now,
            next_answer: now,
            logged: None,
            unlogged: 0,
        });
        if now.duration_since(strikes.last) >= FORGET_AFTER {
            strikes.count = 0;
        }
        strikes.count = strikes.count.saturating_add(1);
        strikes.last = now;
        strikes.unlogged += 1;
        if strikes.logged.is_none_or(|at| now.duration_since(at) >= LOG_EVERY) {
            warn!(
                %peer,
                refused = strikes.unlogged,
                in_a_row = strikes.count,
                "refused requests with a wrong or missing token"
            );
            strikes.logged = Some(now);
            strikes.unlogged = 0;
        }
        let spacing = STEP.saturating_mul(strikes.count.saturating_sub(FREE)).min(MAX_SPACING);
        strikes.next_answer = strikes.next_answer.max(now) + spacing;
        strikes.next_answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guessing_peer_is_spaced_out_and_others_are_not() {
        let refusals = Refusals::default();
        let guesser: IpAddr = [10, 0, 0, 1].into();
        let start = Instant::now();
        let mut last = start;
        for _ in 0..FREE {
            last = refusals.refuse(guesser);
        }
        assert!(last.duration_since(start) < Duration::from_millis(10), "the first are free");
        for _ in 0..100 {
            last = refusals.refuse(guesser);
        }
        // Spacing grows by STEP up to MAX_SPACING: 100 more take well over a minute.
        assert!(last.duration_since(start) > Duration::from_secs(60));
        let other = refusals.refuse([10, 0, 0, 2].into());
        assert!(other.duration_since(Instant::now()) < Duration::from_millis(10));
    }
}
