//! The silence limit of a connection to the transport: one timer per connection, not one per
//! read.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// A connection's one timer for its silence limit, kept from wait to wait: a wait notes when
/// it would end, and the timer, once due, is put off to that end when it is later. A command
/// sets no timer of its own, and the timer fires about once per limit while the connection is
/// busy.
#[derive(Debug)]
pub(super) struct Silence {
    /// Longest wait for any byte of an answer (or room to write a request): a transport that
    /// sends nothing, not even a heartbeat frame, for this long is taken for dead.
    limit: Duration,
    timer: Pin<Box<Sleep>>,
}

impl Silence {
    /// A limit of `limit`, its timer first due after it.
    pub(super) fn new(limit: Duration) -> Self {
        Self { limit, timer: Box::pin(tokio::time::sleep(limit)) }
    }

    /// Sets the limit for the waits from now on.
    pub(super) fn set_limit(&mut self, limit: Duration) {
        self.limit = limit;
    }

    /// [`Self::within`] for an operation that is mostly done at once (a write the socket
    /// takes whole): tried first without reading the clock.
    pub(super) async fn within_ready_first<T>(
        &mut self,
        mut op: Pin<&mut impl Future<Output = io::Result<T>>>,
    ) -> io::Result<T> {
        match futures_util::FutureExt::now_or_never(op.as_mut()) {
            Some(done) => done,
            None => self.within(op).await,
        }
    }

    /// Runs one socket operation within the limit. (`op` comes pinned where it was made: a
    /// future passed by value would be moved into this one's state.)
    pub(super) async fn within<T>(
        &mut self,
        mut op: Pin<&mut impl Future<Output = io::Result<T>>>,
    ) -> io::Result<T> {
        let limit = self.limit;
        let due = Instant::now() + limit;
        // Only a lowered limit can leave the timer later than this wait's end.
        if self.timer.deadline() > due {
            self.timer.as_mut().reset(due);
        }
        loop {
            tokio::select! {
                biased;
                done = &mut op => return done,
                () = self.timer.as_mut() => {
                    if Instant::now() >= due {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("the transport went silent: nothing for {} s", limit.as_secs_f32()),
                        ));
                    }
                    self.timer.as_mut().reset(due);
                }
            }
        }
    }
}
