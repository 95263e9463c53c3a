//! A request's head as HTTP/1.1 text, and a response's head as the sidecar reads it, from
//! either carrier.

use std::borrow::Cow;
use std::fmt::Write;

use common::wire::{
    ANSWER_CRC_HEADER, AnswerHead, Content, HEARTBEAT_HEADER, PIPELINE_HEADER,
    REQUEST_ENCODING_HEADER, RESUMED_FROM_HEADER, ResumeProof, SESSION_HEADER,
    SESSION_TIMEOUT_HEADER, UPLOAD_HAVE_HEADER, UPLOAD_HEADER, ZSTD,
};

/// A request's method, path and headers.
#[derive(Debug, Clone)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: &'a str,
    /// The base URL's path prefix (ends with `/`).
    pub prefix: &'a str,
    /// The path below the prefix.
    pub path: &'a str,
    /// The `Host` header (HTTP only: a stream was opened for one host).
    pub host: &'a str,
    /// The other headers, in order.
    pub headers: Vec<(&'a str, &'a str)>,
}

impl RequestHead<'_> {
    /// The head as HTTP/1.1 text, up to and without its last empty line (more header lines
    /// may follow).
    pub fn text_lines(&self, content_length: usize) -> String {
        let mut text = String::with_capacity(192 + self.path.len());
        for part in [self.method, " ", self.prefix, self.path, " HTTP/1.1\r\nHost: ", self.host] {
            text.push_str(part);
        }
        // Writing to a String cannot fail.
        let _ = write!(text, "\r\nContent-Length: {content_length}\r\n");
        for (name, value) in &self.headers {
            for part in [*name, ": ", *value, "\r\n"] {
                text.push_str(part);
            }
        }
        text
    }

    /// The whole head as HTTP/1.1 text.
    pub fn text(&self, content_length: usize) -> String {
        let mut text = self.text_lines(content_length);
        text.push_str("\r\n");
        text
    }
}

/// An answer's `Content-Type`: one of the protocol's own without a copy, any other copied.
pub(super) fn content_type(value: &str) -> std::borrow::Cow<'static, str> {
    let own = [common::wire::FRAMES_CONTENT_TYPE, common::wire::JSON_CONTENT_TYPE];
    own.into_iter()
        .find(|known| *known == value)
        .map_or_else(|| value.to_owned().into(), Into::into)
}

/// The response headers the sidecar reads (lower case).
const KNOWN: [&str; 13] = [
    "content-type",
    "content-encoding",
    SESSION_HEADER,
    SESSION_TIMEOUT_HEADER,
    HEARTBEAT_HEADER,
    REQUEST_ENCODING_HEADER,
    PIPELINE_HEADER,
    RESUMED_FROM_HEADER,
    ANSWER_CRC_HEADER,
    "sec-websocket-accept",
    "sec-websocket-protocol",
    UPLOAD_HEADER,
    UPLOAD_HAVE_HEADER,
];

/// The status line and headers of a response.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    /// Status code.
    pub status: u16,
    /// Reason phrase.
    pub reason: String,
    /// Content-Type, or empty (the protocol's own, not copied).
    pub content_type: Cow<'static, str>,
    /// Content-Encoding, or empty.
    pub content_encoding: String,
    /// The session id the transport named (`X-Tunnel-Session`), or empty.
    pub session: String,
    /// The transport's session timeout (`X-Tunnel-Session-Timeout-Ms`), if it said.
    pub session_timeout_ms: Option<u64>,
    /// The transport's heartbeat interval (`X-Tunnel-Heartbeat-Ms`), if it said.
    pub heartbeat_ms: Option<u64>,
    /// The transport takes zstd request bodies (`X-Tunnel-Request-Encoding`).
    pub takes_zstd: bool,
    /// How many commands with an answer a command request may carry (pipelined), if said.
    pub pipeline: Option<usize>,
    /// A resumed answer: the byte it starts at and the CRC of the bytes before.
    pub resumed: Option<ResumeProof>,
    /// An accepted upgrade's `Sec-WebSocket-Accept` and `Sec-WebSocket-Protocol`.
    pub upgrade: (String, String),
    /// A new session's: the largest part of an upload a stream message may carry (the
    /// transport takes resumable uploads, `common::wire::UploadRange`).
    pub upload_part: Option<usize>,
    /// An unfinished upload's `202`: the bytes of the body the transport holds.
    pub upload_have: Option<u64>,
}

impl ResponseHead {
    /// The head of an answer with `status` and `headers` (any carrier's: HTTP/1.1 text or a
    /// stream message), read in one pass; of a header given twice, the first counts. Boxed:
    /// it moves out through several layers of futures and results (250 bytes a move
    /// otherwise).
    pub(super) fn from_headers<'a>(
        status: u16,
        reason: &str,
        headers: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Box<Self> {
        let mut head = Box::new(Self {
            status,
            reason: reason.to_owned(),
            content_type: Cow::Borrowed(""),
            content_encoding: String::new(),
            session: String::new(),
            session_timeout_ms: None,
            heartbeat_ms: None,
            takes_zstd: false,
            pipeline: None,
            resumed: None,
            upgrade: (String::new(), String::new()),
            upload_part: None,
            upload_have: None,
        });
        // A bit for each name of KNOWN already read.
        let mut seen = 0u16;
        let (mut resumed_from, mut crc) = (None, None);
        for (name, value) in headers {
            // Names in any case; the length decides most comparisons.
            let is = |known: &str| known.len() == name.len() && known.eq_ignore_ascii_case(name);
            let Some(known) = KNOWN.iter().position(|known| is(known)) else { continue };
            if seen & (1 << known) != 0 {
                continue;
            }
            seen |= 1 << known;
            // By position in KNOWN (a match on the names would compare them again).
            match known {
                0 => head.content_type = content_type(value),
                1 => head.content_encoding = value.to_owned(),
                2 => head.session = value.to_owned(),
                3 => head.session_timeout_ms = value.parse().ok(),
                4 => head.heartbeat_ms = value.parse().ok(),
                5 => head.takes_zstd = value.split(',').any(|c| c.trim() == ZSTD),
                6 => head.pipeline = value.parse().ok(),
                7 => resumed_from = Some(value),
                8 => crc = Some(value),
                9 => head.upgrade.0 = value.to_owned(),
                10 => head.upgrade.1 = value.to_owned(),
                11 => head.upload_part = value.parse().ok(),
                _ => head.upload_have = value.parse().ok(),
            }
        }
        head.resumed = ResumeProof::parse(resumed_from, crc);
        head
    }

    /// The head of a stream's answer (no reason phrase: the status's own is said).
    pub(super) fn from_answer(answer: &AnswerHead) -> Box<Self> {
        let content_type = match &answer.content {
            Content::None => Cow::Borrowed(""),
            Content::Frames => Cow::Borrowed(common::wire::FRAMES_CONTENT_TYPE),
            Content::Json => Cow::Borrowed(common::wire::JSON_CONTENT_TYPE),
            Content::Other(other) => Cow::Owned(other.clone()),
        };
        let reason = http_reason(answer.status);
        Box::new(Self {
            status: answer.status,
            reason: reason.to_owned(),
            content_type,
            content_encoding: if answer.zstd { ZSTD.to_owned() } else { String::new() },
            session: answer.session.clone().unwrap_or_default(),
            session_timeout_ms: answer.session_timeout_ms,
            heartbeat_ms: answer.heartbeat_ms,
            takes_zstd: answer.takes_zstd,
            pipeline: answer.pipeline.and_then(|n| usize::try_from(n).ok()),
            resumed: answer.resumed,
            upgrade: (String::new(), String::new()),
            upload_part: answer.upload_part.and_then(|n| usize::try_from(n).ok()),
            upload_have: answer.upload_have,
        })
    }

    /// The status code and reason, as errors quote them (`502 Bad Gateway`).
    pub fn status_line(&self) -> String {
        format!("{} {}", self.status, self.reason)
    }
}

/// The reason phrase of a status, for a stream's answer (which carries none).
fn http_reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        413 => "Payload Too Large",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "",
    }
}
