//! HTTP response bodies: a full one for JSON and small answers, a relayed turn streamed as the
//! upstream sends it.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame};

use crate::relay::Turn;

/// The body type of every transport response.
#[derive(Debug)]
pub enum ResponseBody {
    /// A complete body.
    Full(Full<Bytes>),
    /// A relayed answer, streamed as the upstream sends it (`Bytes` is a chunk already taken).
    Turn(Box<Turn>, Option<Bytes>),
}

impl From<Bytes> for ResponseBody {
    fn from(bytes: Bytes) -> Self {
        ResponseBody::Full(Full::new(bytes))
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
            ResponseBody::Full(full) => Pin::new(full).poll_frame(cx),
            ResponseBody::Turn(turn, first) => match first.take() {
                Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                None => turn.poll_chunk(cx).map(|chunk| chunk.map(|c| Ok(Frame::data(c)))),
            },
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            ResponseBody::Full(full) => full.size_hint(),
            ResponseBody::Turn(..) => hyper::body::SizeHint::default(),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(full) => full.is_end_stream(),
            ResponseBody::Turn(turn, first) => first.is_none() && turn.is_finished(),
        }
    }
}
