//! What endpoints answer with: the boxed response of either carrier (JSON, frames, empty,
//! text), and the one place transport errors become HTTP answers.

use bytes::Bytes;
use common::wire::{FRAMES_CONTENT_TYPE, JSON_CONTENT_TYPE, SESSION_HEADER};
use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use serde::Serialize;
use tracing::warn;

use crate::Error;
use crate::body::ResponseBody;

/// A response of either carrier, boxed: it moves through several layers of futures and
/// results on its way out, 152 bytes at each move otherwise.
pub type Reply = Box<Response<ResponseBody>>;

/// A JSON answer.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Reply {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Box::new(Response::new(ResponseBody::from(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(JSON_CONTENT_TYPE));
    response
}

/// A frames answer; an opened session's names the session (a step's path already does).
pub fn frames(status: StatusCode, body: ResponseBody, session: Option<&str>) -> Reply {
    let mut response = Box::new(Response::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(FRAMES_CONTENT_TYPE));
    if let Some(v) = session.and_then(|id| HeaderValue::from_str(id).ok()) {
        // (A name made once, not parsed each answer.)
        static SESSION: HeaderName = HeaderName::from_static(SESSION_HEADER);
        response.headers_mut().insert(SESSION.clone(), v);
    }
    response
}

/// `204 No Content`.
pub fn no_content() -> Reply {
    let mut response = Box::new(Response::new(ResponseBody::from(Bytes::new())));
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
}

/// Prometheus text.
pub fn text(body: String, content_type: &'static str) -> Reply {
    let mut response = Box::new(Response::new(ResponseBody::from(Bytes::from(body))));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Marks an answer that is no answer: its connection is closed unanswered, so that the
/// sidecar sends the request again on a new one (a step of a session that moved).
#[derive(Debug, Clone, Copy)]
pub struct HangUp;

/// The no-answer of [`HangUp`].
pub fn hang_up() -> Reply {
    let mut response = no_content();
    response.extensions_mut().insert(HangUp);
    response
}

/// True when `response` is [`hang_up`]'s.
pub fn is_hang_up(response: &Response<ResponseBody>) -> bool {
    response.extensions().get::<HangUp>().is_some()
}

/// The one place transport errors become HTTP answers.
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

/// A duration as a header value in milliseconds.
pub fn millis(d: std::time::Duration) -> HeaderValue {
    HeaderValue::from(d.as_millis().min(u64::MAX.into()) as u64)
}
