//! A step, as either carrier brings it: its typed head (`common::wire::StepHead`, read from a
//! stream message's first bytes or from an HTTP request's path and headers) and its body. The
//! next step of a session runs once (it begins where its packets are about to go upstream),
//! and the last one sent again after a broken connection is answered from what was kept,
//! saying where it resumes and the digest of what came before.

use std::sync::Arc;

use bytes::Bytes;
use common::wire::{AnswerDigest, StepHead, session_label};
use http::StatusCode;
use tracing::debug;

use crate::Error;
use crate::reply::{Reply, frames, no_content};
use crate::reply::{ResponseBody, StreamedTurn};
use crate::resume::Resumed;
use crate::session::Session;

/// An HTTP request's body, as hyper reads it (boxed: the tests make their own).
pub type RequestBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// A step, read. (Its `Debug` shows the head and the body's length only: a body may hold a
/// password.)
pub struct Step {
    /// What it asks.
    pub head: StepHead,
    /// Its body.
    pub body: Body,
}

/// A step's body.
pub enum Body {
    /// As it arrives (HTTP).
    Streamed(RequestBody),
    /// Here whole (a stream message's).
    Whole(Bytes),
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = self.body_len().map_or_else(|| "streamed".into(), |n| format!("{n} bytes"));
        f.debug_struct("Step").field("head", &self.head).field("body", &body).finish()
    }
}

impl Step {
    /// The session it names (empty for a step of none).
    pub fn session(&self) -> &str {
        self.head.session.as_deref().unwrap_or_default()
    }

    /// The body's length, when known before it is read (an HTTP body's Content-Length).
    pub fn body_len(&self) -> Option<usize> {
        match &self.body {
            Body::Whole(body) => Some(body.len()),
            Body::Streamed(body) => {
                usize::try_from(hyper::body::Body::size_hint(body).exact()?).ok()
            }
        }
    }

    /// The body.
    pub fn into_body(self) -> Body {
        self.body
    }
}

/// What a request's step number asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepRequest {
    /// The next step: run it.
    Next(u64),
    /// The last step again, from this byte of its answer.
    Again {
        /// The step.
        step: u64,
        /// Bytes of its answer the sidecar already has.
        from: u64,
    },
}

/// The step a request names, if any: the next one, or the last one again (a resume).
pub fn step_request(req: &Step, session: &Session) -> Option<StepRequest> {
    let step = req.head.step?;
    Some(match req.head.resume_from {
        // Sent again, but it never began here: it runs now.
        Some(0) if step > session.resume.last_step() => StepRequest::Next(step),
        Some(from) => StepRequest::Again { step, from },
        None => StepRequest::Next(step),
    })
}

/// Step `step` begins, if the request named one.
pub fn begin(session: &Session, step: Option<u64>) -> Result<(), Error> {
    step.map_or(Ok(()), |step| session.resume.begin(step))
}

/// Keeps a whole answer of step `step` for a resume.
pub fn remember(session: &Session, step: Option<u64>, response: Reply) -> Reply {
    if step.is_some() {
        match &response.body {
            ResponseBody::Whole(bytes) => {
                let status = StatusCode::from_u16(response.head.status).unwrap_or(StatusCode::OK);
                session.resume.record_whole(status, bytes.as_ref().unwrap_or(&Bytes::new()));
            }
            ResponseBody::Turn(_) | ResponseBody::Zstd(_) => {}
        }
    }
    response
}

/// Step `step` again after a broken connection, from byte `from` of its answer.
pub async fn resume(session: &Arc<Session>, step: u64, from: u64) -> Result<Reply, Error> {
    let id = session.id.as_str();
    debug!(session = %session_label(id), step, from, "a step resumed");
    let resumed = match session.resume.resume(step, from) {
        // A step whose turn is being set up is resumed when it runs (the sidecar tries again);
        // one that nothing answers any more cannot be.
        Err(Error::SessionBusy) if !session.has_turn() => {
            return Err(Error::StepRefused(format!("step {step} has no answer to resume")));
        }
        other => other?,
    };
    Ok(match resumed {
        Resumed::Whole(StatusCode::NO_CONTENT, ..) => no_content(),
        Resumed::Whole(status, owner, from, before) => {
            let rest = StreamedTurn::resumed(session.resume.clone(), owner, from);
            resumed_from(frames(status, rest.into_body(), None), before)
        }
        Resumed::Streamed { owner, from, before } => {
            let streamed = StreamedTurn::resumed(session.resume.clone(), owner, from);
            resumed_from(frames(StatusCode::OK, streamed.into_body(), None), before)
        }
    })
}

/// A resumed answer states where it resumes and the digest of the bytes before, which the
/// sidecar checks against its own.
fn resumed_from(mut response: Reply, before: AnswerDigest) -> Reply {
    response.head.resumed = Some(before.proof());
    response
}
