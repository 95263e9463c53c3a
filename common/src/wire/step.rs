//! A step, typed: what a sidecar asks of a session (open one, log in, run commands, send a
//! file piece, close it, keep sessions alive), with its number, where its answer resumes, how
//! its body is encoded and where an upload's body lies. Both carriers carry the same
//! [`StepHead`]: a stream message as a few bytes before the body ([`StepHead::encode`],
//! [`StepHead::decode`]), an HTTP request as a path and headers ([`StepHead::to_http`],
//! [`StepHead::from_http`]). Nothing here does I/O.
//!
//! A message head is a kind byte, a flags byte, then the fields the flags name, in this
//! order: the session id (`u8` length, ASCII letters and digits), the step number, the resume
//! offset, the decoded length of a zstd body, an upload's `FROM` and `TOTAL` (each an
//! unsigned LEB128 of at most 10 bytes) and the CRC-32 before `FROM` (4 bytes, big-endian).
//! The body is the rest of the message.

use super::digest::ANSWER_CRC_HEADER;
use super::fields::{Reader, put_varint};
use super::route::{Route, SessionEnd, valid_id};
use super::upload::{UPLOAD_HEADER, UploadRange};
use super::{
    DECODED_LENGTH_HEADER, INFILE_HEADER, JSON_CONTENT_TYPE, PACKETS_CONTENT_TYPE,
    RESUME_FROM_HEADER, STEP_HEADER, ZSTD,
};
use crate::Error;

/// What a step asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// Open a relayed session (a JSON `OpenRelay` body); answered with the greeting.
    Open,
    /// Report live sessions (a JSON `KeepAlive` body).
    KeepAlive,
    /// A login packet's payload.
    Login,
    /// A login the transport makes itself (a JSON `LoginAs` body).
    LoginAs,
    /// The client's packets of one command or several it pipelined.
    Command,
    /// Packets of a LOAD DATA LOCAL file; `last` when the file ends with them.
    FilePiece {
        /// The file ends here.
        last: bool,
    },
    /// End the session as said.
    Close(SessionEnd),
}

impl StepKind {
    /// True for a kind that names its session.
    pub fn in_session(self) -> bool {
        !matches!(self, StepKind::Open | StepKind::KeepAlive)
    }

    /// Its code in a message head.
    fn code(self) -> u8 {
        match self {
            StepKind::Open => 1,
            StepKind::KeepAlive => 2,
            StepKind::Login => 3,
            StepKind::LoginAs => 4,
            StepKind::Command => 5,
            StepKind::FilePiece { last: false } => 6,
            StepKind::FilePiece { last: true } => 7,
            StepKind::Close(SessionEnd::Quit) => 8,
            StepKind::Close(SessionEnd::HangUp) => 9,
            StepKind::Close(SessionEnd::KillQuery) => 10,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => StepKind::Open,
            2 => StepKind::KeepAlive,
            3 => StepKind::Login,
            4 => StepKind::LoginAs,
            5 => StepKind::Command,
            6 => StepKind::FilePiece { last: false },
            7 => StepKind::FilePiece { last: true },
            8 => StepKind::Close(SessionEnd::Quit),
            9 => StepKind::Close(SessionEnd::HangUp),
            10 => StepKind::Close(SessionEnd::KillQuery),
            _ => return None,
        })
    }

    /// The content type of its body over HTTP.
    pub fn content_type(self) -> &'static str {
        match self {
            StepKind::Login | StepKind::Command | StepKind::FilePiece { .. } => {
                PACKETS_CONTENT_TYPE
            }
            _ => JSON_CONTENT_TYPE,
        }
    }
}

/// How a step's body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyEncoding {
    /// As it is.
    #[default]
    Plain,
    /// zstd, with the length it decodes to (which bounds its decoding).
    Zstd {
        /// The decoded length.
        decoded: u64,
    },
}

/// Where a resumable upload's request lies in its step's whole body, and the proof that it
/// continues what the transport holds (see `upload.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadAt {
    /// Its range.
    pub range: UploadRange,
    /// The CRC-32 of the whole body's bytes before `range.from`, when stated (an upload from
    /// a byte past 0 that states none, or another, continues nothing the transport holds).
    pub crc: Option<u32>,
}

/// A step, as either carrier brings it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepHead {
    /// What it asks.
    pub kind: StepKind,
    /// Its session (every kind but `Open` and `KeepAlive` has one).
    pub session: Option<String>,
    /// Its number in the session (1, 2, … after the open); a step runs once.
    pub step: Option<u64>,
    /// Sent again after a broken connection: the bytes of its answer the sidecar has.
    pub resume_from: Option<u64>,
    /// How its body is encoded.
    pub encoding: BodyEncoding,
    /// A resumable upload's part.
    pub upload: Option<UploadAt>,
    /// The sidecar takes zstd answers.
    pub accept_zstd: bool,
}

/// A step as an HTTP request: method, path below the base URL, and its own headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpStep {
    /// The method.
    pub method: &'static str,
    /// The path below the base URL, query included.
    pub path: String,
    /// The headers the step needs (`Content-Type` included), lower case.
    pub headers: Vec<(&'static str, String)>,
}

const HAS_SESSION: u8 = 1;
const HAS_STEP: u8 = 2;
const HAS_RESUME: u8 = 4;
const ZSTD_BODY: u8 = 8;
const HAS_UPLOAD: u8 = 16;
const ACCEPTS_ZSTD: u8 = 32;
const HAS_UPLOAD_CRC: u8 = 64;
const ALL_FLAGS: u8 = 127;

impl StepHead {
    /// A step of `kind`, without a session or number.
    pub fn new(kind: StepKind) -> Self {
        Self {
            kind,
            session: None,
            step: None,
            resume_from: None,
            encoding: BodyEncoding::Plain,
            upload: None,
            accept_zstd: false,
        }
    }

    /// Appends the message head to `out` (the body follows it).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        let zstd = matches!(self.encoding, BodyEncoding::Zstd { .. });
        let flags = flag(self.session.is_some(), HAS_SESSION)
            | flag(self.step.is_some(), HAS_STEP)
            | flag(self.resume_from.is_some(), HAS_RESUME)
            | flag(zstd, ZSTD_BODY)
            | flag(self.upload.is_some(), HAS_UPLOAD)
            | flag(self.accept_zstd, ACCEPTS_ZSTD)
            | flag(self.upload.is_some_and(|u| u.crc.is_some()), HAS_UPLOAD_CRC);
        out.extend_from_slice(&[self.kind.code(), flags]);
        if let Some(id) = &self.session {
            // A session id is at most 64 bytes (checked where it is made and read).
            out.push(id.len().min(255) as u8);
            out.extend_from_slice(&id.as_bytes()[..id.len().min(255)]);
        }
        for n in [self.step, self.resume_from] {
            n.into_iter().for_each(|n| put_varint(out, n));
        }
        if let BodyEncoding::Zstd { decoded } = self.encoding {
            put_varint(out, decoded);
        }
        if let Some(upload) = self.upload {
            put_varint(out, upload.range.from);
            put_varint(out, upload.range.total);
            if let Some(crc) = upload.crc {
                out.extend_from_slice(&crc.to_be_bytes());
            }
        }
    }

    /// Reads a message head; returns it and where the body begins. A head that ends early,
    /// has an unknown kind or flag, a bad session id, or contradicts itself is refused.
    pub fn decode(message: &[u8]) -> Result<(Self, usize), Error> {
        let mut at = Reader::new(message);
        let kind = at.byte()?;
        let Some(kind) = StepKind::from_code(kind) else {
            return Err(Error::Wire("an unknown step kind"));
        };
        let flags = at.byte()?;
        if flags & !ALL_FLAGS != 0 {
            return Err(Error::Wire("an unknown step flag"));
        }
        let session = match flags & HAS_SESSION {
            0 => None,
            _ => {
                let len = usize::from(at.byte()?);
                // Checked as UTF-8 where it is copied to: from an aligned start, a word at a time.
                let id = String::from_utf8(at.take(len)?.to_vec()).ok().filter(|id| valid_id(id));
                let Some(id) = id else {
                    return Err(Error::Wire("a step's session id is not one"));
                };
                Some(id)
            }
        };
        let mut head = StepHead::new(kind);
        head.session = session;
        if flags & HAS_STEP != 0 {
            head.step = Some(at.varint()?);
        }
        if flags & HAS_RESUME != 0 {
            head.resume_from = Some(at.varint()?);
        }
        if flags & ZSTD_BODY != 0 {
            head.encoding = BodyEncoding::Zstd { decoded: at.varint()? };
        }
        if flags & HAS_UPLOAD != 0 {
            let range = UploadRange { from: at.varint()?, total: at.varint()? };
            let crc = if flags & HAS_UPLOAD_CRC != 0 { Some(at.u32_be()?) } else { None };
            head.upload = Some(UploadAt { range, crc });
        } else if flags & HAS_UPLOAD_CRC != 0 {
            return Err(Error::Wire("a step message contradicts itself"));
        }
        head.accept_zstd = flags & ACCEPTS_ZSTD != 0;
        head.check().map_err(|e| match e {
            Error::BadStep(_) => Error::Wire("a step message contradicts itself"),
            e => e,
        })?;
        Ok((head, at.at()))
    }

    /// The checks every step passes, whichever carrier brought it.
    fn check(&self) -> Result<(), Error> {
        let bad = |what: &str| Err(Error::BadStep(what.to_owned()));
        if self.kind.in_session() != self.session.is_some() {
            return bad("a step names a session if and only if it is in one");
        }
        if (self.resume_from.is_some() || self.upload.is_some()) && self.step.is_none() {
            return bad("a resumed step or an upload needs a step number");
        }
        if self.upload.is_some_and(|u| u.range.from > u.range.total) {
            return bad("an upload's FROM is past its TOTAL");
        }
        Ok(())
    }

    /// The step as an HTTP request.
    pub fn to_http(&self) -> HttpStep {
        let id = self.session.clone().unwrap_or_default();
        let (route, query) = match self.kind {
            StepKind::Open => (Route::OpenRelay, ""),
            StepKind::KeepAlive => (Route::KeepAlive, ""),
            StepKind::Login | StepKind::LoginAs => (Route::Login(id), ""),
            StepKind::Command => (Route::Command(id), ""),
            StepKind::FilePiece { .. } => (Route::Infile(id), ""),
            StepKind::Close(end) => (Route::CloseSession(id), end.query()),
        };
        let (method, path) = route.request().unwrap_or(("POST", String::new()));
        let mut headers = vec![("content-type", self.kind.content_type().to_owned())];
        if let StepKind::FilePiece { last } = self.kind {
            headers.push((INFILE_HEADER, if last { "end" } else { "more" }.to_owned()));
        }
        let numbers = [(STEP_HEADER, self.step), (RESUME_FROM_HEADER, self.resume_from)];
        headers.extend(numbers.into_iter().filter_map(|(name, n)| Some((name, n?.to_string()))));
        if let BodyEncoding::Zstd { decoded } = self.encoding {
            headers.push(("content-encoding", ZSTD.to_owned()));
            headers.push((DECODED_LENGTH_HEADER, decoded.to_string()));
        }
        if let Some(upload) = self.upload {
            headers.push((UPLOAD_HEADER, upload.range.header()));
            if let Some(crc) = upload.crc {
                headers.push((ANSWER_CRC_HEADER, format!("{crc:08x}")));
            }
        }
        if self.accept_zstd {
            headers.push(("accept-encoding", ZSTD.to_owned()));
        }
        HttpStep { method, path: path + query, headers }
    }

    /// The step an HTTP request to `route` asks, from its query and headers (`values` gives
    /// every value of a header, in order, by its lower-case name; of most, the first counts);
    /// `None` for a route that is no step.
    pub fn from_http<'a, V: Iterator<Item = &'a [u8]>>(
        route: &Route,
        query: Option<&str>,
        values: impl Fn(&'static str) -> V,
    ) -> Result<Option<Self>, Error> {
        let header = |name| values(name).next();
        let json = header("content-type") == Some(JSON_CONTENT_TYPE.as_bytes());
        let (kind, session) = match route {
            Route::OpenRelay => (StepKind::Open, None),
            Route::KeepAlive => (StepKind::KeepAlive, None),
            Route::Login(id) if json => (StepKind::LoginAs, Some(id)),
            Route::Login(id) => (StepKind::Login, Some(id)),
            Route::Command(id) => (StepKind::Command, Some(id)),
            Route::Infile(id) => {
                let last = match header(INFILE_HEADER) {
                    Some(b"end") => true,
                    Some(b"more") => false,
                    _ => return Err(bad_header(INFILE_HEADER, "must be `more` or `end`")),
                };
                (StepKind::FilePiece { last }, Some(id))
            }
            Route::CloseSession(id) => (StepKind::Close(SessionEnd::from_query(query)), Some(id)),
            _ => return Ok(None),
        };
        let number = |name: &'static str| -> Result<Option<u64>, Error> {
            header(name)
                .map(|v| header_number(v).ok_or_else(|| bad_header(name, "must be a number")))
                .transpose()
        };
        let mut head = StepHead::new(kind);
        head.session = session.cloned();
        head.step = number(STEP_HEADER)?;
        head.resume_from = number(RESUME_FROM_HEADER)?;
        head.encoding = match header("content-encoding") {
            None => BodyEncoding::Plain,
            Some(v) if v == ZSTD.as_bytes() => {
                let decoded = number(DECODED_LENGTH_HEADER)?;
                let need = || bad_header(DECODED_LENGTH_HEADER, "is needed for a zstd body");
                BodyEncoding::Zstd { decoded: decoded.ok_or_else(need)? }
            }
            Some(v) => {
                let v = String::from_utf8_lossy(v);
                return Err(Error::BadStep(format!("Content-Encoding {v:?} is not taken")));
            }
        };
        if let Some(range) = header(UPLOAD_HEADER) {
            let range = UploadRange::parse(range)
                .ok_or_else(|| bad_header(UPLOAD_HEADER, "must be FROM/TOTAL"))?;
            // A CRC that does not read is none: the upload continues nothing, as before.
            let crc = header(ANSWER_CRC_HEADER).and_then(|v| std::str::from_utf8(v).ok());
            let crc = crc.and_then(|crc| u32::from_str_radix(crc.trim(), 16).ok());
            head.upload = Some(UploadAt { range, crc });
        }
        head.accept_zstd = values("accept-encoding").any(|v| {
            std::str::from_utf8(v)
                .is_ok_and(|v| v.split(',').any(|c| c.trim().split(';').next() == Some(ZSTD)))
        });
        head.check()?;
        Ok(Some(head))
    }
}

/// The error of a header with a bad value.
fn bad_header(name: &str, what: &str) -> Error {
    Error::BadStep(format!("{name} {what}"))
}

/// A header's number (a step, a length, an offset) as `str::parse::<u64>` reads it: digits,
/// after an optional `+`, that fit in a `u64`.
pub fn header_number(value: &[u8]) -> Option<u64> {
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

#[cfg(test)]
#[path = "step_tests.rs"]
mod tests;
