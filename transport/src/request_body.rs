//! Request bodies as the endpoints read them: bounded in size and in stalls, held against
//! `max_inflight_bytes`, a zstd body decoded to its announced length.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::wire::{DECODED_LENGTH_HEADER, ZSTD, decompress_exact};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::Error;
use crate::incoming::{self, Incoming};
use prometheus_client::metrics::counter::Counter;

pub use crate::incoming::RequestBody;

/// Largest control (JSON) body accepted.
pub const MAX_CONTROL_BODY: usize = 64 * 1024;

/// Reads a request body of at most `limit` bytes; a pause longer than `stall` fails it.
pub async fn read_body(req: Incoming, limit: usize, stall: Duration) -> Result<Bytes, Error> {
    read_body_within(req, limit, stall, None).await.map(|(body, _)| body)
}

/// Room in the budget of bytes held at once over all requests, and a counter of the
/// requests that had to wait for it.
#[derive(Debug, Clone, Copy)]
pub struct Budget<'a> {
    /// The budget, one permit a byte.
    pub bytes: &'a Arc<Semaphore>,
    /// Bumped when a request waits for room.
    pub waited: &'a Counter,
}

/// [`read_body`], holding room in `budget` for the whole body before reading any of it (its
/// Content-Length, else `limit`, the excess given back at the end): room is never held in
/// part, so requests waiting for it cannot block each other. The permit comes back with the
/// body and is released when the caller is done with it. Waiting for room is bounded by
/// `stall` too ([`Error::Busy`]).
pub async fn read_body_within(
    req: Incoming,
    limit: usize,
    stall: Duration,
    budget: Option<Budget<'_>>,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Error> {
    // A stream message's body has no Content-Length, but its size is known: it is here.
    let declared = req
        .header(&incoming::CONTENT_LENGTH)
        .and_then(|v| usize::try_from(incoming::number(v)?).ok())
        .or_else(|| req.body_len());
    if declared.is_some_and(|n| n > limit) {
        return Err(Error::TooLarge { limit });
    }
    let decoded = decoded_length(&req)?;
    if decoded.is_some_and(|n| n > limit) {
        return Err(Error::TooLarge { limit });
    }
    let room = declared.unwrap_or(limit).max(decoded.unwrap_or(0));
    let held = match budget {
        Some(budget) => Some(reserve(budget, room, stall).await?),
        None => None,
    };
    let mut body = match req.into_body() {
        incoming::Body::Streamed(body) => body,
        incoming::Body::Whole(all) => return finish_body(all, decoded, held),
    };
    // Grown as data arrives: a declared length reserves at most 1 MiB up front. A body that
    // comes whole in one frame (a stream message's) is taken as it is, without a copy.
    let mut all = BytesMut::new();
    let mut only: Option<Bytes> = None;
    loop {
        // A frame already here sets no timer.
        let frame = match body.frame().now_or_never() {
            Some(frame) => frame,
            None => match tokio::time::timeout(stall, body.frame()).await {
                Err(_) => return Err(Error::BodyTimeout(stall)),
                Ok(frame) => frame,
            },
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| Error::BadRequest(format!("cannot read body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        if all.len() + only.as_ref().map_or(0, Bytes::len) + data.len() > limit {
            return Err(Error::TooLarge { limit });
        }
        if all.is_empty() && only.is_none() {
            only = Some(data);
            continue;
        }
        if let Some(first) = only.take() {
            all.reserve(declared.unwrap_or(0).min(1 << 20).max(first.len() + data.len()));
            all.extend_from_slice(&first);
        }
        all.extend_from_slice(&data);
    }
    finish_body(only.unwrap_or_else(|| all.freeze()), decoded, held)
}

/// A body read whole: decoded when it came compressed, with the room held for it in the
/// budget cut down to its size.
fn finish_body(
    all: Bytes,
    decoded: Option<usize>,
    mut held: Option<OwnedSemaphorePermit>,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Error> {
    let all = match decoded {
        Some(len) => decompress_exact(&all, len)
            .map_err(|e| Error::BadRequest(format!("a zstd body: {e}")))?,
        None => all,
    };
    if let Some(held) = held.as_mut() {
        drop(held.split(held.num_permits().saturating_sub(all.len())));
    }
    Ok((all, held))
}

/// The decoded length of a zstd body (`None` for a plain one); an error for an encoding the
/// transport does not take.
fn decoded_length(req: &Incoming) -> Result<Option<usize>, Error> {
    let Some(encoding) = req.header(&incoming::CONTENT_ENCODING) else { return Ok(None) };
    if encoding != ZSTD.as_bytes() {
        let encoding = String::from_utf8_lossy(encoding);
        return Err(Error::BadRequest(format!("Content-Encoding {encoding:?} is not taken")));
    }
    req.header(&incoming::DECODED_LENGTH)
        .and_then(|v| usize::try_from(incoming::number(v)?).ok())
        .map(Some)
        .ok_or_else(|| Error::BadRequest(format!("a zstd body needs {DECODED_LENGTH_HEADER}")))
}

/// Room for `n` more bytes, waiting up to `stall` for it.
async fn reserve(
    budget: Budget<'_>,
    n: usize,
    stall: Duration,
) -> Result<OwnedSemaphorePermit, Error> {
    let n = u32::try_from(n).map_err(|_| Error::Busy)?;
    if let Ok(permit) = budget.bytes.clone().try_acquire_many_owned(n) {
        return Ok(permit);
    }
    budget.waited.inc();
    match tokio::time::timeout(stall, budget.bytes.clone().acquire_many_owned(n)).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(Error::Busy),
    }
}
