//! The carrier: how a session's step reaches the transport on one connection and its answer
//! comes back. One trait, [`Carrier`], with two implementations: an HTTP request per step
//! ([`HttpConn`]: the step's path and headers, `StepHead::to_http`) and a message on a stream
//! ([`StreamConn`]: the step's head in a few bytes, `StepHead::encode`). [`Connection`] is
//! either. What is above it (numbering, resume, tokens: `TunnelConn`) sends every step through
//! the trait; it asks which carrier it holds only to choose, pool and retire connections.

use std::io;
use std::ops::Range;
use std::time::Duration;

use common::wire::{
    AFFINITY_HEADER, AnswerDigest, SESSION_HEADER, StepHead, UploadAt, UploadRange, parts,
};

use crate::http::{AnswerBody, HttpConn, OpenedAs, RequestHead, ResponseHead, StreamConn};

/// What every HTTP request carries besides its step: where it goes (the base URL's path
/// prefix and the `Host` header) and who sends it.
pub(super) struct Via<'a> {
    pub(super) prefix: &'a str,
    pub(super) host: &'a str,
    pub(super) authorization: &'a str,
    pub(super) affinity: &'a str,
}

/// How a step travels to the transport and its answer comes back.
pub(super) trait Carrier: AnswerBody {
    /// Sends `step` with `body` and yields its answer: the head, then the body
    /// ([`AnswerBody`]). `ConnectionAborted`: nothing at all came back (a kept connection the
    /// other side had closed: another may be tried).
    async fn exchange(
        &mut self,
        via: &Via<'_>,
        step: &StepHead,
        body: &[u8],
    ) -> io::Result<Box<ResponseHead>>;

    /// Sends `body` as a resumable upload from byte `at.0` (`None`: an empty probe), in parts
    /// of at most `at.1` bytes where the carrier can send several, and yields the answer to
    /// the last the transport took.
    async fn upload(
        &mut self,
        via: &Via<'_>,
        step: &StepHead,
        body: &[u8],
        at: (Option<usize>, usize),
    ) -> io::Result<Box<ResponseHead>>;
}

impl Carrier for HttpConn {
    async fn exchange(
        &mut self,
        via: &Via<'_>,
        step: &StepHead,
        body: &[u8],
    ) -> io::Result<Box<ResponseHead>> {
        let http = step.to_http();
        let (prefix, host, path) = (via.prefix, via.host, http.path.as_str());
        let headers = Vec::with_capacity(8);
        let mut head = RequestHead { method: http.method, prefix, path, host, headers };
        head.headers
            .extend([("authorization", via.authorization), (AFFINITY_HEADER, via.affinity)]);
        if let Some(id) = &step.session {
            head.headers.push((SESSION_HEADER, id));
        }
        head.headers.extend(http.headers.iter().map(|(name, value)| (*name, value.as_str())));
        self.request(head.text(body.len()).as_bytes(), body).await
    }

    /// One request: it carries the whole rest of the body, in one part.
    async fn upload(
        &mut self,
        via: &Via<'_>,
        step: &StepHead,
        body: &[u8],
        (from, _): (Option<usize>, usize),
    ) -> io::Result<Box<ResponseHead>> {
        let mut parts = upload_parts(step, body, from, usize::MAX);
        let Some((step, range)) = parts.next() else {
            return Err(io::Error::other("an upload of no parts"));
        };
        self.exchange(via, &step, &body[range]).await
    }
}

impl Carrier for StreamConn {
    async fn exchange(
        &mut self,
        _: &Via<'_>,
        step: &StepHead,
        body: &[u8],
    ) -> io::Result<Box<ResponseHead>> {
        self.message_exchange(message(step, body)).await
    }

    /// The parts as messages, sent without waiting.
    async fn upload(
        &mut self,
        _: &Via<'_>,
        step: &StepHead,
        body: &[u8],
        (from, part): (Option<usize>, usize),
    ) -> io::Result<Box<ResponseHead>> {
        // Each part's message is made as it goes out: a cut after the first few costs neither
        // a copy nor the CRC of the rest of the body.
        let parts = upload_parts(step, body, from, part);
        self.send_parts(parts.map(|(step, range)| message(&step, &body[range]))).await
    }
}

/// A step as a stream message: its head, then its body.
fn message(step: &StepHead, body: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(48 + body.len());
    step.encode(&mut message);
    message.extend_from_slice(body);
    message
}

/// The parts of a resumable upload of `body` from `from` (`None`: an empty probe), each at
/// most `part` bytes: step heads that say where each starts and the CRC-32 of the bytes before,
/// each made when it is taken.
fn upload_parts<'a>(
    step: &'a StepHead,
    body: &'a [u8],
    from: Option<usize>,
    part: usize,
) -> impl ExactSizeIterator<Item = (StepHead, Range<usize>)> + 'a {
    let (start, end) = from.map_or((0, 0), |from| (from.min(body.len()), body.len()));
    let ranges = parts(start, end, part);
    let mut digest = AnswerDigest::default().then(&body[..ranges[0].start]);
    let total = body.len() as u64;
    ranges.into_iter().map(move |range| {
        let mut piece = step.clone();
        let at = UploadRange { from: range.start as u64, total };
        piece.upload = Some(UploadAt { range: at, crc: Some(digest.proof().crc) });
        digest.update(&body[range.clone()]);
        (piece, range)
    })
}

/// A session's connection to the transport: HTTP requests, or a stream.
#[derive(Debug)]
pub(super) enum Connection {
    /// One HTTP request per step.
    Requests(HttpConn),
    /// Steps as messages on a stream.
    Stream(StreamConn),
}

impl Connection {
    /// True when steps travel as messages on a stream.
    pub(super) fn is_stream(&self) -> bool {
        matches!(self, Connection::Stream(_))
    }

    /// True when the last answer was read to its end and the connection may carry another.
    pub(super) fn reusable(&self) -> bool {
        match self {
            Connection::Requests(conn) => conn.reusable(),
            Connection::Stream(conn) => conn.reusable(),
        }
    }

    /// The thread that made it: its socket's readiness is seen there.
    pub(super) fn home(&self) -> std::thread::ThreadId {
        match self {
            Connection::Requests(conn) => conn.home,
            Connection::Stream(conn) => conn.home,
        }
    }

    /// A stream's: the `Authorization` its steps run as.
    pub(super) fn opened_as(&self) -> Option<&OpenedAs> {
        match self {
            Connection::Requests(_) => None,
            Connection::Stream(conn) => Some(&conn.opened_as),
        }
    }

    /// Sets the longest silence tolerated from the transport.
    pub(super) fn set_silence_limit(&mut self, limit: Duration) {
        match self {
            Connection::Requests(conn) => conn.set_silence_limit(limit),
            Connection::Stream(conn) => conn.set_silence_limit(limit),
        }
    }
}

impl AnswerBody for Connection {
    async fn body_chunk(&mut self) -> io::Result<Option<bytes::Bytes>> {
        match self {
            Connection::Requests(conn) => conn.body_chunk().await,
            Connection::Stream(conn) => conn.body_chunk().await,
        }
    }

    fn has_ended(&self) -> bool {
        match self {
            Connection::Requests(conn) => conn.has_ended(),
            Connection::Stream(conn) => conn.has_ended(),
        }
    }
}

impl Carrier for Connection {
    async fn exchange(
        &mut self,
        via: &Via<'_>,
        step: &StepHead,
        body: &[u8],
    ) -> io::Result<Box<ResponseHead>> {
        match self {
            Connection::Requests(conn) => conn.exchange(via, step, body).await,
            Connection::Stream(conn) => conn.exchange(via, step, body).await,
        }
    }

    async fn upload(
        &mut self,
        via: &Via<'_>,
        step: &StepHead,
        body: &[u8],
        at: (Option<usize>, usize),
    ) -> io::Result<Box<ResponseHead>> {
        match self {
            Connection::Requests(conn) => conn.upload(via, step, body, at).await,
            Connection::Stream(conn) => conn.upload(via, step, body, at).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use common::wire::StepKind;

    use super::*;

    #[test]
    fn upload_parts_cover_the_rest_of_the_body_each_with_the_crc_of_the_bytes_before() {
        let body: Vec<u8> = (0..10).collect();
        let step = StepHead::new(StepKind::Command);
        let parts: Vec<_> = upload_parts(&step, &body, Some(3), 4).collect();
        let ranges: Vec<_> = parts.iter().map(|(_, range)| range.clone()).collect();
        assert_eq!(ranges, [3..7, 7..10]);
        for (head, range) in &parts {
            let at = head.upload.expect("an upload part says where it is");
            assert_eq!((at.range.from, at.range.total), (range.start as u64, 10));
            let before = AnswerDigest::default().then(&body[..range.start]).proof().crc;
            assert_eq!(at.crc, Some(before), "the CRC-32 of bytes 0..{}", range.start);
        }
        let probe: Vec<_> = upload_parts(&step, &body, None, 4).collect();
        assert_eq!(probe.len(), 1);
        assert_eq!(probe[0].1, 0..0, "a probe carries no bytes");
    }
}
