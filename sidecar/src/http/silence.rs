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
pub(super) struct Silence(Pin<Box<Sleep>>);

impl Silence {
    /// A timer first due after `limit`.
    pub(super) fn new(limit: Duration) -> Self {
        Self(Box::pin(tokio::time::sleep(limit)))
    }

    /// Runs one socket operation within `limit`.
    pub(super) async fn within<T>(
        &mut self,
        limit: Duration,
        op: impl Future<Output = io::Result<T>>,
    ) -> io::Result<T> {
        let due = Instant::now() + limit;
        // Only a lowered limit can leave the timer later than this wait's end.
        if self.0.deadline() > due {
            self.0.as_mut().reset(due);
        }
        let mut op = std::pin::pin!(op);
        loop {
            tokio::select! {
                biased;
                done = &mut op => return done,
                () = self.0.as_mut() => {
                    if Instant::now() >= due {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("the transport went silent: nothing for {} s", limit.as_secs_f32()),
                        ));
                    }
                    self.0.as_mut().reset(due);
                }
            }
        }
    }
}
