//! Resumable uploads: a step's request body that breaks off mid-way continues from the byte the
//! transport has, not from the start, so a large statement or file piece gets through a link
//! that breaks more often than it can carry the whole body.
//!
//! - A step whose body is [`RESUMABLE_FROM`] bytes or more says where its body lies in the
//!   whole: `x-tunnel-upload: FROM/TOTAL`, with the CRC-32 of the bytes before `FROM`
//!   (`x-tunnel-answer-crc`, the same proof of continuity as a resumed answer). The bytes are
//!   those sent (a zstd body's compressed bytes).
//! - The transport keeps what arrives of an unfinished body with its session, even when the
//!   connection breaks. It runs the step once the body is whole; until then it answers
//!   `202 Accepted` with `x-tunnel-upload-have: N`, the bytes it holds (also when `FROM` or the
//!   CRC does not match them: nothing is taken then). The sidecar sends the rest from `N`.
//! - Over a stream, a body is sent as several request messages of at most the part size the
//!   transport announces on a new session (`x-tunnel-upload: PART`), one after the other
//!   without waiting: each but the last is answered `202`.
//!
//! A body is never run twice (a step runs once) and never run cut (it runs whole or not at
//! all); what a session holds of one is given back with the session, or when it is parked.

use super::AnswerDigest;

/// Header of a step's request body that can be resumed (`FROM/TOTAL`), and of a new session's
/// answer (the largest part a stream message may carry).
pub const UPLOAD_HEADER: &str = "x-tunnel-upload";
/// Header of a `202 Accepted` answer to an unfinished upload: the bytes the transport holds.
pub const UPLOAD_HAVE_HEADER: &str = "x-tunnel-upload-have";
/// Bodies from this size on are sent as resumable uploads (a smaller one is sent again whole).
pub const RESUMABLE_FROM: usize = 64 * 1024;
/// The part size a transport announces: small enough that a part gets through links that
/// break every few hundred kilobytes, large enough that parts cost little.
pub const UPLOAD_PART: usize = 128 * 1024;

/// Where a request's body lies in the whole body of its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadRange {
    /// The offset of the request's first byte.
    pub from: u64,
    /// The length of the whole body.
    pub total: u64,
}

impl UploadRange {
    /// Reads an `x-tunnel-upload: FROM/TOTAL` value; `None` when malformed or `FROM > TOTAL`.
    pub fn parse(value: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(value).ok()?;
        let (from, total) = text.trim().split_once('/')?;
        let range = Self { from: from.parse().ok()?, total: total.parse().ok()? };
        (range.from <= range.total).then_some(range)
    }

    /// The header value.
    pub fn header(&self) -> String {
        format!("{}/{}", self.from, self.total)
    }
}

/// The header value proving what comes before `from`: the CRC of `body[..from]`.
pub fn crc_before(body: &[u8], from: usize) -> String {
    AnswerDigest::default().then(&body[..from.min(body.len())]).crc_header()
}

/// The parts a body of `len` bytes from `from` is sent in, over a stream whose transport takes
/// parts of `part` bytes: their ranges, in order (one when it fits in one).
pub fn parts(from: usize, len: usize, part: usize) -> Vec<std::ops::Range<usize>> {
    let part = part.max(1);
    let mut ranges = Vec::with_capacity((len - from.min(len)).div_ceil(part).max(1));
    let mut at = from.min(len);
    loop {
        let end = at.saturating_add(part).min(len);
        ranges.push(at..end);
        if end == len {
            return ranges;
        }
        at = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_back_and_refuse_nonsense() {
        let range = UploadRange { from: 131_072, total: 4_000_000 };
        assert_eq!(UploadRange::parse(range.header().as_bytes()), Some(range));
        for bad in ["", "5", "5/", "/5", "6/5", "a/b", "-1/5", "1/5/6"] {
            assert_eq!(UploadRange::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn parts_cover_the_rest_once_in_order() {
        assert_eq!(parts(0, 10, 4), vec![0..4, 4..8, 8..10]);
        assert_eq!(parts(4, 10, 4), vec![4..8, 8..10]);
        assert_eq!(parts(0, 8, 4), vec![0..4, 4..8]);
        assert_eq!(parts(10, 10, 4), vec![10..10], "an empty rest is one empty part");
        assert_eq!(parts(0, 3, 0), vec![0..1, 1..2, 2..3]);
        assert_eq!(parts(5, 10, usize::MAX), vec![5..10], "one part when unbounded");
    }

    #[test]
    fn the_crc_before_is_the_answers_digest_of_the_prefix() {
        let body = b"0123456789";
        assert_eq!(crc_before(body, 0), "00000000");
        assert_eq!(crc_before(body, 4), AnswerDigest::default().then(b"0123").crc_header());
        assert_eq!(crc_before(body, 99), crc_before(body, 10));
    }
}
