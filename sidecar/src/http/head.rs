//! A request's head as HTTP/1.1 text, and a response's head as the sidecar reads it, from
//! either carrier.

use std::borrow::Cow;
use std::fmt::Write;

use common::wire::{AnswerHead, Content, ResumeProof, STREAM_VERSIONS_HEADER, ZSTD};

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

/// The status line and headers of a response.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    /// Status code.
    pub status: u16,
    /// Reason phrase (a stream's answer has none: its status's own is said).
    pub reason: Cow<'static, str>,
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
    /// A refused upgrade's: the stream versions the transport speaks
    /// (`common::wire::STREAM_VERSIONS_HEADER`), or empty.
    pub stream_versions: String,
}

impl ResponseHead {
    /// The head of an HTTP answer with `status` and `headers`, read in one pass: the
    /// protocol's own fields as `common::wire::AnswerHead::from_http` reads them (the one
    /// reader of those headers), and what only HTTP says beside them (the reason phrase, an
    /// upgrade's answer, any content encoding as it was named). Boxed: it moves out through
    /// several layers of futures and results (250 bytes a move otherwise).
    pub(super) fn from_headers<'a>(
        status: u16,
        reason: &str,
        headers: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Box<Self> {
        let (mut accept, mut protocol, mut encoding, mut versions) = (None, None, None, None);
        let headers = headers.inspect(|(name, value)| {
            let is = |known: &str| known.len() == name.len() && known.eq_ignore_ascii_case(name);
            if is("sec-websocket-accept") {
                accept.get_or_insert(*value);
            } else if is("sec-websocket-protocol") {
                protocol.get_or_insert(*value);
            } else if is("content-encoding") {
                encoding.get_or_insert(*value);
            } else if is(STREAM_VERSIONS_HEADER) {
                versions.get_or_insert(*value);
            }
        });
        let answer = AnswerHead::from_http(status, headers.map(|(n, v)| (n, v.as_bytes())));
        let mut head = Self::from_answer(&answer);
        head.reason = Cow::Owned(reason.to_owned());
        head.content_encoding = encoding.unwrap_or_default().to_owned();
        let owned = |v: Option<&str>| v.unwrap_or_default().to_owned();
        head.upgrade = (owned(accept), owned(protocol));
        head.stream_versions = owned(versions);
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
        // A stream's answer carries no reason phrase: the status's own is said.
        let status = http::StatusCode::from_u16(answer.status).ok();
        let reason = status.and_then(|s| s.canonical_reason()).unwrap_or_default();
        Box::new(Self {
            status: answer.status,
            reason: Cow::Borrowed(reason),
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
            stream_versions: String::new(),
        })
    }

    /// The status code and reason, as errors quote them (`502 Bad Gateway`).
    pub fn status_line(&self) -> String {
        format!("{} {}", self.status, self.reason)
    }
}
