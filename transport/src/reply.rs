//! What a step is answered with, whichever carrier takes it back: a typed [`AnswerHead`] and
//! the body (JSON, frames, empty, text); how the HTTP carrier writes it as a response; and the
//! one place transport errors become answers.

use bytes::Bytes;
use common::wire::{AnswerHead, Content};
use http::{HeaderName, HeaderValue, Response, StatusCode};
use serde::Serialize;
use tracing::warn;

use crate::Error;
use crate::body::ResponseBody;

/// A step's answer: its head (status, content, what the transport tells with it) and body.
#[derive(Debug)]
pub struct Answer {
    /// The head, as either carrier writes it.
    pub head: AnswerHead,
    /// The body.
    pub body: ResponseBody,
    /// What becomes of the connection it goes back on.
    pub then: Then,
}

/// What becomes of the connection an answer goes back on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Then {
    /// It carries more steps.
    #[default]
    Continue,
    /// It ends after this answer (a refused token: `Connection: close`, or the stream's end).
    Close,
    /// It ends unanswered, so that the sidecar sends the step again on a new one (a step of a
    /// session that moved).
    HangUp,
}

/// An answer, boxed: it moves through several layers of futures and results on its way out.
pub type Reply = Box<Answer>;

/// An answer with `status`, `content` and `body`.
pub fn answer(status: StatusCode, content: Content, body: ResponseBody) -> Reply {
    let head = AnswerHead { status: status.as_u16(), content, ..AnswerHead::default() };
    Box::new(Answer { head, body, then: Then::Continue })
}

/// A JSON answer.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Reply {
    let body = serde_json::to_vec(value).unwrap_or_default();
    answer(status, Content::Json, ResponseBody::from(Bytes::from(body)))
}

/// A frames answer; an opened session's names the session (a step's path already does).
pub fn frames(status: StatusCode, body: ResponseBody, session: Option<&str>) -> Reply {
    let mut reply = answer(status, Content::Frames, body);
    reply.head.session = session.map(Into::into);
    reply
}

/// `204 No Content`.
pub fn no_content() -> Reply {
    answer(StatusCode::NO_CONTENT, Content::None, ResponseBody::from(Bytes::new()))
}

/// Text of `content_type` (the metrics).
pub fn text(body: String, content_type: &'static str) -> Reply {
    answer(
        StatusCode::OK,
        Content::Other(content_type.into()),
        ResponseBody::from(Bytes::from(body)),
    )
}

/// No answer: the connection is closed unanswered (see [`Then::HangUp`]).
pub fn hang_up() -> Reply {
    let mut reply = no_content();
    reply.then = Then::HangUp;
    reply
}

/// The one place transport errors become answers.
pub fn error_response(err: &Error) -> Reply {
    if matches!(err, Error::SessionMoved) {
        return hang_up();
    }
    let (status, body) = err.to_api();
    if status.is_server_error() {
        warn!(error = %err, "request failed");
    }
    json(status, &body)
}

/// An answer as an HTTP response: its head's status and headers (`AnswerHead::to_http`), and
/// what only HTTP says: a streamed body passes nginx unbuffered (frames the sidecar must act
/// on at once: heartbeats, a file request), and a connection that ends says so. A hang-up is
/// no response: [`Error::SessionMoved`], which closes the connection.
pub fn http_response(answer: Reply) -> Result<Response<ResponseBody>, Error> {
    let Answer { head, body, then } = *answer;
    if then == Then::HangUp {
        return Err(Error::SessionMoved);
    }
    let streamed = !matches!(body, ResponseBody::Whole(_));
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(head.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    for (name, value) in head.to_http() {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    if streamed {
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    }
    if then == Then::Close {
        headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(response)
}
