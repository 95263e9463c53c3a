//! The session's control requests: opening a relayed session (its greeting read whole, and
//! tried again when its connection breaks), keep-alives, and closing a session as its client
//! ended it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::wire::{
    KeepAlive, KeepAliveAnswer, MAX_PIPELINED_COMMANDS, OpenRelay, SessionEnd, StepHead, StepKind,
};

use super::{
    FrameStream, MAX_CONTROL_BODY, MIN_SILENCE_LIMIT_MS, OPEN_PAUSE, Outgoing, SILENT_HEARTBEATS,
    TunnelConn,
};
use crate::Error;
use crate::error::Broken;
use crate::http::AnswerBody;

impl TunnelConn {
    async fn json<T: serde::de::DeserializeOwned>(
        &mut self,
        head: &StepHead,
        body: &[u8],
    ) -> Result<T, Error> {
        let url = self.endpoint.url.clone();
        let (_, conn) = self.send(Outgoing::control(head, body)).await?;
        let body = conn.body_to_end(MAX_CONTROL_BODY).await.map_err(Broken::ControlBody)?;
        serde_json::from_slice(&body).map_err(|e| Error::BadAnswer {
            url,
            status: "2xx".into(),
            detail: format!(" with a body that is not valid JSON ({e})"),
        })
    }

    /// Reports live sessions; answers with those the transport no longer has, at once if
    /// there are any, else as soon as one ends or after `wait`.
    pub async fn keep_alive(
        &mut self,
        sessions: Vec<String>,
        wait: Duration,
    ) -> Result<KeepAliveAnswer, Error> {
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let body = to_json(&KeepAlive { sessions, wait_ms });
        let head = self.step_head(StepKind::KeepAlive, None);
        self.json(&head, &body).await
    }

    /// Opens a relayed session: returns its id (empty when the upstream refused at once), the
    /// transport's session timeout, and the frames holding the upstream's greeting.
    pub async fn open_relay(
        &mut self,
        req: &OpenRelay,
    ) -> Result<(String, Option<Duration>, FrameStream<'_>), Error> {
        let body = to_json(req);
        let (head, mut pause) = (self.step_head(StepKind::Open, None), OPEN_PAUSE);
        let (head, greeting) = loop {
            // The greeting is small: read whole, so a connection that breaks inside it is
            // tried again (the session it opened expires unused on the transport).
            let opened = match self.send(Outgoing::control(&head, &body)).await {
                Ok((head, conn)) => match conn.body_to_end(MAX_CONTROL_BODY).await {
                    Ok(greeting) => Ok((head, greeting)),
                    Err(e) => Err(Error::ConnectionBroken {
                        url: self.endpoint.url.clone(),
                        reason: e.to_string(),
                    }),
                },
                Err(e) => Err(e),
            };
            match opened {
                Err(Error::ConnectionBroken { .. }) if pause < OPEN_PAUSE * 32 => {
                    self.http = None;
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                other => break other?,
            }
        };
        let session = head.session.clone();
        let timeout = head.session_timeout_ms.map(Duration::from_millis);
        if let Some(ms) = head.session_timeout_ms {
            self.endpoint.session_timeout_ms.store(ms, Ordering::Relaxed);
        }
        self.endpoint.takes_zstd.store(head.takes_zstd, Ordering::Relaxed);
        let pipeline = head.pipeline.unwrap_or(1).clamp(1, MAX_PIPELINED_COMMANDS);
        self.endpoint.pipeline.store(pipeline, Ordering::Relaxed);
        let part = head.upload_part.unwrap_or(0).min(common::wire::MAX_STREAM_BODY);
        self.endpoint.upload_part.store(part, Ordering::Relaxed);
        if let Some(heartbeat) = head.heartbeat_ms {
            let limit = heartbeat.saturating_mul(SILENT_HEARTBEATS).max(MIN_SILENCE_LIMIT_MS);
            self.endpoint.silence_limit_ms.store(limit, Ordering::Relaxed);
            if let Some(conn) = self.http.as_mut() {
                conn.set_silence_limit(Duration::from_millis(limit));
            }
        }
        let frames = self.frames_of(head, &greeting)?;
        Ok((session, timeout, frames))
    }

    /// Closes a session (COM_QUIT); a failure only means the transport will expire it.
    pub async fn close_session(&mut self, session: &str) {
        self.end_session(session, SessionEnd::Quit).await;
    }

    /// Closes the session on the transport as `end` says (a quit, a hang-up, a shutdown that
    /// kills a running statement first).
    pub async fn end_session(&mut self, session: &str, end: SessionEnd) {
        let head = self.step_head(StepKind::Close(end), Some(session));
        let result = match self.send(Outgoing::control(&head, b"")).await {
            Ok((_, conn)) => conn
                .body_to_end(MAX_CONTROL_BODY)
                .await
                .map(drop)
                .map_err(|e| Error::from(Broken::ControlBody(e))),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "closing the session failed");
        }
    }
}

/// A control request's JSON body. The protocol's requests hold only strings, numbers and
/// lists, which always serialize; an empty body (which the transport refuses) would stand for
/// a failure.
pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}
