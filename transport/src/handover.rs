//! What each side of a take-over knows while sessions move: the new process holds a step for
//! a session it does not have yet while sessions are still arriving, and the old one
//! remembers which sessions it handed over, so that neither says a moved session is gone.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use crate::identity::IdentityId;
use crate::session::lock;

/// Longest a step waits for its session to arrive (a take-over moves a session between
/// turns within milliseconds; one whose turn was in flight follows that turn's end).
pub const ARRIVAL_WAIT: Duration = Duration::from_secs(15);

/// A take-over as the two processes see it.
#[derive(Debug)]
pub struct Handover {
    /// New process: true while sessions are still arriving; each arrival wakes the waiters.
    arriving: watch::Sender<bool>,
    /// Old process: the sessions it handed over, and who owns each.
    moved: Mutex<HashMap<String, IdentityId>>,
    /// Old process: a new one is taking over, or took over; a session or step that still
    /// reaches this one goes there.
    leaving: std::sync::atomic::AtomicBool,
}

impl Default for Handover {
    fn default() -> Self {
        Self { arriving: watch::Sender::new(false), moved: Mutex::default(), leaving: false.into() }
    }
}

impl Handover {
    /// Sessions begin arriving (new process).
    pub fn begin_arriving(&self) {
        self.arriving.send_replace(true);
    }

    /// A session arrived: steps waiting for one look again.
    pub fn arrived(&self) {
        self.arriving.send_modify(|_| ());
    }

    /// Every session has arrived, or the take-over ended: waiting steps answer now.
    pub fn end_arriving(&self) {
        self.arriving.send_replace(false);
    }

    /// True while sessions are still arriving.
    pub fn is_arriving(&self) -> bool {
        *self.arriving.borrow()
    }

    /// Waits until `found` finds a session, while sessions are still arriving and for
    /// [`ARRIVAL_WAIT`] at most; `None` when it did not come.
    pub async fn wait_for<T>(&self, mut found: impl FnMut() -> Option<T>) -> Option<T> {
        let mut news = self.arriving.subscribe();
        let deadline = tokio::time::Instant::now() + ARRIVAL_WAIT;
        loop {
            if let Some(it) = found() {
                return Some(it);
            }
            if !*news.borrow_and_update() {
                return None;
            }
            if tokio::time::timeout_at(deadline, news.changed()).await.is_err() {
                return found();
            }
        }
    }

    /// A new process is taking this one over (old process), or no longer (`false`: the
    /// take-over failed): meanwhile no session opens and no step begins here; each is hung up
    /// on, to be sent again to the new process.
    pub fn set_leaving(&self, leaving: bool) {
        self.leaving.store(leaving, std::sync::atomic::Ordering::Release);
    }

    /// True while a new process takes this one over, and after.
    pub fn is_leaving(&self) -> bool {
        self.leaving.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Session `id` of `owner` was handed over (old process).
    pub fn mark_moved(&self, id: &str, owner: &IdentityId) {
        lock(&self.moved).insert(id.to_owned(), owner.clone());
    }

    /// Session `id` came back: the take-over failed before the new process had it.
    pub fn unmark_moved(&self, id: &str) {
        lock(&self.moved).remove(id);
    }

    /// True when session `id` of `owner` was handed over (old process); another identity's
    /// is as unknown as an id never issued.
    pub fn was_moved(&self, id: &str, owner: &IdentityId) -> bool {
        lock(&self.moved).get(id).is_some_and(|o| o == owner)
    }

    /// True when a session of `owner` missing from the table may yet be somewhere: arriving
    /// here, or handed over from here. A keep-alive does not call it gone.
    pub fn may_hold(&self, id: &str, owner: &IdentityId) -> bool {
        self.is_arriving() || self.was_moved(id, owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_step_waits_for_its_session_while_sessions_arrive() {
        let handover = Arc::new(Handover::default());
        let table = Arc::new(Mutex::new(None::<u32>));
        assert_eq!(handover.wait_for(|| *lock(&table)).await, None, "no take-over: no wait");
        handover.begin_arriving();
        let (h, t) = (handover.clone(), table.clone());
        let waiter = tokio::spawn(async move { h.wait_for(|| *lock(&t)).await });
        tokio::task::yield_now().await;
        *lock(&table) = Some(7);
        handover.arrived();
        assert_eq!(waiter.await.ok().flatten(), Some(7));
        let (h, t) = (handover.clone(), Arc::new(Mutex::new(None::<u32>)));
        let waiter = tokio::spawn(async move { h.wait_for(|| *lock(&t)).await });
        tokio::task::yield_now().await;
        handover.end_arriving();
        assert_eq!(waiter.await.ok().flatten(), None, "the end of arrivals answers the wait");
    }

    #[test]
    fn a_moved_session_is_not_gone_on_the_old_side() {
        let handover = Handover::default();
        let (alice, bob) = (IdentityId::named("alice"), IdentityId::named("bob"));
        assert!(!handover.may_hold("a", &alice));
        handover.mark_moved("a", &alice);
        assert!(handover.may_hold("a", &alice) && !handover.may_hold("b", &alice));
        assert!(!handover.may_hold("a", &bob), "another identity's session is unknown");
        handover.unmark_moved("a");
        assert!(!handover.may_hold("a", &alice));
    }
}
