//! A step's body as a resumable upload (`common::wire::UploadRange`): what arrives is kept
//! with the session, even when the connection breaks, and the step runs once its body is
//! whole; until then the sidecar is told how much is here, and sends the rest from there.

use bytes::Bytes;
use common::wire::session_label;
use http::StatusCode;
use tracing::{debug, info};

use crate::Error;
use crate::identity::Caller;
use crate::reply::{Reply, no_content};
use crate::request_body::{
    Budget, MIN_BODY_RATE, Room, append_body, decoded_length, finish_upload, held_by_its_message,
    hold_room, read_body_within,
};
use crate::session::Session;
use crate::state::AppState;
use crate::steps::{Body, Step};
use crate::upload_held::PartialUpload;

/// The line an upload let go for its pace logs (the reaper's too).
pub const LET_GO: &str = "an upload held under the minimum body rate was let go: the sidecar sends it again from its start";

/// A step's body, read: whole (the step runs), or an upload not whole yet.
#[derive(Debug)]
pub enum StepBody {
    /// The body and the room it holds.
    Whole(Bytes, Option<Room>),
    /// The bytes of the step's body held so far: the sidecar sends the rest from there.
    Unfinished(u64),
}

/// The body of step `step` of `session`: read whole, or, when the request says it is part of
/// an upload, added to what the session holds of it. A request that does not continue what is
/// held (its `FROM` or its CRC differs) adds nothing and is told how much is held. A body that
/// breaks off keeps what arrived. Its room is `caller`'s, taken through the counts its session
/// keeps.
pub async fn read_step_body(
    state: &AppState,
    caller: &Caller,
    session: &Session,
    step: Option<u64>,
    req: Step,
) -> Result<StepBody, Error> {
    let budget = Budget { state, caller, counts: session.owner_counts(&state.shares) };
    let config = state.config();
    let (limit, stall) = (config.max_request_bytes, config.body_timeout);
    let Some(part) = req.head.upload else {
        // A later step whole: an upload of an earlier one was given up.
        if let Some(step) = step {
            session.upload.forget_before(step);
        }
        let (body, room) = match req.body {
            Body::Whole(body) if held_by_its_message(&req.head, &body, limit) => (body, None),
            body => {
                read_body_within(Step { head: req.head, body }, limit, stall, Some(budget)).await?
            }
        };
        return Ok(StepBody::Whole(body, room));
    };
    let range = part.range;
    let step = step.ok_or_else(|| Error::BadRequest("an upload needs a step number".into()))?;
    let total = usize::try_from(range.total).unwrap_or(usize::MAX);
    if total > limit {
        return Err(Error::TooLarge { limit });
    }
    let decoded = decoded_length(&req)?;
    if decoded.is_some_and(|n| n > limit) {
        return Err(Error::TooLarge { limit });
    }
    if session.upload.forget_if_slower_than(stall, MIN_BODY_RATE) {
        info!(session = %session_label(&session.id), step, "{LET_GO}");
    }
    let held = session.upload.take().filter(|held| held.step == step && held.total == total);
    let mut upload = held.unwrap_or(PartialUpload::new(step, total));
    let have = upload.bytes.len() as u64;
    let continues =
        range.from == have && (have == 0 || part.crc == Some(upload.digest().proof().crc));
    if !continues {
        debug!(step, from = range.from, have, "an upload that does not continue what is held");
        session.upload.keep(upload);
        return Ok(StepBody::Unfinished(have));
    }
    // Room for the whole body is taken before any of it is held, as for a body of known
    // length: uploads taking room piece by piece could each hold part of the budget and wait
    // for the rest of it, for ever. (Memory still grows only with the bytes.)
    if upload.room.is_none() {
        hold_room(budget, &mut upload.room, total, stall).await?;
    }
    let appended =
        append_body(req, &mut upload.bytes, &mut upload.room, total, stall, budget).await;
    if let Err(e) = appended {
        debug!(step, kept = upload.bytes.len(), error = %e, "an upload broke off: what arrived is kept");
        session.upload.keep(upload);
        return Err(e);
    }
    if upload.bytes.len() < total {
        let have = upload.bytes.len() as u64;
        session.upload.keep(upload);
        return Ok(StepBody::Unfinished(have));
    }
    let (body, room) =
        finish_upload(upload.bytes.freeze(), decoded, upload.room, stall, budget).await?;
    Ok(StepBody::Whole(body, room))
}

/// The answer to a request of an upload that is not whole yet: `202 Accepted`, saying how
/// many bytes of the body are held.
pub fn unfinished(have: u64) -> Reply {
    let mut reply = no_content();
    reply.head.status = StatusCode::ACCEPTED.as_u16();
    reply.head.upload_have = Some(have);
    reply
}
