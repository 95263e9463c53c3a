//! Tests of `RareWait`: it completes on its event, polls its inner wait only when woken,
//! follows a new task, and stays done.

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::RareWait;

/// An inner wait that counts its polls and completes when `token` is cancelled.
fn counted(token: CancellationToken, polls: Rc<Cell<u32>>) -> impl Future<Output = ()> {
    let mut wait = Box::pin(token.cancelled_owned());
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        polls.set(polls.get() + 1);
        wait.as_mut().poll(cx)
    })
}

#[tokio::test]
async fn completes_when_its_event_comes_during_other_work() {
    let token = CancellationToken::new();
    let mut wait = std::pin::pin!(RareWait::new(token.clone().cancelled_owned()));
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        canceller.cancel();
    });
    let mut ticks = 0;
    loop {
        tokio::select! {
            biased;
            () = &mut wait => break,
            () = tokio::time::sleep(Duration::from_millis(2)) => ticks += 1,
        }
        assert!(ticks < 5_000, "the cancellation was never seen");
    }
    assert!(token.is_cancelled());
    assert!(ticks >= 1, "the loop woke for its timer in between");
}

#[tokio::test]
async fn polls_its_inner_wait_only_when_woken() {
    let token = CancellationToken::new();
    let polls = Rc::new(Cell::new(0));
    let mut wait = Box::pin(RareWait::new(counted(token.clone(), polls.clone())));
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    for _ in 0..10 {
        assert!(wait.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(polls.get(), 1, "polled once to register, then left alone");
    token.cancel();
    assert!(wait.as_mut().poll(&mut cx).is_ready());
    assert_eq!(polls.get(), 2);
    // Done stays done, without polling the inner wait again.
    assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(()));
    assert_eq!(polls.get(), 2);
}

#[tokio::test]
async fn a_new_task_is_registered_and_woken() {
    let token = CancellationToken::new();
    let polls = Rc::new(Cell::new(0));
    let mut wait = Box::pin(RareWait::new(counted(token.clone(), polls.clone())));
    let noop = futures_util::task::noop_waker();
    assert!(wait.as_mut().poll(&mut Context::from_waker(&noop)).is_pending());
    // Polled from this task now: the inner wait is polled again, and the cancellation wakes
    // this task, not the first waker.
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        canceller.cancel();
    });
    let waited = tokio::time::timeout(Duration::from_secs(5), wait.as_mut()).await;
    assert!(waited.is_ok(), "the new task was never woken");
    assert!(polls.get() >= 2);
}
