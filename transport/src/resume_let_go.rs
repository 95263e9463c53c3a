//! A session's finished answer let go for another session's step that found no room
//! (`resume_idle`), unless a step of its runs, a resume reads it, or it is fresher than others.

use std::sync::TryLockError;

use super::{Live, Resumable};
use crate::resume_idle::{Reclaim, Reclaimed};

impl Reclaim for Resumable {
    fn reclaim(&self) -> Reclaimed {
        let mut state = match self.state.try_lock() {
            Ok(state) => state,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Reclaimed::Busy,
        };
        if !matches!(state.live, Live::Idle) || state.reading {
            return Reclaimed::Busy;
        }
        if state.finishes.0 != state.finishes.1 {
            state.finishes.1 = state.finishes.0;
            return Reclaimed::Fresh;
        }
        state.listed = false;
        if !state.complete || state.kept.is_empty() {
            return Reclaimed::Empty;
        }
        // Hashed as it goes: a resume from the answer's end (nothing lost) still works.
        state.kept.forget();
        Reclaimed::Freed
    }
}
