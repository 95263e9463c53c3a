//! Request bodies as the endpoints read them: bounded in size and in stalls, held against
//! `max_inflight_bytes`, a zstd body decoded to its announced length.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::wire::{BodyEncoding, StepHead, decompress_exact};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use tokio::sync::OwnedSemaphorePermit;

use crate::Error;
use crate::identity::Caller;
pub use crate::shares::Room;
use crate::shares::{IdentityCounts, Share};
use crate::state::AppState;
use crate::steps::{self, Step};

pub use crate::steps::RequestBody;

/// Largest control (JSON) body accepted.
pub const MAX_CONTROL_BODY: usize = 64 * 1024;

/// Largest body that takes no room in the budget when a stream message brought it whole and
/// plain (not zstd: a decoded body is a copy): the message holds those bytes already.
pub const SMALL_WHOLE_BODY: usize = 16 * 1024;

/// Least average rate of a body once `body_timeout` has passed: a body trickled slower than
/// this fails ([`Error::BodyTimeout`]) instead of holding its room.
pub const MIN_BODY_RATE: u64 = 16 * 1024;

/// Whether a body a stream message brought whole, `body`, is held by its message already:
/// plain and small (a stream reads one message at a time and streams are counted), it takes no
/// room in the budget (most commands), and needs no wait.
pub fn held_by_its_message(head: &StepHead, body: &Bytes, limit: usize) -> bool {
    head.encoding == BodyEncoding::Plain && body.len() <= SMALL_WHOLE_BODY.min(limit)
}

/// Reads a request body of at most `limit` bytes; a pause longer than `stall`, or a body
/// slower than [`MIN_BODY_RATE`] once `stall` has passed, fails it.
pub async fn read_body(req: Step, limit: usize, stall: Duration) -> Result<Bytes, Error> {
    read_body_within(req, limit, stall, None).await.map(|(body, _)| body)
}

/// Whose body it is, for room in the budget of bytes held at once over all requests
/// (`max_inflight_bytes`) and in the share of it the caller's identity may hold.
#[derive(Debug, Clone, Copy)]
pub struct Budget<'a> {
    /// The budget and the shares.
    pub state: &'a AppState,
    /// Whose body.
    pub caller: &'a Caller,
    /// Its identity's counts of shares (its session keeps them).
    pub counts: &'a Arc<IdentityCounts>,
}

/// [`read_body`], holding room in `budget` for the body. A body of known length (its
/// Content-Length, or a stream message's) takes its room whole before any of it is read, so
/// requests waiting for room cannot block each other; a chunked body takes room as it grows.
/// Either way no identity holds more than its share (else [`Error::IdentityLimit`]). The room
/// comes back with the body and is released when the caller drops it. Waiting for room is
/// bounded by `stall` too ([`Error::Busy`]).
pub async fn read_body_within(
    req: Step,
    limit: usize,
    stall: Duration,
    budget: Option<Budget<'_>>,
) -> Result<(Bytes, Option<Room>), Error> {
    let whole = matches!(req.body, steps::Body::Whole(_));
    // A body's pace counts from here, waits for room included.
    let started = (!whole).then(tokio::time::Instant::now);
    // An HTTP body's Content-Length, or a stream message's body, here whole.
    let declared = req.body_len();
    if declared.is_some_and(|n| n > limit) {
        return Err(Error::TooLarge { limit });
    }
    let decoded = decoded_length(&req)?;
    if decoded.is_some_and(|n| n > limit) {
        return Err(Error::TooLarge { limit });
    }
    let room = declared.map_or(0, |n| n.max(decoded.unwrap_or(0)));
    let held_already =
        matches!(&req.body, steps::Body::Whole(b) if held_by_its_message(&req.head, b, limit));
    let mut held = match &budget {
        Some(budget) if !held_already => Some(reserve(budget, room, stall).await?),
        _ => None,
    };
    let mut body = match req.into_body() {
        steps::Body::Streamed(body) => body,
        steps::Body::Whole(all) => return finish_body(all, decoded, held),
    };
    let started = started.unwrap_or_else(tokio::time::Instant::now);
    // Grown as data arrives: a declared length reserves at most 1 MiB up front. A body that
    // comes whole in one frame (a stream message's) is taken as it is, without a copy.
    let mut all = BytesMut::new();
    let mut only: Option<Bytes> = None;
    let mut received = 0usize;
    loop {
        let Some(data) = next_data(&mut body, started, stall, received).await? else { break };
        received += data.len();
        if received > limit {
            return Err(Error::TooLarge { limit });
        }
        if let (Some(budget), Some(room)) = (&budget, held.as_mut())
            && received > room.permit.num_permits()
        {
            grow(budget, room, received - room.permit.num_permits(), stall).await?;
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
    if let (Some(budget), Some(room)) = (&budget, held.as_mut()) {
        let wanted = decoded.unwrap_or(0);
        if wanted > room.permit.num_permits() {
            grow(budget, room, wanted - room.permit.num_permits(), stall).await?;
        }
    }
    finish_body(only.unwrap_or_else(|| all.freeze()), decoded, held)
}

/// The next data of a body (`None` at its end), within the pace [`next_wait`] allows after
/// `received` bytes; a frame already here sets no timer.
async fn next_data(
    body: &mut RequestBody,
    started: tokio::time::Instant,
    stall: Duration,
    received: usize,
) -> Result<Option<Bytes>, Error> {
    loop {
        let frame = match body.frame().now_or_never() {
            Some(frame) => frame,
            None => match tokio::time::timeout(next_wait(started, stall, received), body.frame())
                .await
            {
                Err(_) => return Err(Error::BodyTimeout(stall)),
                Ok(frame) => frame,
            },
        };
        let Some(frame) = frame else { return Ok(None) };
        let frame = frame.map_err(|e| Error::BadRequest(format!("cannot read body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            return Ok(Some(data));
        }
    }
}

/// How long the next piece of a body may take: `stall` at most, and no longer than keeps the
/// body at [`MIN_BODY_RATE`] on average once `stall` has passed since it began.
fn next_wait(started: tokio::time::Instant, stall: Duration, received: usize) -> Duration {
    let allowed = stall + Duration::from_secs_f64(received as f64 / MIN_BODY_RATE as f64);
    let left = allowed.saturating_sub(started.elapsed());
    left.min(stall)
}

/// A body read whole: decoded when it came compressed, with the room held for it cut down
/// to its size.
fn finish_body(
    all: Bytes,
    decoded: Option<usize>,
    mut held: Option<Room>,
) -> Result<(Bytes, Option<Room>), Error> {
    let all = match decoded {
        Some(len) => decompress_exact(&all, len)
            .map_err(|e| Error::BadRequest(format!("a zstd body: {e}")))?,
        None => all,
    };
    if let Some(held) = held.as_mut() {
        held.shrink_to(all.len());
    }
    Ok((all, held))
}

/// Appends a request's body to `into`, what a resumable upload holds so far (see
/// `common::wire::UploadRange`), up to `total` bytes in all, with room held for it in `room`
/// within `budget`; the pace is bounded as [`read_body`]'s. What arrived stays in `into` when
/// the body breaks off.
pub async fn append_body(
    req: Step,
    into: &mut BytesMut,
    room: &mut Option<Room>,
    total: usize,
    stall: Duration,
    budget: Budget<'_>,
) -> Result<(), Error> {
    let started = tokio::time::Instant::now();
    let mut body = match req.into_body() {
        steps::Body::Streamed(body) => body,
        steps::Body::Whole(all) => {
            return append_piece(&all, into, room, total, stall, budget).await;
        }
    };
    let mut received = 0usize;
    loop {
        let Some(data) = next_data(&mut body, started, stall, received).await? else {
            return Ok(());
        };
        received += data.len();
        append_piece(&data, into, room, total, stall, budget).await?;
    }
}

/// One piece of an upload appended, with room held for it.
async fn append_piece(
    data: &[u8],
    into: &mut BytesMut,
    room: &mut Option<Room>,
    total: usize,
    stall: Duration,
    budget: Budget<'_>,
) -> Result<(), Error> {
    let want = into.len() + data.len();
    if want > total {
        return Err(Error::BadRequest(format!("an upload longer than the {total} bytes it said")));
    }
    hold_room(budget, room, want, stall).await?;
    into.extend_from_slice(data);
    Ok(())
}

/// Room for `want` bytes in all in `room` (taken when there is none yet).
pub(crate) async fn hold_room(
    budget: Budget<'_>,
    room: &mut Option<Room>,
    want: usize,
    stall: Duration,
) -> Result<(), Error> {
    match room.as_mut() {
        None => *room = Some(reserve(&budget, want, stall).await?),
        Some(held) if want > held.permit.num_permits() => {
            let more = want - held.permit.num_permits();
            grow(&budget, held, more, stall).await?;
        }
        Some(_) => {}
    }
    Ok(())
}

/// A whole upload: decoded when it came compressed (room held for its decoded length first),
/// as [`read_body_within`] gives a body.
pub async fn finish_upload(
    all: Bytes,
    decoded: Option<usize>,
    mut room: Option<Room>,
    stall: Duration,
    budget: Budget<'_>,
) -> Result<(Bytes, Option<Room>), Error> {
    if let Some(wanted) = decoded {
        hold_room(budget, &mut room, wanted, stall).await?;
    }
    finish_body(all, decoded, room)
}

/// The decoded length of a zstd body (`None` for a plain one); an error for an encoding the
/// transport does not take.
pub fn decoded_length(req: &Step) -> Result<Option<usize>, Error> {
    match req.head.encoding {
        BodyEncoding::Plain => Ok(None),
        BodyEncoding::Zstd { decoded } => usize::try_from(decoded)
            .map(Some)
            .map_err(|_| Error::BadRequest("a zstd body's decoded length is too large".into())),
    }
}

/// Room for `n` bytes: the identity's share at once, else [`Error::IdentityLimit`]; the
/// budget waiting up to `stall`, else [`Error::Busy`].
async fn reserve(budget: &Budget<'_>, n: usize, stall: Duration) -> Result<Room, Error> {
    let share =
        budget.state.take_share_of(budget.caller, budget.counts, Share::InflightBytes, n)?;
    let permit = acquire(budget, n, stall).await?;
    Ok(Room::new(permit, share))
}

/// `n` more bytes of room for a body that grew past what it holds.
async fn grow(
    budget: &Budget<'_>,
    room: &mut Room,
    n: usize,
    stall: Duration,
) -> Result<(), Error> {
    let state = budget.state;
    if !room.share.grow(n, state.config().max_inflight_bytes_per_token) {
        return Err(state.identity_limit(budget.caller, Share::InflightBytes.key()));
    }
    let more = acquire(budget, n, stall).await?;
    room.permit.merge(more);
    Ok(())
}

/// `n` permits of the budget, waiting up to `stall` for them.
async fn acquire(
    budget: &Budget<'_>,
    n: usize,
    stall: Duration,
) -> Result<OwnedSemaphorePermit, Error> {
    let n = u32::try_from(n).map_err(|_| Error::Busy)?;
    let bytes = &budget.state.inflight;
    if let Ok(permit) = bytes.clone().try_acquire_many_owned(n) {
        return Ok(permit);
    }
    budget.state.metrics.budget_waits.inc();
    match tokio::time::timeout(stall, bytes.clone().acquire_many_owned(n)).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(Error::Busy),
    }
}

#[cfg(test)]
#[path = "request_body_tests.rs"]
mod tests;
