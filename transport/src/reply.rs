//! What a step is answered with, whichever carrier takes it back: a typed [`AnswerHead`] and
//! the body (JSON, frames, empty, text, or a relayed turn streamed as the upstream sends it,
//! zstd for a sidecar that asked); how the HTTP carrier writes it as a response; and the one
//! place transport errors become answers. The turn of a resumable step lives in its session's
//! resume slot, which records what it sends and keeps it when the answer is dropped early.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use common::wire::ChunkCompressor;
use common::wire::{AnswerHead, Content};
use http::{HeaderName, HeaderValue, Response, StatusCode};
use hyper::body::{Body, Frame};
use serde::Serialize;
use tracing::warn;

use crate::Error;
use crate::relay::Turn;
use crate::resume::Resumable;
use crate::resume_kept::KeptChunk;

/// A step's answer: its head (status, content, what the transport tells with it) and body.
#[derive(Debug)]
pub struct Answer {
    /// The head, as either carrier writes it.
    pub head: AnswerHead,
    /// The body.
    pub body: ResponseBody,
    /// What becomes of the connection it goes back on.
    pub then: Then,
}

/// What becomes of the connection an answer goes back on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Then {
    /// It carries more steps.
    #[default]
    Continue,
    /// It ends after this answer (a refused token: `Connection: close`, or the stream's end).
    Close,
    /// It ends unanswered, so that the sidecar sends the step again on a new one (a step of a
    /// session that moved).
    HangUp,
}

/// An answer, boxed: it moves through several layers of futures and results on its way out.
pub type Reply = Box<Answer>;

/// An answer with `status`, `content` and `body`.
pub fn answer(status: StatusCode, content: Content, body: ResponseBody) -> Reply {
    let head = AnswerHead { status: status.as_u16(), content, ..AnswerHead::default() };
    Box::new(Answer { head, body, then: Then::Continue })
}

/// A JSON answer.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Reply {
    let body = serde_json::to_vec(value).unwrap_or_default();
    answer(status, Content::Json, ResponseBody::from(Bytes::from(body)))
}

/// A frames answer; an opened session's names the session (a step's path already does).
pub fn frames(status: StatusCode, body: ResponseBody, session: Option<&str>) -> Reply {
    let mut reply = answer(status, Content::Frames, body);
    reply.head.session = session.map(Into::into);
    reply
}

/// `204 No Content`.
pub fn no_content() -> Reply {
    answer(StatusCode::NO_CONTENT, Content::None, ResponseBody::from(Bytes::new()))
}

/// Text of `content_type` (the metrics).
pub fn text(body: String, content_type: &'static str) -> Reply {
    answer(
        StatusCode::OK,
        Content::Other(content_type.into()),
        ResponseBody::from(Bytes::from(body)),
    )
}

/// No answer: the connection is closed unanswered (see [`Then::HangUp`]).
pub fn hang_up() -> Reply {
    let mut reply = no_content();
    reply.then = Then::HangUp;
    reply
}

/// The one place transport errors become answers.
pub fn error_response(err: &Error) -> Reply {
    if matches!(err, Error::SessionMoved) {
        return hang_up();
    }
    let (status, body) = err.to_api();
    if status.is_server_error() {
        warn!(error = %err, "request failed");
    }
    json(status, &body)
}

/// An answer as an HTTP response: its head's status and headers (`AnswerHead::to_http`), and
/// what only HTTP says: a streamed body passes nginx unbuffered (frames the sidecar must act
/// on at once: heartbeats, a file request), and a connection that ends says so. A hang-up is
/// no response: [`Error::SessionMoved`], which closes the connection.
pub fn http_response(answer: Reply) -> Result<Response<ResponseBody>, Error> {
    let Answer { head, body, then } = *answer;
    if then == Then::HangUp {
        return Err(Error::SessionMoved);
    }
    let streamed = !matches!(body, ResponseBody::Whole(_));
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(head.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    for (name, value) in head.to_http() {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    if streamed {
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    }
    if then == Then::Close {
        headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(response)
}

/// The body type of every transport response.
#[derive(Debug)]
pub enum ResponseBody {
    /// A complete body (`None` once sent).
    Whole(Option<Bytes>),
    /// A relayed answer, streamed as the upstream sends it.
    Turn(Box<StreamedTurn>),
    /// Another body, compressed chunk by chunk.
    Zstd(Box<Compressed>),
}

/// A body compressed chunk by chunk (each flushed at once), then the end of the zstd frame.
#[derive(Debug)]
pub struct Compressed {
    inner: ResponseBody,
    compressor: ChunkCompressor,
    done: bool,
}

/// Whole bodies smaller than this are not worth compressing.
const COMPRESS_FROM: usize = 256;

impl ResponseBody {
    /// This body compressed; a small whole one comes back as the error (send it as it is).
    pub fn compressed(self) -> Result<ResponseBody, ResponseBody> {
        if let ResponseBody::Whole(bytes) = &self
            && bytes.as_ref().is_none_or(|b| b.len() < COMPRESS_FROM)
        {
            return Err(self);
        }
        match ChunkCompressor::new() {
            Ok(compressor) => Ok(ResponseBody::Zstd(Box::new(Compressed {
                inner: self,
                compressor,
                done: false,
            }))),
            Err(_) => Err(self),
        }
    }
}

impl Compressed {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if self.done {
            return Poll::Ready(None);
        }
        let next = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        let data = next.and_then(|frame| frame.ok()).and_then(|frame| frame.into_data().ok());
        let out = match data {
            Some(chunk) => self.compressor.compress(&chunk),
            None => {
                self.done = true;
                self.compressor.finish()
            }
        };
        match out {
            Ok(bytes) => Poll::Ready(Some(bytes)),
            Err(e) => {
                // The sidecar sees the answer break off, and resumes or reports it.
                tracing::warn!(error = %e, "compressing an answer failed");
                self.done = true;
                Poll::Ready(None)
            }
        }
    }
}

/// A turn streamed as a response body.
pub struct StreamedTurn {
    source: Source,
    /// A chunk to send first: taken already, and put back.
    first: Option<Bytes>,
    /// A resumed turn's next byte to send from the session's kept bytes, until it caught up.
    kept_from: Option<u64>,
}

/// Where a streamed turn's chunks come from.
enum Source {
    /// The turn itself (a step that is not resumable): dropped with the response.
    Own(Box<Turn>),
    /// The session's resume slot, which keeps the turn and records what it sends; `owner`
    /// names this response there.
    Slot(Arc<Resumable>, u64),
}

impl std::fmt::Debug for StreamedTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let resumable = matches!(self.source, Source::Slot(..));
        f.debug_struct("StreamedTurn").field("resumable", &resumable).finish_non_exhaustive()
    }
}

impl StreamedTurn {
    /// Streams `turn`; with `resume`, the turn is kept there, each chunk is recorded, and the
    /// turn waits there for a resume if this response is dropped before its end.
    pub fn new(turn: Box<Turn>, resume: Option<Arc<Resumable>>) -> Self {
        let source = match resume {
            Some(slot) => {
                let owner = slot.attach(turn);
                Source::Slot(slot, owner)
            }
            None => Source::Own(turn),
        };
        StreamedTurn { source, first: None, kept_from: None }
    }

    /// Streams a resumed step's answer, which `owner` now reads in `slot`: the kept bytes
    /// from `from` (taken a chunk at a time), then the rest of its turn if it still runs. A
    /// later resume, or a new step, ends it at its next chunk.
    pub fn resumed(slot: Arc<Resumable>, owner: u64, from: u64) -> Self {
        StreamedTurn { source: Source::Slot(slot, owner), first: None, kept_from: Some(from) }
    }

    /// The next chunk (`None` at the end, or when a resume took the turn over).
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// True once the turn has ended (or another response took it over).
    pub fn is_finished(&self) -> bool {
        match &self.source {
            Source::Own(turn) => turn.is_finished(),
            Source::Slot(slot, owner) => slot.is_finished_for(*owner),
        }
    }

    /// Puts back the chunk just taken with [`Self::next_chunk`]: the body sends it first.
    pub fn put_back(&mut self, chunk: Bytes) {
        self.first = Some(chunk);
    }

    /// The response body: what was put back or missed, then the rest of the turn.
    pub fn into_body(self) -> ResponseBody {
        ResponseBody::Turn(Box::new(self))
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some(chunk) = self.first.take() {
            if let Source::Slot(slot, owner) = &self.source
                && !slot.is_reader(*owner)
            {
                return Poll::Ready(None);
            }
            return Poll::Ready(Some(chunk));
        }
        if let (Some(from), Source::Slot(slot, owner)) = (self.kept_from, &self.source) {
            match slot.kept_chunk(*owner, from) {
                KeptChunk::Bytes(chunk) => {
                    self.kept_from = Some(from + chunk.len() as u64);
                    return Poll::Ready(Some(chunk));
                }
                KeptChunk::CaughtUp => self.kept_from = None,
                KeptChunk::Gone => {
                    self.kept_from = None;
                    return Poll::Ready(None);
                }
            }
        }
        match &mut self.source {
            Source::Own(turn) => turn.poll_chunk(cx),
            Source::Slot(slot, owner) => slot.poll_turn(*owner, cx),
        }
    }

    fn is_end(&self) -> bool {
        self.first.is_none() && self.kept_from.is_none() && self.is_finished()
    }
}

impl From<Bytes> for ResponseBody {
    fn from(bytes: Bytes) -> Self {
        ResponseBody::Whole((!bytes.is_empty()).then_some(bytes))
    }
}

impl Drop for StreamedTurn {
    /// A resumable turn left before its end waits in its slot for a resume (a turn of its own
    /// is dropped, which closes its link).
    fn drop(&mut self) {
        if let Source::Slot(slot, owner) = &self.source {
            slot.let_go(*owner);
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ResponseBody::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Turn(turn) => turn.poll_chunk(cx).map(|c| c.map(|c| Ok(Frame::data(c)))),
            ResponseBody::Zstd(body) => body.poll_chunk(cx).map(|c| c.map(|c| Ok(Frame::data(c)))),
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            ResponseBody::Whole(bytes) => {
                hyper::body::SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            ResponseBody::Turn(_) | ResponseBody::Zstd(_) => hyper::body::SizeHint::default(),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Whole(bytes) => bytes.is_none(),
            ResponseBody::Turn(turn) => turn.is_end(),
            ResponseBody::Zstd(body) => body.done,
        }
    }
}
