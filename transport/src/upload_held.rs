//! What a session holds of a step's body that has not run yet (a resumable upload,
//! `uploads.rs`), with its room in the budget, until the step runs or the session ends.

use std::sync::Mutex;

use bytes::BytesMut;
use common::wire::AnswerDigest;

use crate::shares::Room;

/// What a session holds of the body of a step that has not run yet.
#[derive(Debug)]
pub struct PartialUpload {
    /// The step whose body it is.
    pub step: u64,
    /// The body's whole length.
    pub total: usize,
    /// What arrived.
    pub bytes: BytesMut,
    /// Its room in `max_inflight_bytes` and in the identity's share, held while it is kept.
    pub room: Option<Room>,
}

impl PartialUpload {
    /// Nothing yet of step `step`'s body of `total` bytes.
    pub fn new(step: u64, total: usize) -> Self {
        Self { step, total, bytes: BytesMut::new(), room: None }
    }

    /// The CRC of what arrived.
    pub fn digest(&self) -> AnswerDigest {
        AnswerDigest::default().then(&self.bytes)
    }
}

/// The unfinished upload a session holds, if any.
#[derive(Debug, Default)]
pub struct Held(Mutex<Option<PartialUpload>>);

impl Held {
    /// Takes what is held.
    pub fn take(&self) -> Option<PartialUpload> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Holds `upload`.
    pub fn keep(&self, upload: PartialUpload) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(upload);
    }

    /// Lets go of what is held (its session was parked: it is sent again whole if it comes
    /// back).
    pub fn forget(&self) {
        drop(self.take());
    }
}
