//! A step as either carrier brings it: its typed head (`common::wire::StepHead`, read from a
//! stream message's first bytes or from an HTTP request's path and headers) and its body.

use bytes::Bytes;
use common::wire::StepHead;

/// An HTTP request's body, as hyper reads it (boxed: the tests make their own).
pub type RequestBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// A step, read.
#[derive(Debug)]
pub struct Step {
    /// What it asks.
    pub head: StepHead,
    /// Its body.
    pub body: Body,
}

/// A step's body.
#[derive(Debug)]
pub enum Body {
    /// As it arrives (HTTP).
    Streamed(RequestBody),
    /// Here whole (a stream message's).
    Whole(Bytes),
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
