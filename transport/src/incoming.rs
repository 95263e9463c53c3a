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
    Message(Box<MessageHead>),
}

/// Where a stream message's method, path and headers are in it.
#[derive(Debug)]
struct MessageHead {
    data: Bytes,
    method: Range<usize>,
    path: Range<usize>,
    headers: Vec<HeaderAt>,
    /// For each known header, where its first value is in `headers`, plus one (`0`: absent),
    /// so that an endpoint's look-up does not walk the list (a request has eight).
    first: [u8; HEADER_NAMES.len()],
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
/// Where a resumable upload's body lies in its step's whole body (`FROM/TOTAL`).
pub static UPLOAD: Known = Known::new(common::wire::UPLOAD_HEADER);
/// The CRC of the bytes before an upload's `FROM`.
pub static UPLOAD_CRC: Known = Known::new(common::wire::ANSWER_CRC_HEADER);

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
        if path.first() != Some(&b'/') || !scan::all_graphic(path) {
            return Err(bad("has a bad path"));
        }
        let mut first = [0; HEADER_NAMES.len()];
        for (i, (name, value)) in at.headers.iter().enumerate() {
            match name {
                NameAt::Spelled(name) if !data[name.clone()].iter().all(|b| is_token(*b)) => {
                    return Err(bad("has a bad header name"));
                }
                NameAt::Spelled(_) => {}
                // A message has at most 255 headers (its count is a byte).
                NameAt::Known(code) if first[*code] == 0 => first[*code] = (i + 1) as u8,
                NameAt::Known(_) => {}
            }
            if !scan::all_value_bytes(&data[value.clone()]) {
                return Err(bad("has a bad header value"));
            }
        }
        let body = data.slice(at.body.clone());
        let (method, path, headers) = (at.method, at.path, at.headers);
        let head = Head::Message(Box::new(MessageHead { data, method, path, headers, first }));
        let request = Self { head, body: Body::Whole(body) };
        let declared = request.header(&CONTENT_LENGTH);
        let length = |v: &[u8]| v.iter().all(u8::is_ascii_digit).then(|| number(v)).flatten();
        let body_len = request.body_len().unwrap_or(0) as u64;
        if declared.is_some_and(|v| length(v) != Some(body_len)) {
            return Err(bad("has a body of another length than its Content-Length"));
        }
        Ok(request)
    }

    /// The method and path of a stream message, as they came: what it asks for, as bytes to
    /// compare (empty for an HTTP request).
    pub fn target(&self) -> &[u8] {
        match &self.head {
            Head::Http(_) => &[],
            Head::Message(m) => &m.data[m.method.start..m.path.end],
        }
    }

    /// The method.
    pub fn method(&self) -> &str {
        match &self.head {
            Head::Http(parts) => parts.method.as_str(),
            Head::Message(m) => text(&m.data[m.method.clone()]),
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
            Head::Message(m) => text(&m.data[m.path.clone()]),
        }
    }

    /// The value of the first header `header`.
    pub fn header(&self, header: &'static Known) -> Option<&[u8]> {
        match &self.head {
            Head::Http(parts) => parts.headers.get(&header.name).map(http::HeaderValue::as_bytes),
            Head::Message(m) => {
                let at = usize::from(m.first[header.code]).checked_sub(1)?;
                Some(&m.data[m.headers[at].1.clone()])
            }
        }
    }

    /// The values of every header `header`, in order.
    pub fn headers(&self, header: &'static Known) -> impl Iterator<Item = &[u8]> {
        let (http, message) = match &self.head {
            Head::Http(parts) => (Some(parts.headers.get_all(&header.name).iter()), None),
            Head::Message(m) => {
                let named = |(at, _): &&HeaderAt| *at == NameAt::Known(header.code);
                // From the first: none when there is none.
                let from =
                    usize::from(m.first[header.code]).checked_sub(1).unwrap_or(m.headers.len());
                let values = m.headers[from..].iter().filter(named);
                (None, Some(values.map(|(_, value)| &m.data[value.clone()])))
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

/// A header's number (a step, a length, an offset) as `str::parse::<u64>` reads it: digits,
/// after an optional `+`, that fit in a `u64`; without checking the bytes for UTF-8 first.
pub fn number(value: &[u8]) -> Option<u64> {
    let digits = value.strip_prefix(b"+").unwrap_or(value);
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, b| {
        let digit = b.wrapping_sub(b'0');
        (digit < 10).then_some(())?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A byte of an HTTP token (a method, a header name).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A byte HTTP takes in a header value (as `http::HeaderValue` does).
fn is_value_byte(b: u8) -> bool {
    (b >= 0x20) & (b != 0x7f) | (b == b'\t')
}

/// Checks of a message's bytes, eight at a time: a head is checked whole for every request.
mod scan {
    /// Each byte of a word, set to `b`.
    const fn each(b: u8) -> u64 {
        u64::from_ne_bytes([b; 8])
    }

    /// True when `word` has a byte below `n` (`n` at most 128; exact).
    fn has_below(word: u64, n: u8) -> bool {
        word.wrapping_sub(each(n)) & !word & each(0x80) != 0
    }

    /// True when `word` has a byte above `n` (`n` below 128; exact).
    fn has_above(word: u64, n: u8) -> bool {
        (word.wrapping_add(each(127 - n)) | word) & each(0x80) != 0
    }

    /// True when `word` has a byte equal to `b`.
    fn has_byte(word: u64, b: u8) -> bool {
        has_below(word ^ each(b), 1)
    }

    /// True when every word of `bytes` passes `good`, or, for a word that does not, each of
    /// its bytes passes `good_byte`. The last word is the last eight bytes (overlapping the
    /// word before); fewer than eight are checked one by one.
    fn all(bytes: &[u8], good: impl Fn(u64) -> bool, good_byte: impl Fn(u8) -> bool) -> bool {
        let passes = |w: &[u8]| {
            let word = u64::from_ne_bytes(w.try_into().unwrap_or_default());
            good(word) || w.iter().all(|b| good_byte(*b))
        };
        match bytes.len().checked_sub(8) {
            None => bytes.iter().all(|b| good_byte(*b)),
            Some(last) => bytes.chunks_exact(8).all(passes) && passes(&bytes[last..]),
        }
    }

    /// True when every byte is visible ASCII (`u8::is_ascii_graphic`): a path's.
    pub(super) fn all_graphic(bytes: &[u8]) -> bool {
        all(bytes, |w| !has_below(w, 0x21) && !has_above(w, 0x7e), |b| b.is_ascii_graphic())
    }

    /// True when every byte may be in an HTTP header value (`super::is_value_byte`).
    pub(super) fn all_value_bytes(bytes: &[u8]) -> bool {
        let good = |w| !has_below(w, 0x20) && !has_byte(w, 0x7f);
        all(bytes, good, super::is_value_byte)
    }
}

#[cfg(test)]
#[path = "incoming_tests.rs"]
mod tests;
