//! Resuming a step after the sidecar's HTTP connection broke (Wi-Fi change, laptop sleep,
//! proxy restart). Each request of a session carries its step number; a step runs once. The
//! answer of the last step is kept (its last `resume_window` bytes, [`KeptAnswer`]), and its
//! running turn lives here, not in the response that streams it: the same step sent again
//! takes the turn over at once, whatever became of the old response (gone, or stuck writing to
//! a peer that vanished), and gets the answer from the byte the sidecar had, then the rest as
//! it comes. The window ([`DEFAULT_RESUME_WINDOW`] unless
//! configured) must exceed what the sockets and proxies between the two hold in flight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use common::wire::AnswerDigest;
use http::StatusCode;

use crate::Error;
use crate::config::DEFAULT_RESUME_WINDOW;
use crate::relay::Turn;
use crate::resume_idle::Reclaim;
use crate::resume_kept::{KeptAnswer, KeptChunk};
use crate::resume_room::ResumeRoom;

#[path = "resume_let_go.rs"]
mod let_go;
#[path = "resume_moved.rs"]
mod moved;
pub use moved::LastStep;

/// The owner of a turn whose response is gone: the turn waits for its step to come again.
const NOBODY: u64 = 0;

/// Locks a std mutex, recovering from poisoning (the state stays consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The answer to a resumed step.
#[derive(Debug)]
pub enum Resumed {
    /// The step had ended: the rest of its answer from byte `from`, read by `owner` from the
    /// kept bytes ([`Resumable::kept_chunk`], until a later resume), and the digest of what
    /// came before.
    Whole(StatusCode, u64, u64, AnswerDigest),
    /// The step's turn still runs, now owned by `owner`: what the sidecar missed, from the
    /// kept bytes, then the rest of the turn.
    Streamed {
        /// The new owner of the turn ([`Resumable::poll_turn`]).
        owner: u64,
        /// The answer's first byte the sidecar missed.
        from: u64,
        /// The digest of the answer's bytes before `from`.
        before: AnswerDigest,
    },
}

/// The running turn of the last step, if any.
#[derive(Default)]
enum Live {
    /// No turn runs.
    #[default]
    Idle,
    /// The turn runs, streamed by the response `owner` ([`NOBODY`] when that one is gone).
    Running {
        /// The turn.
        turn: Box<Turn>,
        /// Who streams it.
        owner: u64,
        /// The owner's task while it waits for the turn: woken when a resume takes the turn
        /// over, so that it ends (its response may be stuck on a connection nobody reads).
        waiting: Option<Waker>,
    },
}

/// The last step of a session and its answer.
struct State {
    step: u64,
    status: StatusCode,
    /// The answer's last bytes, kept for a resume.
    kept: KeptAnswer,
    complete: bool,
    live: Live,
    /// The last owner handed out.
    owners: u64,
    /// The response that last began sending the step's answer: an earlier one that sends
    /// kept bytes stops at its next chunk, so resumes never pile up.
    reader: u64,
    /// The session is on its budget's list of finished answers that may be let go.
    listed: bool,
    /// Answers finished with bytes kept, and how many had when it was put at the list's back.
    finishes: (u64, u64),
    /// A resumed response reads the kept bytes of a finished answer now: they are not let go
    /// meanwhile.
    reading: bool,
    /// Itself, as that list holds it.
    me: Weak<Resumable>,
}

impl State {
    fn new_owner(&mut self) -> u64 {
        self.owners += 1;
        self.owners
    }

    /// The step's answer is whole: while it keeps bytes, a step of another session that finds
    /// no room may let them go (`resume_idle`).
    fn finished(&mut self) {
        self.complete = true;
        if !self.kept.is_empty() {
            // Listed once: a session's later answers only count as news (and move it to the
            // back when a search comes to it).
            self.finishes.0 += 1;
            let holder = (!self.listed).then(|| self.me.clone() as Weak<dyn Reclaim>);
            if holder.is_some() {
                self.finishes.1 = self.finishes.0;
            }
            self.kept.room().finished(holder);
            self.listed = true;
        }
    }
}

/// A session's last step, for resuming it.
pub struct Resumable {
    state: Mutex<State>,
    /// Bytes of an answer kept; 0: nothing is kept, no step is resumed.
    window: AtomicU64,
}

impl std::fmt::Debug for Resumable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resumable").field("step", &lock(&self.state).step).finish_non_exhaustive()
    }
}

impl Default for Resumable {
    fn default() -> Self {
        let state = State {
            step: 0,
            status: StatusCode::OK,
            kept: KeptAnswer::new(ResumeRoom::unlimited()),
            complete: false,
            live: Live::Idle,
            owners: NOBODY,
            reader: NOBODY,
            listed: false,
            finishes: (0, 0),
            reading: false,
            me: Weak::new(),
        };
        Self { state: Mutex::new(state), window: DEFAULT_RESUME_WINDOW.into() }
    }
}

impl Resumable {
    /// Keeps `bytes` of an answer (`resume_window`); 0 turns resuming off.
    pub fn set_window(&self, bytes: u64) {
        self.window.store(bytes, Ordering::Relaxed);
    }

    /// Takes the room for kept answers from `budget` (the transport's `max_resume_bytes`,
    /// within the session's identity's share).
    pub fn set_budget(self: &Arc<Self>, budget: ResumeRoom) {
        let mut state = lock(&self.state);
        state.kept.set_budget(budget);
        state.me = Arc::downgrade(self);
    }

    /// True when answers are kept for a resume.
    pub fn is_on(&self) -> bool {
        self.window.load(Ordering::Relaxed) > 0
    }

    /// The last step begun (0 before the first).
    pub fn last_step(&self) -> u64 {
        lock(&self.state).step
    }

    /// Step `step` begins: it must come after the last one. Called where the step can no longer fail
    /// without effect (its packets are about to be written upstream).
    pub fn begin(&self, step: u64) -> Result<(), Error> {
        let abandoned = {
            let mut state = lock(&self.state);
            // Steps only go up (one the transport refused never began): none runs twice.
            if step <= state.step {
                return Err(Error::StepRefused(format!(
                    "step {step} after step {}: steps run in order, once",
                    state.step
                )));
            }
            state.step = step;
            state.status = StatusCode::OK;
            state.kept.restart();
            // A response still sending the last step's kept bytes stops at its next chunk.
            (state.reader, state.reading) = (NOBODY, false);
            state.complete = false;
            std::mem::take(&mut state.live)
        };
        drop(abandoned);
        Ok(())
    }

    /// The turn of the step in progress is kept here; answers its owner, which streams it
    /// with [`Self::poll_turn`].
    pub fn attach(&self, turn: Box<Turn>) -> u64 {
        let mut state = lock(&self.state);
        let owner = state.new_owner();
        state.live = Live::Running { turn, owner, waiting: None };
        state.reader = owner;
        owner
    }

    /// True while `owner`'s response is the last to have begun sending the step's answer.
    pub fn is_reader(&self, owner: u64) -> bool {
        lock(&self.state).reader == owner
    }

    /// The kept bytes from `from` on, up to the end of a chunk, for `owner`'s resumed
    /// response: read a chunk at a time, they stay the session's (within its budget), and a
    /// response nobody reads holds one at most. Gone once a later response began reading the
    /// step, or a new step began.
    pub fn kept_chunk(&self, owner: u64, from: u64) -> KeptChunk {
        let mut state = lock(&self.state);
        if state.reader != owner {
            return KeptChunk::Gone;
        }
        let chunk = state.kept.chunk_from(from);
        if !matches!(chunk, KeptChunk::Bytes(_)) {
            state.reading = false;
        }
        chunk
    }

    /// The next chunk of the turn for `owner`, recorded for a resume; `None` at its end, or
    /// once a resume took the turn over.
    pub fn poll_turn(&self, owner: u64, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let window = self.window.load(Ordering::Relaxed);
        let mut state = lock(&self.state);
        let Live::Running { turn, owner: current, waiting } = &mut state.live else {
            return Poll::Ready(None);
        };
        if *current != owner {
            return Poll::Ready(None);
        }
        let Poll::Ready(chunk) = turn.poll_chunk(cx) else {
            if !waiting.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waiting = Some(cx.waker().clone());
            }
            return Poll::Pending;
        };
        let finished = turn.is_finished();
        if let Some(chunk) = &chunk {
            state.kept.record(chunk, window);
        }
        let ended = finished.then(|| {
            state.finished();
            std::mem::take(&mut state.live)
        });
        drop(state);
        // A finished turn lets its link go, outside the lock.
        drop(ended);
        Poll::Ready(chunk)
    }

    /// True unless `owner` still streams a running turn.
    pub fn is_finished_for(&self, owner: u64) -> bool {
        !matches!(&lock(&self.state).live, Live::Running { owner: o, .. } if *o == owner)
    }

    /// The response of `owner` is gone (its connection broke): the turn waits for a resume.
    pub fn let_go(&self, owner: u64) {
        if let Live::Running { owner: current, .. } = &mut lock(&self.state).live
            && *current == owner
        {
            *current = NOBODY;
        }
    }

    /// The step in progress was answered at once with `body` (not streamed).
    pub fn record_whole(&self, status: StatusCode, body: &Bytes) {
        let mut state = lock(&self.state);
        if state.complete || !matches!(state.live, Live::Idle) {
            return;
        }
        state.status = status;
        state.kept.record(body, u64::MAX);
        state.finished();
    }

    /// True while a turn waits for its step to be sent again.
    pub fn is_parked(&self) -> bool {
        matches!(lock(&self.state).live, Live::Running { owner: NOBODY, .. })
    }

    /// Ends a turn that waits for a resume (the session closes, or the sidecar moved on): its
    /// link is closed.
    pub fn abandon(&self) {
        let parked = {
            let mut state = lock(&self.state);
            match std::mem::take(&mut state.live) {
                parked @ Live::Running { owner: NOBODY, .. } => Some(parked),
                other => {
                    state.live = other;
                    None
                }
            }
        };
        // Dropped outside the lock: closing its link may take a moment.
        drop(parked);
    }

    /// The session ends: the kept answer is freed and a turn waiting for a resume ends.
    pub fn release(&self) {
        {
            let mut state = lock(&self.state);
            state.kept.forget();
            (state.complete, state.reader, state.reading) = (false, NOBODY, false);
        }
        self.abandon();
    }

    /// Step `step` again, from byte `from` of its answer. A running turn is taken over at
    /// once: the response that streamed it ends at its next chunk.
    pub fn resume(&self, step: u64, from: u64) -> Result<Resumed, Error> {
        let mut state = lock(&self.state);
        if step != state.step {
            return Err(Error::StepRefused(format!(
                "step {step} cannot be resumed: the last step is {}",
                state.step
            )));
        }
        if matches!(state.live, Live::Running { .. }) {
            let before = state.kept.before(from)?;
            let owner = state.new_owner();
            state.reader = owner;
            let mut replaced = None;
            if let Live::Running { owner: current, waiting, .. } = &mut state.live {
                *current = owner;
                replaced = waiting.take();
            }
            drop(state);
            // The previous owner ends now, not at a next chunk it will never be woken for.
            if let Some(previous) = replaced {
                previous.wake();
            }
            return Ok(Resumed::Streamed { owner, from, before });
        }
        if !state.complete {
            // Begun and not answered yet: its turn may be being set up (the upstream written
            // to), which the caller can tell (`steps::resume`); busy until then.
            return Err(Error::SessionBusy);
        }
        let before = state.kept.before(from)?;
        let owner = state.new_owner();
        (state.reader, state.reading) = (owner, true);
        Ok(Resumed::Whole(state.status, owner, from, before))
    }
}

impl Drop for Resumable {
    /// The room of what was kept goes back to the budget.
    fn drop(&mut self) {
        lock(&self.state).kept.release();
    }
}

#[cfg(test)]
#[path = "resume_tests.rs"]
mod tests;
