//! Sans-IO decoder of an HTTP/1.1 response body: Content-Length, chunked, or until close.

use std::io;

use bytes::{Buf, Bytes, BytesMut};

/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;

/// What the decoder produced from the buffered bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Body bytes.
    Data(Bytes),
    /// More input is needed.
    NeedMore,
    /// The body is complete.
    Done,
}

/// Where the decoder is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    UntilClose,
    Done,
}

/// Body framing decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyDecoder(State);

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed HTTP body: {what}"))
}

impl BodyDecoder {
    /// A body of exactly `n` bytes.
    pub fn length(n: u64) -> Self {
        Self(if n == 0 { State::Done } else { State::Length(n) })
    }

    /// A chunked body.
    pub fn chunked() -> Self {
        Self(State::ChunkSize)
    }

    /// A body delimited by the connection closing.
    pub fn until_close() -> Self {
        Self(State::UntilClose)
    }

    /// No body.
    pub fn empty() -> Self {
        Self(State::Done)
    }

    /// True once the whole body has been decoded.
    pub fn is_done(&self) -> bool {
        self.0 == State::Done
    }

    /// True when the connection must close after this body.
    pub fn ends_with_close(&self) -> bool {
        self.0 == State::UntilClose
    }

    /// Decodes from `buf`, consuming what it uses.
    pub fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Decoded> {
        loop {
            match self.0 {
                State::Done => return Ok(Decoded::Done),
                State::Length(n) | State::ChunkData(n) => {
                    if buf.is_empty() {
                        return Ok(Decoded::NeedMore);
                    }
                    let take = usize::try_from(n).unwrap_or(usize::MAX).min(buf.len());
                    let data = buf.split_to(take).freeze();
                    let left = n - take as u64;
                    self.0 = match (self.0, left) {
                        (State::Length(_), 0) => State::Done,
                        (State::Length(_), l) => State::Length(l),
                        (_, 0) => State::ChunkDataEnd,
                        (_, l) => State::ChunkData(l),
                    };
                    return Ok(Decoded::Data(data));
                }
                State::UntilClose => {
                    if buf.is_empty() {
                        return Ok(Decoded::NeedMore);
                    }
                    return Ok(Decoded::Data(buf.split().freeze()));
                }
                State::ChunkSize => {
                    let Some(line) = take_line(buf)? else { return Ok(Decoded::NeedMore) };
                    let hex = line.split(|&b| b == b';').next().unwrap_or_default();
                    let text = std::str::from_utf8(hex).map_err(|_| invalid("chunk size"))?.trim();
                    let size = u64::from_str_radix(text, 16).map_err(|_| invalid("chunk size"))?;
                    self.0 = if size == 0 { State::Trailers } else { State::ChunkData(size) };
                }
                State::ChunkDataEnd => {
                    if buf.len() < 2 {
                        return Ok(Decoded::NeedMore);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(invalid("chunk not followed by CRLF"));
                    }
                    buf.advance(2);
                    self.0 = State::ChunkSize;
                }
                State::Trailers => {
                    let Some(line) = take_line(buf)? else { return Ok(Decoded::NeedMore) };
                    if line.is_empty() {
                        self.0 = State::Done;
                    }
                }
            }
        }
    }

    /// The connection closed: fine only for a close-delimited or finished body.
    pub fn at_eof(&mut self) -> io::Result<()> {
        match self.0 {
            State::UntilClose | State::Done => {
                self.0 = State::Done;
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the transport closed the connection mid-answer",
            )),
        }
    }
}

/// Takes one CRLF-terminated line (without the CRLF), if complete.
fn take_line(buf: &mut BytesMut) -> io::Result<Option<Bytes>> {
    match buf.windows(2).position(|w| w == b"\r\n") {
        Some(end) => {
            let line = buf.split_to(end).freeze();
            buf.advance(2);
            Ok(Some(line))
        }
        None if buf.len() > MAX_LINE => Err(invalid("line too long")),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(mut dec: BodyDecoder, input: &[u8], step: usize) -> io::Result<Vec<u8>> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in input.chunks(step.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match dec.decode(&mut buf)? {
                    Decoded::Data(d) => out.extend_from_slice(&d),
                    Decoded::NeedMore => break,
                    Decoded::Done => return Ok(out),
                }
            }
        }
        dec.at_eof()?;
        Ok(out)
    }

    #[test]
    fn chunked_bodies_decode_whatever_the_split() {
        let wire = b"5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for step in 1..wire.len() {
            assert_eq!(
                decode_all(BodyDecoder::chunked(), wire, step).ok(),
                Some(b"hello world!".to_vec()),
                "step {step}"
            );
        }
    }

    #[test]
    fn length_and_close_delimited_bodies() {
        assert_eq!(decode_all(BodyDecoder::length(3), b"abcdef", 2).ok(), Some(b"abc".to_vec()));
        assert_eq!(
            decode_all(BodyDecoder::until_close(), b"abcdef", 4).ok(),
            Some(b"abcdef".to_vec())
        );
        assert!(decode_all(BodyDecoder::length(10), b"abc", 1).is_err(), "early EOF is an error");
        assert!(decode_all(BodyDecoder::chunked(), b"5\r\nhel", 1).is_err());
    }

    #[test]
    fn garbage_is_refused() {
        assert!(decode_all(BodyDecoder::chunked(), b"zz\r\n", 1).is_err());
        assert!(decode_all(BodyDecoder::chunked(), b"2\r\nabXX", 1).is_err());
        assert!(decode_all(BodyDecoder::chunked(), &[b'1'; 5000], 100).is_err());
    }
}
