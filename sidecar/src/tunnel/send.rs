//! Sending a step to the transport on the session's connection (a kept-alive one, or a new
//! one, a stream when the path allows): a large body compressed, a resumable upload's body
//! from where the transport stands (over a stream, in parts sent without waiting), the step
//! sent again on a new connection when its connection broke, until the transport answers,
//! says it cannot, or the session's time is up, and any answer that is not a 2xx turned into a
//! clear error.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::wire::compress_whole;
use common::wire::{ApiError, ApiErrorKind, JSON_CONTENT_TYPE, MAX_STREAM_BODY, StepHead};

use super::carrier::{Carrier, Connection, Via};
use super::endpoint::RESUME_FOR;
use super::{MAX_CONTROL_BODY, Outgoing, Pending, TunnelConn, is_break};
use crate::Error;
use crate::error::Broken;
use crate::http::{AnswerBody, ResponseHead};

/// Most answers in a row that take none of an upload before it is given up.
const UPLOAD_STALLS: usize = 4;

impl TunnelConn {
    pub(super) fn unreachable(&self, e: &std::io::Error) -> Error {
        Error::TransportUnreachable { url: self.endpoint.url.clone(), reason: e.to_string() }
    }

    /// Sends one request; returns the head and the connection once a 2xx head has been read.
    /// A token from `token_command` that the transport refused is asked for again, and the
    /// request sent once more (a refused request ran nothing).
    pub(super) async fn send(
        &mut self,
        req: Outgoing<'_>,
    ) -> Result<(Box<ResponseHead>, &mut Connection), Error> {
        let authorization = self.authorization.header().await?;
        // Pinned where it is made: awaited as it is returned, it would be moved (2.4 KB).
        let sent = std::pin::pin!(self.send_once(req, &authorization)).await;
        let head = match sent {
            Err(Error::TokenRefused { url, reason }) => {
                if !self.authorization.refused(&authorization).await {
                    return Err(Error::TokenRefused { url, reason });
                }
                let authorization = self.authorization.header().await?;
                Box::pin(self.send_once(req, &authorization)).await?
            }
            sent => sent?,
        };
        let conn = self.http.as_mut().ok_or(Broken::ConnectionLost)?;
        Ok((head, conn))
    }

    /// [`Self::send`] with this `Authorization`, once; the connection is left in `self.http`.
    async fn send_once(
        &mut self,
        req: Outgoing<'_>,
        authorization: &Arc<str>,
    ) -> Result<Box<ResponseHead>, Error> {
        let Outgoing { head, body, tries, .. } = req;
        let upload = req.upload.map(|_| req.upload_from);
        let ep = self.endpoint.clone();
        let affinity = self.affinity.clone();
        // A body too large for a stream message travels as a plain request: the stream waits
        // in the idle pool for the next session.
        let plain = body.len() > MAX_STREAM_BODY && upload.is_none();
        let part = ep.upload_part.load(Ordering::Relaxed);
        if plain && self.http.as_ref().is_some_and(Connection::is_stream) {
            self.give_back();
        }
        if self.http.is_none() {
            self.http = self.idle_connection(plain);
        }
        // A stream runs its steps as the token its upgrade carried: another token (a refreshed
        // one) needs a stream of its own.
        if self.http.as_ref().is_some_and(|c| c.is_stream() && !opened_as(c, authorization)) {
            self.http = None;
        }
        let via = ep.via(authorization, &affinity);
        for _attempt in 0..tries {
            let reused = self.http.as_ref().is_some_and(Connection::reusable);
            if !reused {
                // Rare paths are boxed: a command's futures stay small (they are moved and
                // zeroed at each command).
                self.http = Some(Box::pin(self.open_connection(plain, authorization)).await?);
            }
            let Some(conn) = self.http.as_mut() else { break };
            conn.set_silence_limit(Duration::from_millis(
                ep.silence_limit_ms.load(Ordering::Relaxed),
            ));
            match dispatch(conn, &via, head, body, (upload, part)).await {
                Ok(response) if (200..300).contains(&response.status) => return Ok(response),
                Ok(response) => {
                    let err = Box::pin(self.error_from(&response, body.len())).await;
                    // A stream whose token was refused is closed by the transport.
                    if matches!(err, Error::TokenRefused { .. }) {
                        self.http = None;
                    }
                    return Err(err);
                }
                // A kept-alive connection the other side had already closed: try a fresh one.
                Err(e) if reused && e.kind() == std::io::ErrorKind::ConnectionAborted => {
                    self.http = None
                }
                Err(e) => {
                    self.http = None;
                    return Err(self.failed(&e));
                }
            }
        }
        Err(self.unreachable(&std::io::Error::other("the connection kept closing")))
    }

    /// What a connection's failure is: silence, a break (another connection may not meet
    /// it), or an unreachable transport.
    pub(super) fn failed(&self, e: &std::io::Error) -> Error {
        let url = self.endpoint.url.clone();
        match e.kind() {
            std::io::ErrorKind::TimedOut => Error::TransportSilent { url, reason: e.to_string() },
            _ if is_break(e) => Error::ConnectionBroken { url, reason: e.to_string() },
            _ => self.unreachable(e),
        }
    }

    /// Turns a non-2xx answer into an error, whatever produced it.
    pub(super) async fn error_from(&mut self, response: &ResponseHead, size: usize) -> Error {
        let body = match self.http.as_mut() {
            Some(conn) => conn.body_to_end(MAX_CONTROL_BODY).await.unwrap_or_default(),
            None => bytes::Bytes::new(),
        };
        self.error_of(response, &body, size)
    }

    /// The error a non-2xx answer with `body` means (`size`: the request body's length).
    pub(super) fn error_of(&self, response: &ResponseHead, body: &[u8], size: usize) -> Error {
        let is_json = response.content_type.starts_with(JSON_CONTENT_TYPE);
        let api: Option<ApiError> = if is_json { serde_json::from_slice(body).ok() } else { None };
        let url = self.endpoint.url.clone();
        let status = response.status_line();
        match (response.status, api) {
            (401, api) => {
                let reason = api.map_or_else(|| "no reason given".into(), |a| a.message);
                Error::TokenRefused { url, reason }
            }
            (413, _) => Error::RequestTooLarge { url, size },
            (_, Some(ApiError { mysql: Some(mysql), .. })) => Error::Upstream(mysql),
            (_, Some(ApiError { error: ApiErrorKind::SessionNotFound, .. })) => Error::SessionLost,
            (_, Some(ApiError { error: ApiErrorKind::SessionBusy, .. })) => Error::SessionBusy,
            (_, Some(ApiError { error: ApiErrorKind::StepRefused, message, .. })) => {
                Error::NotResumed(message)
            }
            (_, Some(api)) => Error::BadAnswer { url, status, detail: format!(": {}", api.message) },
            (_, None) => Error::BadAnswer {
                url,
                status,
                detail: " which is not a sqltunnel answer (a proxy error page?): is the transport running and the URL right?".into(),
            },
        }
    }

    /// Sends a step's request; a resumable upload (`Outgoing::upload`) is sent from where the
    /// transport stands, and again from there after each `202` that says it holds less than
    /// the whole, until it answers otherwise. `probe`: where it stands is not known (the
    /// connection broke): an empty request asks first.
    pub(super) async fn send_step(
        &mut self,
        req: Outgoing<'_>,
        probe: bool,
    ) -> Result<Box<ResponseHead>, Error> {
        let Some(whole) = req.upload else {
            return self.send(req).await.map(|(head, _)| head);
        };
        let mut from = (!probe).then_some(0);
        let mut stalls = 0;
        loop {
            let head = self.send(Outgoing { upload_from: from, ..req }).await?.0;
            if head.status != 202 {
                return Ok(head);
            }
            let have = head.upload_have.and_then(|n| usize::try_from(n).ok());
            let Some(have) = have.filter(|&n| n < whole.len()) else {
                return Err(Error::BadAnswer {
                    url: self.endpoint.url.clone(),
                    status: head.status_line(),
                    detail: ": an upload's answer without a valid x-tunnel-upload-have".into(),
                });
            };
            self.steps.uploaded = self.steps.uploaded.max(have);
            stalls = if from == Some(have) { stalls + 1 } else { 0 };
            if stalls >= UPLOAD_STALLS {
                return Err(Error::NotResumed(format!(
                    "the transport took none of the upload past byte {have}"
                )));
            }
            from = Some(have);
        }
    }
}

/// True when stream `conn` runs its steps as `authorization`.
fn opened_as(conn: &Connection, authorization: &Arc<str>) -> bool {
    conn.opened_as().is_some_and(|a| Arc::ptr_eq(&a.0, authorization) || a.0 == *authorization)
}

/// Sends `step` and `body` on `conn`; a resumable upload's from `from` (`None`: an empty
/// probe), over a stream in parts of `part` bytes (the transport's), sent without waiting.
async fn dispatch(
    conn: &mut Connection,
    via: &Via<'_>,
    step: &StepHead,
    body: &[u8],
    (upload, part): (Option<Option<usize>>, usize),
) -> std::io::Result<Box<ResponseHead>> {
    match upload {
        None => conn.exchange(via, step, body).await,
        Some(from) => conn.upload(via, step, body, (from, part)).await,
    }
}

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
            tracing::debug!(session = %common::wire::session_label(pending.session()), from, uploaded = self.steps.uploaded, outcome = ?sent.as_ref().map(|h| h.status), "a step sent again");
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
