//! HTTP response bodies: a whole one for JSON and small answers, a relayed turn streamed as the
//! upstream sends it. The turn of a resumable step lives in its session's resume slot, which
//! records what it sends and keeps it when the response is dropped before its end.
//! Either may be compressed (zstd) for a sidecar that asked.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use common::wire::ChunkCompressor;
use hyper::body::{Body, Frame};

use crate::relay::Turn;
use crate::resume::Resumable;

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
    /// Bytes to send first: a resumed turn's missed bytes, a chunk already taken.
    first: Option<Bytes>,
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
        StreamedTurn { source, first: None }
    }

    /// Streams a resumed turn, which `owner` now holds in `slot`: `missed` first, then the rest.
    pub fn resumed(slot: Arc<Resumable>, owner: u64, missed: Bytes) -> Self {
        let first = (!missed.is_empty()).then_some(missed);
        StreamedTurn { source: Source::Slot(slot, owner), first }
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

    /// Puts back a chunk taken with [`Self::next_chunk`]: the body sends it first. (A resumed
    /// turn's missed bytes are already there: they come before it.)
    pub fn put_back(&mut self, chunk: Bytes) {
        self.first = Some(match self.first.take() {
            None => chunk,
            Some(missed) => [missed, chunk].concat().into(),
        });
    }

    /// The response body: what was put back or missed, then the rest of the turn.
    pub fn into_body(self) -> ResponseBody {
        ResponseBody::Turn(Box::new(self))
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(first));
        }
        match &mut self.source {
            Source::Own(turn) => turn.poll_chunk(cx),
            Source::Slot(slot, owner) => slot.poll_turn(*owner, cx),
        }
    }

    fn is_end(&self) -> bool {
        self.first.is_none() && self.is_finished()
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
