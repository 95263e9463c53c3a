//! Sending a step: a large body compressed, and the step sent again on a new connection when
//! its connection broke, until the transport answers, says it cannot, or the session's time is
//! up.

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::wire::compress_whole;

use super::endpoint::RESUME_FOR;
use super::{Outgoing, Pending, TunnelConn};
use crate::Error;
use crate::http::ResponseHead;

/// Request bodies from this size on are compressed (when answers are).
const COMPRESS_REQUESTS_FROM: usize = 64 * 1024;
/// Longest pause between two attempts to resume.
const RESUME_PAUSE_MAX: Duration = Duration::from_secs(1);

impl TunnelConn {
    /// A large request body compressed, when answers are compressed, the transport takes
    /// zstd bodies and it pays.
    pub(super) fn compressed(&self, body: &[u8]) -> Option<bytes::Bytes> {
        let ep = &self.endpoint;
        if body.len() < COMPRESS_REQUESTS_FROM
            || !ep.compress
            || !ep.takes_zstd.load(Ordering::Relaxed)
        {
            return None;
        }
        compress_whole(body).ok().filter(|packed| packed.len() < body.len() * 9 / 10)
    }

    /// Sends a step again after its connection broke, on a new connection, until it is
    /// answered, the transport says it cannot be, or [`RESUME_FOR`] has passed; `from` is how
    /// much of its answer arrived. Answers the new response's head.
    pub(super) async fn resend(
        &mut self,
        pending: &Pending,
        from: u64,
    ) -> Result<Box<ResponseHead>, Error> {
        let session_timeout = self.endpoint.session_timeout_ms.load(Ordering::Relaxed);
        let window = RESUME_FOR.min(Duration::from_millis(session_timeout));
        let mut deadline = tokio::time::Instant::now() + window;
        let mut head = pending.head.clone();
        head.resume_from = Some(from);
        let mut pause = Duration::from_millis(50);
        let mut last: String;
        loop {
            self.http = None;
            let uploaded = self.steps.uploaded;
            // An upload asks where the transport stands first (an empty request).
            // A kept-alive connection found closed (the break that made the step go again often
            // closed the idle ones too) is followed by a fresh one at once, not after a pause:
            // a resend is safe to send twice (it carries its step number and where its answer
            // stands). Under cuts every 2-400 KB, the pauses after idle connections that
            // turned out dead (1,749 in one run of tests/faults.rs) stretched a blob past 30 s.
            let outgoing = Outgoing { tries: 2, ..pending.outgoing(&head) };
            let sent = self.send_step(outgoing, true).await;
            if self.steps.uploaded > uploaded {
                // An upload that moves on is not stuck: its time starts again.
                pause = Duration::from_millis(50);
                deadline = tokio::time::Instant::now() + window;
            }
            match sent {
                Ok(head) => {
                    tracing::debug!(session = %common::wire::session_label(pending.session()), from, "a step sent again was answered");
                    return Ok(head);
                }
                Err(
                    e @ (Error::TransportUnreachable { .. }
                    | Error::ConnectionBroken { .. }
                    | Error::SessionBusy),
                ) => last = e.to_string(),
                // A new connection that opens but stays silent: the transport itself is
                // frozen or overloaded, not the path to it.
                Err(Error::TransportSilent { reason, .. }) => {
                    return Err(Error::NotResumed(format!(
                        "a new connection to the transport at {} stayed silent ({reason})",
                        self.endpoint.url
                    )));
                }
                Err(e) if matches!(&e, Error::BadAnswer { status, .. } if status.starts_with("50")) =>
                {
                    last = e.to_string();
                }
                Err(e) => return Err(e),
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(Error::NotResumed(format!(
                    "the transport at {} could not be reached again within {} s (last: {last})",
                    self.endpoint.url,
                    window.as_secs()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RESUME_PAUSE_MAX);
        }
    }
}
