//! A request as either carrier brings it, read the same way by every endpoint: an HTTP
//! request's head and body, or a stream message, read in place (its head as
//! `common::wire::read_request` found it, its body a slice of it), without building an HTTP
//! request in between.

use std::ops::Range;
use std::sync::LazyLock;

use bytes::Bytes;
use common::wire::{
    DECODED_LENGTH_HEADER, HEADER_NAMES, HeaderAt, INFILE_HEADER, NameAt, RESUME_FROM_HEADER,
    STEP_HEADER, read_request,
};
use http::{HeaderMap, HeaderName, Request, Version};

use crate::Error;

/// An HTTP request's body, as hyper reads it (boxed: the tests make their own).
pub type RequestBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// A request of either carrier.
#[derive(Debug)]
pub struct Incoming {
    head: Head,
    body: Body,
}

/// Where a request's method, path and headers are.
#[derive(Debug)]
enum Head {
    /// An HTTP request's (its extensions carry hyper's upgrade). Boxed: a request moves
    /// through several layers of futures, and its parts are most of its size.
    Http(Box<http::request::Parts>),
    /// A stream message's, read in place.
    Message { data: Bytes, method: Range<usize>, path: Range<usize>, headers: Vec<HeaderAt> },
}

/// A request's body.
#[derive(Debug)]
pub enum Body {
    /// As it arrives (HTTP).
    Streamed(RequestBody),
    /// Here whole (a stream message's).
    Whole(Bytes),
}

/// A header a message names by number (one of `common::wire::HEADER_NAMES`), with its number
/// found once, when it is made, not at each request.
#[derive(Debug)]
pub struct Known {
    /// The name, as HTTP spells it.
    pub name: HeaderName,
    /// Its code in a message.
    code: usize,
}

impl Known {
    /// The known header `name` (lower case); a name that is not known does not compile.
    pub const fn new(name: &'static str) -> Self {
        let mut code = 0;
        while !same(HEADER_NAMES[code].as_bytes(), name.as_bytes()) {
            code += 1;
        }
        Self { name: HeaderName::from_static(name), code }
    }
}

/// Byte-for-byte equality, at compile time.
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `Authorization`.
pub static AUTHORIZATION: Known = Known::new("authorization");
/// `Accept-Encoding`.
pub static ACCEPT_ENCODING: Known = Known::new("accept-encoding");
/// `Content-Type`.
pub static CONTENT_TYPE: Known = Known::new("content-type");
/// `Content-Length`.
pub static CONTENT_LENGTH: Known = Known::new("content-length");
/// `Content-Encoding`.
pub static CONTENT_ENCODING: Known = Known::new("content-encoding");
/// The decoded length of a compressed body.
pub static DECODED_LENGTH: Known = Known::new(DECODED_LENGTH_HEADER);
/// A session request's step number.
pub static STEP: Known = Known::new(STEP_HEADER);
/// Where a step sent again resumes its answer.
pub static RESUME_FROM: Known = Known::new(RESUME_FROM_HEADER);
/// Whether a LOAD DATA LOCAL piece is the last.
pub static INFILE: Known = Known::new(INFILE_HEADER);

/// What a stream message's head has no room for (forwarding headers, `Connection`).
static NO_HEADERS: LazyLock<HeaderMap> = LazyLock::new(HeaderMap::new);

impl Incoming {
    /// An HTTP request.
    pub fn from_http(req: Request<RequestBody>) -> Self {
        let (parts, body) = req.into_parts();
        Self { head: Head::Http(Box::new(parts)), body: Body::Streamed(body) }
    }

    /// A stream message: its compact head and its body (the rest). A method, path, header
    /// name or value HTTP would not carry is refused, as is a Content-Length that is not the
    /// body's.
    pub fn from_message(data: Bytes, max_head: usize) -> Result<Self, Error> {
        let bad = |what: &str| Error::BadRequest(format!("a stream message {what}"));
        let at = read_request(&data).map_err(|e| bad(&format!("is not a request ({e})")))?;
        if at.body.start > max_head {
            return Err(bad(&format!("has a head over {} KiB", max_head / 1024)));
        }
        let method = &data[at.method.clone()];
        if method.is_empty() || !method.iter().all(|b| is_token(*b)) {
            return Err(bad("has a bad method"));
        }
        let path = &data[at.path.clone()];
        if path.first() != Some(&b'/') || !all_bytes(path, |b| b.is_ascii_graphic()) {
            return Err(bad("has a bad path"));
        }
        for (name, value) in &at.headers {
            if let NameAt::Spelled(name) = name
                && !data[name.clone()].iter().all(|b| is_token(*b))
            {
                return Err(bad("has a bad header name"));
            }
            if !all_bytes(&data[value.clone()], is_value_byte) {
                return Err(bad("has a bad header value"));
            }
        }
        let body = data.slice(at.body.clone());
        let head = Head::Message { data, method: at.method, path: at.path, headers: at.headers };
        let request = Self { head, body: Body::Whole(body) };
        let declared = request.header(&CONTENT_LENGTH);
        let length = |v: &[u8]| {
            let digits = !v.is_empty() && v.iter().all(u8::is_ascii_digit);
            digits.then(|| std::str::from_utf8(v).ok()?.parse::<usize>().ok()).flatten()
        };
        if declared.is_some_and(|v| length(v) != Some(request.body_len().unwrap_or(0))) {
            return Err(bad("has a body of another length than its Content-Length"));
        }
        Ok(request)
    }

    /// The method and path of a stream message, as they came: what it asks for, as bytes to
    /// compare (empty for an HTTP request).
    pub fn target(&self) -> &[u8] {
        match &self.head {
            Head::Http(_) => &[],
            Head::Message { data, method, path, .. } => &data[method.start..path.end],
        }
    }

    /// The method.
    pub fn method(&self) -> &str {
        match &self.head {
            Head::Http(parts) => parts.method.as_str(),
            Head::Message { data, method, .. } => text(&data[method.clone()]),
        }
    }

    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.path_and_query().split_once('?').map_or(self.path_and_query(), |(path, _)| path)
    }

    /// The query, if any.
    pub fn query(&self) -> Option<&str> {
        self.path_and_query().split_once('?').map(|(_, query)| query)
    }

    fn path_and_query(&self) -> &str {
        match &self.head {
            Head::Http(parts) => parts.uri.path_and_query().map_or("/", |p| p.as_str()),
            Head::Message { data, path, .. } => text(&data[path.clone()]),
        }
    }

    /// The value of the first header `header`.
    pub fn header(&self, header: &'static Known) -> Option<&[u8]> {
        self.headers(header).next()
    }

    /// The values of every header `header`, in order.
    pub fn headers(&self, header: &'static Known) -> impl Iterator<Item = &[u8]> {
        let (http, message) = match &self.head {
            Head::Http(parts) => (Some(parts.headers.get_all(&header.name).iter()), None),
            Head::Message { data, headers, .. } => {
                let named = |(at, _): &&HeaderAt| *at == NameAt::Known(header.code);
                let values = headers.iter().filter(named);
                (None, Some(values.map(|(_, value)| &data[value.clone()])))
            }
        };
        let http = http.into_iter().flatten().map(http::HeaderValue::as_bytes);
        http.chain(message.into_iter().flatten())
    }

    /// The HTTP headers (none for a stream message: what a proxy adds stays on the upgrade).
    pub fn http_headers(&self) -> &HeaderMap {
        match &self.head {
            Head::Http(parts) => &parts.headers,
            Head::Message { .. } => &NO_HEADERS,
        }
    }

    /// The HTTP version, when the request came as HTTP.
    pub fn http_version(&self) -> Option<Version> {
        match &self.head {
            Head::Http(parts) => Some(parts.version),
            Head::Message { .. } => None,
        }
    }

    /// The body's length, when known before it is read.
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

    /// The HTTP request again (`None` for a stream message), for what only HTTP does: an
    /// upgrade.
    pub fn into_http(self) -> Option<Request<RequestBody>> {
        match (self.head, self.body) {
            (Head::Http(parts), Body::Streamed(body)) => Some(Request::from_parts(*parts, body)),
            _ => None,
        }
    }
}

/// Bytes read as text: a method and a path were checked to be ASCII when the message was read.
fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// True when every byte passes `good`. (Without an early exit, so that the loop runs over
/// several bytes at a time: values are read whole anyway.)
fn all_bytes(bytes: &[u8], good: impl Fn(u8) -> bool) -> bool {
    bytes.iter().fold(true, |all, b| all & good(*b))
}

/// A byte of an HTTP token (a method, a header name).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A byte HTTP takes in a header value (as `http::HeaderValue` does).
fn is_value_byte(b: u8) -> bool {
    (b >= 0x20) & (b != 0x7f) | (b == b'\t')
}

#[cfg(test)]
#[path = "incoming_tests.rs"]
mod tests;
