//! A step's answer head, typed: its status, what its body is, and what the transport tells
//! with it (the session it opened and that session's terms, where a resumed answer starts, how
//! much of an upload it holds). Over a stream it is a few bytes before the body
//! ([`AnswerHead::encode`], [`AnswerHead::decode`]); over HTTP, the status and headers
//! ([`AnswerHead::to_http`], [`AnswerHead::from_http`]). Nothing here does I/O.
//!
//! A message head is a flags `u16` (big-endian), the status (`u16`), the content kind (`u8`:
//! none, frames, JSON, or another type spelled out with a `u8` length), then the fields the
//! flags name, in this order: the session id (`u8` length), the resume offset (LEB128) and
//! the CRC-32 before it (4 bytes), the bytes of an upload held, the session timeout, the
//! heartbeat interval, the pipeline depth, the upload part (each LEB128).

use super::digest::{ANSWER_CRC_HEADER, RESUMED_FROM_HEADER, ResumeProof};
use super::fields::{Reader, put_varint};
use super::upload::{UPLOAD_HAVE_HEADER, UPLOAD_HEADER};
use super::{
    FRAMES_CONTENT_TYPE, HEARTBEAT_HEADER, JSON_CONTENT_TYPE, PIPELINE_HEADER,
    REQUEST_ENCODING_HEADER, SESSION_HEADER, SESSION_TIMEOUT_HEADER, ZSTD, header_number,
};
use crate::Error;

/// What an answer's body is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Content {
    /// No content type.
    #[default]
    None,
    /// Frames (`application/vnd.sqltunnel.frames`).
    Frames,
    /// A JSON document (an error, a control answer).
    Json,
    /// Another type, as spelled.
    Other(String),
}

/// An answer's head, as either carrier brings it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AnswerHead {
    /// The status code.
    pub status: u16,
    /// Over a stream: the body goes on in the messages that follow, up to an empty one.
    pub more: bool,
    /// What the body is.
    pub content: Content,
    /// The body is zstd.
    pub zstd: bool,
    /// The session the step opened.
    pub session: Option<String>,
    /// A resumed answer: where it starts, and the CRC-32 of the bytes before.
    pub resumed: Option<ResumeProof>,
    /// An unfinished upload's `202`: the bytes of its body the transport holds.
    pub upload_have: Option<u64>,
    /// An opened session's: the transport's session timeout (ms).
    pub session_timeout_ms: Option<u64>,
    /// An opened session's: the heartbeat interval (ms).
    pub heartbeat_ms: Option<u64>,
    /// An opened session's: how many commands with an answer a command step may carry.
    pub pipeline: Option<u64>,
    /// An opened session's: the largest part of an upload a stream message may carry.
    pub upload_part: Option<u64>,
    /// An opened session's: the transport takes zstd request bodies.
    pub takes_zstd: bool,
}

const MORE: u16 = 1;
const ZSTD_BODY: u16 = 1 << 1;
const HAS_SESSION: u16 = 1 << 2;
const HAS_RESUMED: u16 = 1 << 3;
const HAS_UPLOAD_HAVE: u16 = 1 << 4;
const HAS_SESSION_TIMEOUT: u16 = 1 << 5;
const HAS_HEARTBEAT: u16 = 1 << 6;
const HAS_PIPELINE: u16 = 1 << 7;
const HAS_UPLOAD_PART: u16 = 1 << 8;
const TAKES_ZSTD: u16 = 1 << 9;
const ALL_FLAGS: u16 = (1 << 10) - 1;

/// The headers an answer's fields come from over HTTP, by their number in `from_http`.
const HTTP_NAMES: [&str; 11] = [
    "content-type",
    "content-encoding",
    SESSION_HEADER,
    RESUMED_FROM_HEADER,
    ANSWER_CRC_HEADER,
    UPLOAD_HAVE_HEADER,
    SESSION_TIMEOUT_HEADER,
    HEARTBEAT_HEADER,
    PIPELINE_HEADER,
    UPLOAD_HEADER,
    REQUEST_ENCODING_HEADER,
];

impl AnswerHead {
    /// Appends the message head to `out` (the body follows it).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let numbers = [
            (self.upload_have, HAS_UPLOAD_HAVE),
            (self.session_timeout_ms, HAS_SESSION_TIMEOUT),
            (self.heartbeat_ms, HAS_HEARTBEAT),
            (self.pipeline, HAS_PIPELINE),
            (self.upload_part, HAS_UPLOAD_PART),
        ];
        let flag = |on: bool, bit: u16| if on { bit } else { 0 };
        let mut flags = flag(self.more, MORE)
            | flag(self.zstd, ZSTD_BODY)
            | flag(self.session.is_some(), HAS_SESSION)
            | flag(self.resumed.is_some(), HAS_RESUMED)
            | flag(self.takes_zstd, TAKES_ZSTD);
        flags |= numbers.iter().fold(0, |f, (n, bit)| f | flag(n.is_some(), *bit));
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&self.status.to_be_bytes());
        match &self.content {
            Content::None => out.push(0),
            Content::Frames => out.push(1),
            Content::Json => out.push(2),
            Content::Other(kind) => {
                let kind = &kind.as_bytes()[..kind.len().min(255)];
                out.extend_from_slice(&[3, kind.len() as u8]);
                out.extend_from_slice(kind);
            }
        }
        if let Some(id) = &self.session {
            let id = &id.as_bytes()[..id.len().min(255)];
            out.push(id.len() as u8);
            out.extend_from_slice(id);
        }
        if let Some(proof) = self.resumed {
            put_varint(out, proof.from);
            out.extend_from_slice(&proof.crc.to_be_bytes());
        }
        numbers.iter().filter_map(|(n, _)| *n).for_each(|n| put_varint(out, n));
    }

    /// Reads a message head; returns it and where the body begins.
    pub fn decode(message: &[u8]) -> Result<(Self, usize), Error> {
        let mut at = Reader::new(message);
        let flags = u16::from_be_bytes([at.byte()?, at.byte()?]);
        if flags & !ALL_FLAGS != 0 {
            return Err(Error::Wire("an unknown answer flag"));
        }
        let status = u16::from_be_bytes([at.byte()?, at.byte()?]);
        if !(100..1000).contains(&status) {
            return Err(Error::Wire("a status out of range"));
        }
        let content = match at.byte()? {
            0 => Content::None,
            1 => Content::Frames,
            2 => Content::Json,
            3 => {
                let len = usize::from(at.byte()?);
                Content::Other(String::from_utf8_lossy(at.take(len)?).into_owned())
            }
            _ => return Err(Error::Wire("an unknown content kind")),
        };
        let mut head = AnswerHead { status, content, ..AnswerHead::default() };
        head.more = flags & MORE != 0;
        head.zstd = flags & ZSTD_BODY != 0;
        head.takes_zstd = flags & TAKES_ZSTD != 0;
        if flags & HAS_SESSION != 0 {
            let len = usize::from(at.byte()?);
            let id =
                std::str::from_utf8(at.take(len)?).ok().filter(|id| super::route::valid_id(id));
            let Some(id) = id else { return Err(Error::Wire("an answer's session id is not one")) };
            head.session = Some(id.into());
        }
        if flags & HAS_RESUMED != 0 {
            let from = at.varint()?;
            head.resumed = Some(ResumeProof { from, crc: at.u32_be()? });
        }
        let mut number = |bit: u16| (flags & bit != 0).then(|| at.varint()).transpose();
        head.upload_have = number(HAS_UPLOAD_HAVE)?;
        head.session_timeout_ms = number(HAS_SESSION_TIMEOUT)?;
        head.heartbeat_ms = number(HAS_HEARTBEAT)?;
        head.pipeline = number(HAS_PIPELINE)?;
        head.upload_part = number(HAS_UPLOAD_PART)?;
        Ok((head, at.at()))
    }

    /// The headers of the answer over HTTP (lower case; the status is the response's).
    pub fn to_http(&self) -> Vec<(&'static str, String)> {
        let mut headers = Vec::new();
        match &self.content {
            Content::None => {}
            Content::Frames => headers.push(("content-type", FRAMES_CONTENT_TYPE.to_owned())),
            Content::Json => headers.push(("content-type", JSON_CONTENT_TYPE.to_owned())),
            Content::Other(kind) => headers.push(("content-type", kind.clone())),
        }
        if self.zstd {
            headers.push(("content-encoding", ZSTD.to_owned()));
        }
        if let Some(id) = &self.session {
            headers.push((SESSION_HEADER, id.clone()));
        }
        if let Some(proof) = self.resumed {
            headers.push((RESUMED_FROM_HEADER, proof.from.to_string()));
            headers.push((ANSWER_CRC_HEADER, proof.crc_header()));
        }
        let numbers = [
            (UPLOAD_HAVE_HEADER, self.upload_have),
            (SESSION_TIMEOUT_HEADER, self.session_timeout_ms),
            (HEARTBEAT_HEADER, self.heartbeat_ms),
            (PIPELINE_HEADER, self.pipeline),
            (UPLOAD_HEADER, self.upload_part),
        ];
        headers.extend(numbers.into_iter().filter_map(|(name, n)| Some((name, n?.to_string()))));
        if self.takes_zstd {
            headers.push((REQUEST_ENCODING_HEADER, ZSTD.to_owned()));
        }
        headers
    }

    /// The head of an HTTP answer with `status`, from its headers (names in any case), read in
    /// one pass; of a header given twice, the first counts.
    /// A value that does not read is left out.
    pub fn from_http<'a>(
        status: u16,
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Self {
        let mut head = AnswerHead { status, ..AnswerHead::default() };
        let (mut resumed_from, mut crc) = (None, None);
        let mut seen = 0u16;
        for (name, value) in headers {
            // Names in any case (a proxy may change it); the length decides most comparisons.
            let is = |known: &str| known.len() == name.len() && known.eq_ignore_ascii_case(name);
            let Some(field) = HTTP_NAMES.iter().position(|known| is(known)) else { continue };
            if seen & (1 << field) != 0 {
                continue;
            }
            seen |= 1 << field;
            let text = std::str::from_utf8(value).ok().map(str::trim);
            let number = header_number(value);
            match field {
                0 => {
                    head.content = match text {
                        None | Some("") => Content::None,
                        Some(FRAMES_CONTENT_TYPE) => Content::Frames,
                        Some(JSON_CONTENT_TYPE) => Content::Json,
                        Some(other) => Content::Other(other.to_owned()),
                    }
                }
                1 => head.zstd = text == Some(ZSTD),
                2 => head.session = text.filter(|id| super::route::valid_id(id)).map(Into::into),
                3 => resumed_from = text,
                4 => crc = text,
                5 => head.upload_have = number,
                6 => head.session_timeout_ms = number,
                7 => head.heartbeat_ms = number,
                8 => head.pipeline = number,
                9 => head.upload_part = number,
                _ => head.takes_zstd = text.is_some_and(|v| v.split(',').any(|c| c.trim() == ZSTD)),
            }
        }
        head.resumed = ResumeProof::parse(resumed_from, crc);
        head
    }
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
