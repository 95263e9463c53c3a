//! HTTP response bodies: a whole one for JSON and small answers, a relayed turn streamed as the
//! upstream sends it. A streamed turn of a resumable step records what it sends, and is parked
//! in its session when the response is dropped before the turn ended (the connection broke).
//! Either may be compressed (zstd) for a sidecar that asked.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use common::wire::ChunkCompressor;
use hyper::body::{Body, Frame};
use tokio_util::sync::WaitForCancellationFutureOwned;

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
    turn: Option<Box<Turn>>,
    /// A chunk already taken from the turn, to send first.
    first: Option<Bytes>,
    /// The session's resume slot and the signal to let go, for a resumable step.
    resume: Option<(Arc<Resumable>, Pin<Box<WaitForCancellationFutureOwned>>)>,
}

impl std::fmt::Debug for StreamedTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedTurn").field("turn", &self.turn).finish_non_exhaustive()
    }
}

impl StreamedTurn {
    /// Streams `turn`; with `resume`, each chunk is recorded there and the turn is parked
    /// there if it is dropped before the turn ends (its request or its connection went away).
    pub fn new(turn: Box<Turn>, resume: Option<Arc<Resumable>>) -> Self {
        let resume = resume.map(|slot| {
            let detach = slot.attach();
            (slot, Box::pin(detach.cancelled_owned()))
        });
        StreamedTurn { turn: Some(turn), first: None, resume }
    }

    /// Streams a resumed turn: `missed` first, then the rest; `detach` makes it let go.
    pub fn resumed(
        turn: Box<Turn>,
        missed: Bytes,
        slot: Arc<Resumable>,
        detach: tokio_util::sync::CancellationToken,
    ) -> Self {
        let first = (!missed.is_empty()).then_some(missed);
        let resume = Some((slot, Box::pin(detach.cancelled_owned())));
        StreamedTurn { turn: Some(turn), first, resume }
    }

    /// The next chunk (`None` at the end, or when a resume took the turn over).
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// True once the turn has ended.
    pub fn is_finished(&self) -> bool {
        self.turn.as_ref().is_none_or(|t| t.is_finished())
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
        if let Some((_, detach)) = &mut self.resume {
            // A resume on another connection takes the turn over: this response ends.
            if detach.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        let Some(turn) = self.turn.as_mut() else { return Poll::Ready(None) };
        let chunk = std::task::ready!(turn.poll_chunk(cx));
        if let Some((slot, _)) = &self.resume {
            if let Some(chunk) = &chunk {
                slot.record(chunk);
            }
            if turn.is_finished() {
                slot.complete();
            }
        }
        Poll::Ready(chunk)
    }

    fn is_end(&self) -> bool {
        self.first.is_none() && self.turn.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl From<Bytes> for ResponseBody {
    fn from(bytes: Bytes) -> Self {
        ResponseBody::Whole((!bytes.is_empty()).then_some(bytes))
    }
}

impl Drop for StreamedTurn {
    /// A turn left before its end is parked for a resume when its step is resumable (else
    /// dropped, which closes its link).
    fn drop(&mut self) {
        let Some(turn) = self.turn.take() else { return };
        match &self.resume {
            Some((slot, _)) if !turn.is_finished() => slot.park(turn),
            _ => drop(turn),
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
