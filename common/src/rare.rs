//! A wait for a rare event (a shutdown, a session gone), polled again only when its own
//! wake-up came: a command loop that selects on it with its socket reads pays a flag's check
//! per wake-up, not the locks of a `CancellationToken`'s wait (about 300 instructions each).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Wraps a wait that completes once with `()`. The inner wait is polled with a waker of its
/// own, which notes the wake-up and wakes the task; a poll of the wrapper with the same task
/// and no wake-up noted answers `Pending` without polling the inner wait. Once done, it stays
/// done.
pub struct RareWait<F> {
    inner: Pin<Box<F>>,
    relay: Arc<Relay>,
    relay_waker: Waker,
    /// The task's waker the relay wakes, as last registered.
    task: Option<Waker>,
    done: bool,
}

/// The inner wait's waker: notes that a wake-up came and passes it to the task.
#[derive(Default)]
struct Relay {
    woken: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(task) = task.as_ref() {
            task.wake_by_ref();
        }
    }
}

impl<F> std::fmt::Debug for RareWait<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RareWait").field("done", &self.done).finish_non_exhaustive()
    }
}

impl<F: Future<Output = ()>> RareWait<F> {
    /// Wraps `inner` (boxed once, here).
    pub fn new(inner: F) -> Self {
        let relay = Arc::new(Relay::default());
        let relay_waker = Waker::from(relay.clone());
        Self { inner: Box::pin(inner), relay, relay_waker, task: None, done: false }
    }
}

impl<F: Future<Output = ()>> Future for RareWait<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(());
        }
        let same_task = this.task.as_ref().is_some_and(|task| task.will_wake(cx.waker()));
        if same_task {
            if !this.relay.woken.swap(false, Ordering::AcqRel) {
                return Poll::Pending;
            }
        } else {
            // A wake-up from now on reaches this task; the inner wait is polled below, so one
            // that came before is not missed.
            *this.relay.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
            this.task = Some(cx.waker().clone());
            this.relay.woken.store(false, Ordering::Release);
        }
        let mut inner_cx = Context::from_waker(&this.relay_waker);
        let poll = this.inner.as_mut().poll(&mut inner_cx);
        this.done = poll.is_ready();
        poll
    }
}

#[cfg(test)]
#[path = "rare_tests.rs"]
mod tests;
