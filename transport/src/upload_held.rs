//! What a session holds of a step's body that has not run yet (a resumable upload,
//! `uploads.rs`), with its room in the budget, until the step runs, a later step begins, the
//! session ends or is parked, or the upload falls under the minimum body rate.

use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    /// The CRC of the bytes hashed so far (a prefix of `bytes`): each byte is hashed once,
    /// however many requests ask whether they continue it.
    hashed: AnswerDigest,
    /// When its first request came.
    began: Instant,
}

impl PartialUpload {
    /// Nothing yet of step `step`'s body of `total` bytes.
    pub fn new(step: u64, total: usize) -> Self {
        let (hashed, began) = (AnswerDigest::default(), Instant::now());
        Self { step, total, bytes: BytesMut::new(), room: None, hashed, began }
    }

    /// The CRC of what arrived (the bytes not hashed yet are hashed now).
    pub fn digest(&mut self) -> AnswerDigest {
        let hashed = usize::try_from(self.hashed.len()).unwrap_or(usize::MAX);
        if let Some(rest) = self.bytes.get(hashed..) {
            self.hashed.update(rest);
        }
        self.hashed
    }

    /// True when it arrives slower than a plain body may (`min_rate` bytes a second on
    /// average once `stall` has passed since its first request): what it holds is room the
    /// others wait for.
    pub fn is_slower_than(&self, stall: Duration, min_rate: u64) -> bool {
        let allowed = stall + Duration::from_secs_f64(self.bytes.len() as f64 / min_rate as f64);
        self.began.elapsed() > allowed
    }
}

/// The unfinished upload a session holds, if any.
#[derive(Debug, Default)]
pub struct Held(Mutex<Option<PartialUpload>>);

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<PartialUpload>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes what is held.
    pub fn take(&self) -> Option<PartialUpload> {
        self.lock().take()
    }

    /// Holds `upload`.
    pub fn keep(&self, upload: PartialUpload) {
        *self.lock() = Some(upload);
    }

    /// Lets go of what is held (its session was parked: it is sent again whole if it comes
    /// back).
    pub fn forget(&self) {
        drop(self.take());
    }

    /// Lets go of an upload of a step before `step` (its sidecar gave it up and moved on).
    pub fn forget_before(&self, step: u64) {
        let mut held = self.lock();
        if held.as_ref().is_some_and(|upload| upload.step < step) {
            drop(held.take());
        }
    }

    /// Lets go of an upload slower than a plain body may be ([`PartialUpload::is_slower_than`]);
    /// true when there was one.
    pub fn forget_if_slower_than(&self, stall: Duration, min_rate: u64) -> bool {
        let mut held = self.lock();
        let slow = held.as_ref().is_some_and(|upload| upload.is_slower_than(stall, min_rate));
        if slow {
            drop(held.take());
        }
        slow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_hashes_each_byte_once_and_matches_the_whole() {
        let mut upload = PartialUpload::new(1, 10);
        upload.bytes.extend_from_slice(b"0123");
        assert_eq!(upload.digest(), AnswerDigest::default().then(b"0123"));
        upload.bytes.extend_from_slice(b"456");
        assert_eq!(upload.digest(), AnswerDigest::default().then(b"0123456"));
        assert_eq!(upload.digest().len(), 7);
    }

    #[test]
    fn an_upload_is_let_go_when_slow_or_when_a_later_step_begins() {
        let held = Held::default();
        let mut upload = PartialUpload::new(3, 1 << 20);
        upload.bytes.extend_from_slice(&[0; 1024]);
        held.keep(upload);
        assert!(!held.forget_if_slower_than(Duration::from_secs(30), 16 * 1024), "in time");
        held.forget_before(3);
        assert!(held.take().is_some(), "its own step keeps it");
        let mut upload = PartialUpload::new(3, 1 << 20);
        upload.began -= Duration::from_secs(2);
        upload.bytes.extend_from_slice(&[0; 1024]);
        held.keep(upload);
        assert!(held.forget_if_slower_than(Duration::from_secs(1), 16 * 1024), "too slow");
        assert!(held.take().is_none());
        held.keep(PartialUpload::new(3, 10));
        held.forget_before(4);
        assert!(held.take().is_none(), "a later step lets it go");
    }
}
