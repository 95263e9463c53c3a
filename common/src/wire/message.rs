//! The compact head of an answer on a stream: its status and headers in a few length-prefixed
//! fields instead of HTTP/1.1 text, with the headers of this protocol named by number (a
//! step's own head is `step.rs`'s). Nothing here does I/O.
//!
//! A message is a big-endian `u16` head length, the head, then body bytes.
//! - Head: flags (`u8`, [`MORE`]: the body goes on in the next messages, up to an empty one),
//!   status (`u16`), headers.
//! - Headers: a `u8` count, then for each a name (`u8` code of [`HEADER_NAMES`] plus one, or
//!   `0`, a `u8` length and the name) and a value (`u16` length, bytes).

use std::ops::Range;

use crate::Error;

/// A message that ends inside its head.
const TRUNCATED: Error = Error::Wire("a stream message ends inside its head");
/// A head over a field's limits (255 headers, 64 KiB a value, 255 bytes a name).
const TOO_LARGE: Error = Error::Wire("a head too large for a stream message");

/// Answer flag: the body continues in the messages that follow, up to an empty message.
pub const MORE: u8 = 1;

/// Header names sent by number (a code is the index plus one); any other is spelled out.
pub const HEADER_NAMES: [&str; 23] = [
    "authorization",
    "content-type",
    "x-tunnel-session",
    "x-tunnel-affinity",
    "x-tunnel-step",
    "accept-encoding",
    "content-encoding",
    "x-tunnel-decoded-length",
    "x-tunnel-infile",
    "x-tunnel-resume-from",
    "x-tunnel-answer-crc",
    "x-tunnel-resumed-from",
    "x-tunnel-session-timeout-ms",
    "x-tunnel-heartbeat-ms",
    "x-tunnel-pipeline",
    "x-tunnel-request-encoding",
    "x-accel-buffering",
    "content-length",
    "host",
    "retry-after",
    "www-authenticate",
    "x-tunnel-upload",
    "x-tunnel-upload-have",
];

/// A header's name in a message: one of [`HEADER_NAMES`] or the bytes at a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameAt {
    /// The index in [`HEADER_NAMES`].
    Known(usize),
    /// Where the spelled-out name is in the message.
    Spelled(Range<usize>),
}

/// A header of a message: its name and where its value is.
pub type HeaderAt = (NameAt, Range<usize>);

/// An answer's first message, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerAt {
    /// The status code.
    pub status: u16,
    /// The body goes on in the next messages.
    pub more: bool,
    /// The headers, in order.
    pub headers: Vec<HeaderAt>,
    /// This message's part of the body.
    pub body: Range<usize>,
}

/// The longest name of [`HEADER_NAMES`], plus one.
const NAME_LENGTHS: usize = 28;

/// For each name length, the codes of [`HEADER_NAMES`] of that length (at most 4; `u8::MAX`
/// for none), so that a name is compared with those alone.
const CODES_BY_LENGTH: [[u8; 4]; NAME_LENGTHS] = {
    let mut table = [[u8::MAX; 4]; NAME_LENGTHS];
    let mut code = 0;
    while code < HEADER_NAMES.len() {
        let row = &mut table[HEADER_NAMES[code].len()];
        let mut slot = 0;
        while row[slot] != u8::MAX {
            slot += 1;
        }
        row[slot] = code as u8;
        code += 1;
    }
    table
};

/// The code of a header name (any case), when it has one.
pub fn header_code(name: &str) -> Option<usize> {
    let row = CODES_BY_LENGTH.get(name.len())?;
    let codes = || row.iter().take_while(|code| **code != u8::MAX).map(|code| usize::from(*code));
    // Lower case, as `http::HeaderName`s are, is compared byte for byte first.
    let mut exact = codes().filter(|code| HEADER_NAMES[*code].as_bytes() == name.as_bytes());
    exact.next().or_else(|| codes().find(|code| HEADER_NAMES[*code].eq_ignore_ascii_case(name)))
}

/// Writes a message's head; the body is appended after [`HeadWriter::finish`].
#[derive(Debug)]
pub struct HeadWriter {
    buf: Vec<u8>,
    count_at: usize,
}

impl HeadWriter {
    /// An answer's first message, with room for `body` bytes.
    pub fn answer(status: u16, more: bool, body: usize) -> Self {
        let mut buf = Vec::with_capacity(128 + body);
        buf.extend_from_slice(&[0, 0, if more { MORE } else { 0 }]);
        buf.extend_from_slice(&status.to_be_bytes());
        let count_at = buf.len();
        buf.push(0);
        Self { buf, count_at }
    }

    /// Adds a header.
    pub fn header(&mut self, name: &str, value: &[u8]) -> Result<(), Error> {
        let Some(count) = self.buf[self.count_at].checked_add(1) else { return Err(TOO_LARGE) };
        let value_len = u16::try_from(value.len()).map_err(|_| TOO_LARGE)?;
        match header_code(name) {
            Some(code) => self.buf.push(code as u8 + 1),
            None => {
                let len = u8::try_from(name.len()).map_err(|_| TOO_LARGE)?;
                if len == 0 {
                    return Err(Error::Wire("an empty header name"));
                }
                self.buf.extend_from_slice(&[0, len]);
                self.buf.extend_from_slice(name.as_bytes());
            }
        }
        self.buf.extend_from_slice(&value_len.to_be_bytes());
        self.buf.extend_from_slice(value);
        self.buf[self.count_at] = count;
        Ok(())
    }

    /// The message so far (its head length set), to which the body is appended.
    pub fn finish(mut self) -> Result<Vec<u8>, Error> {
        let head = u16::try_from(self.buf.len() - 2).map_err(|_| TOO_LARGE)?;
        self.buf[..2].copy_from_slice(&head.to_be_bytes());
        Ok(self.buf)
    }
}

/// Reads fields off a message's head.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    end: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<Range<usize>, Error> {
        let start = self.at;
        // (Matched, not `ok_or`: an error made and dropped on every field costs more than the
        // field.)
        match start.checked_add(n) {
            Some(end) if end <= self.end => {
                self.at = end;
                Ok(start..end)
            }
            _ => Err(TRUNCATED),
        }
    }

    fn u8(&mut self) -> Result<u8, Error> {
        let at = self.take(1)?;
        Ok(self.data[at.start])
    }

    fn u16(&mut self) -> Result<u16, Error> {
        let at = self.take(2)?;
        Ok(u16::from_be_bytes([self.data[at.start], self.data[at.start + 1]]))
    }

    fn headers(&mut self) -> Result<Vec<HeaderAt>, Error> {
        let count = self.u8()?;
        let mut headers = Vec::with_capacity(count.into());
        for _ in 0..count {
            let name = match self.u8()? {
                0 => {
                    let len = self.u8()?;
                    if len == 0 {
                        return Err(Error::Wire("an empty header name"));
                    }
                    NameAt::Spelled(self.take(len.into())?)
                }
                code if usize::from(code) <= HEADER_NAMES.len() => {
                    NameAt::Known(usize::from(code) - 1)
                }
                _ => return Err(Error::Wire("an unknown header code")),
            };
            let len = self.u16()?;
            headers.push((name, self.take(len.into())?));
        }
        Ok(headers)
    }
}

/// The head's reader and where the body starts.
fn head_of(data: &[u8]) -> Result<(Reader<'_>, usize), Error> {
    let Some(len) = data.get(..2) else { return Err(TRUNCATED) };
    let end = 2 + usize::from(u16::from_be_bytes([len[0], len[1]]));
    if end > data.len() {
        return Err(TRUNCATED);
    }
    Ok((Reader { data, at: 2, end }, end))
}

/// Reads an answer's first message.
pub fn read_answer(data: &[u8]) -> Result<AnswerAt, Error> {
    let (mut reader, end) = head_of(data)?;
    let flags = reader.u8()?;
    if flags & !MORE != 0 {
        return Err(Error::Wire("unknown flags"));
    }
    let status = reader.u16()?;
    if !(100..1000).contains(&status) {
        return Err(Error::Wire("a status out of range"));
    }
    let headers = reader.headers()?;
    if reader.at != end {
        return Err(Error::Wire("bytes left in the head"));
    }
    Ok(AnswerAt { status, more: flags & MORE != 0, headers, body: end..data.len() })
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
