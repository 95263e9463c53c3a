//! A session's last step as it moves to another process in a take-over: exported with its kept
//! bytes, imported there, and a turn that waited for a resume run to its end first.

use std::task::Poll;

use bytes::Bytes;
use http::StatusCode;

use super::{Live, NOBODY, Resumable, lock};
use crate::resume_kept::KeptPlace;

/// The last step of a session as it moves to another process in a take-over: its number,
/// status, whether its answer ended, and where its kept bytes stand (they go beside it).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct LastStep {
    /// The step.
    pub step: u64,
    /// Its answer's HTTP status.
    pub status: u16,
    /// Its answer ended.
    pub complete: bool,
    /// Where its kept bytes stand.
    pub kept: KeptPlace,
}

impl Resumable {
    /// The last step and its kept bytes, to move to another process; `None` while a turn runs.
    pub fn export(&self) -> Option<(LastStep, Vec<Bytes>)> {
        let state = lock(&self.state);
        if !matches!(state.live, Live::Idle) {
            return None;
        }
        let (kept, bytes) = state.kept.export();
        let (step, status, complete) = (state.step, state.status.as_u16(), state.complete);
        Some((LastStep { step, status, complete, kept }, bytes))
    }

    /// Takes the last step of a session that moved here ([`Self::export`]'s).
    pub fn import(&self, last: LastStep, bytes: Vec<u8>) {
        let mut state = lock(&self.state);
        state.step = last.step;
        state.status = StatusCode::from_u16(last.status).unwrap_or(StatusCode::OK);
        state.kept.import(last.kept, bytes);
        state.complete = false;
        if last.complete {
            state.finished();
        }
    }

    /// Runs a turn that waits for a resume to its end, its answer kept as it comes (within
    /// the window): a take-over moves the session once it is between turns, and the sidecar's
    /// resume reads the rest from what was kept. False when no turn waits.
    pub async fn finish_parked(&self) -> bool {
        let owner = {
            let mut state = lock(&self.state);
            let owner = state.new_owner();
            match &mut state.live {
                Live::Running { owner: current, .. } if *current == NOBODY => *current = owner,
                _ => return false,
            }
            owner
        };
        std::future::poll_fn(|cx| {
            loop {
                match self.poll_turn(owner, cx) {
                    Poll::Ready(Some(_)) => continue,
                    Poll::Ready(None) => return Poll::Ready(true),
                    Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await
    }
}
