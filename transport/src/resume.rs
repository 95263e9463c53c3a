//! Resuming a step after the sidecar's HTTP connection broke (Wi-Fi change, laptop sleep,
//! proxy restart). Each request of a session carries its step number; a step runs once. The
//! answer of the last step is kept (its last `resume_window` bytes), and its turn, when the
//! connection broke while it ran, is parked with the upstream link. The same step sent again
//! gets the answer from the byte the sidecar had, then the rest as it comes. The window
//! ([`DEFAULT_WINDOW`] unless configured) must exceed what the sockets and proxies between the
//! transport and the sidecar hold in flight.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::wire::AnswerDigest;
use http::StatusCode;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::relay::Turn;

/// Bytes of a step's answer kept for a resume unless `resume_window` says otherwise.
pub const DEFAULT_WINDOW: u64 = 8 << 20;

/// How long a resume waits for the turn still attached to the broken connection to let go.
const DETACH_WAIT: Duration = Duration::from_secs(5);

/// Locks a std mutex, recovering from poisoning (the state stays consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a request's step number asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepRequest {
    /// The next step: run it.
    Next(u64),
    /// The last step again, from this byte of its answer.
    Again {
        /// The step.
        step: u64,
        /// Bytes of its answer the sidecar already has.
        from: u64,
    },
}

/// The answer to a resumed step.
pub enum Resumed {
    /// The step had ended: the rest of its answer, whole, and the digest of what came before.
    Whole(StatusCode, Bytes, AnswerDigest),
    /// The step's turn still runs: what the sidecar missed, then the turn (detached again
    /// when `detach` is cancelled).
    Streamed {
        /// The turn, parked when the connection broke.
        turn: Box<Turn>,
        /// The answer's bytes the sidecar missed so far.
        missed: Bytes,
        /// Cancelled when a later resume takes the turn over.
        detach: CancellationToken,
        /// The digest of the answer's bytes before `missed`.
        before: AnswerDigest,
    },
}

/// Who has the running turn of the last step.
#[derive(Default)]
enum Live {
    /// No turn runs.
    #[default]
    Idle,
    /// A response streams it; cancel to make it let go.
    Attached(CancellationToken),
    /// Its connection broke: waiting for the resume.
    Parked(Box<Turn>),
}

/// The last step of a session and its answer.
struct State {
    step: u64,
    status: StatusCode,
    /// The answer's last bytes, in chunks, each with the digest of the answer before it;
    /// `base` is the offset of the first.
    chunks: VecDeque<(AnswerDigest, Bytes)>,
    base: u64,
    len: u64,
    /// The digest of the whole answer so far.
    digest: AnswerDigest,
    complete: bool,
    live: Live,
}

/// A session's last step, for resuming it.
pub struct Resumable {
    state: Mutex<State>,
    /// Bytes of an answer kept; 0: nothing is kept, no step is resumed.
    window: std::sync::atomic::AtomicU64,
    /// Told when a turn is parked.
    parked: Notify,
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
            chunks: VecDeque::new(),
            base: 0,
            len: 0,
            digest: AnswerDigest::default(),
            complete: false,
            live: Live::Idle,
        };
        Self { state: Mutex::new(state), window: DEFAULT_WINDOW.into(), parked: Notify::new() }
    }
}

impl Resumable {
    /// Keeps `bytes` of an answer (`resume_window`); 0 turns resuming off.
    pub fn set_window(&self, bytes: u64) {
        self.window.store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// True when answers are kept for a resume.
    pub fn is_on(&self) -> bool {
        self.window.load(std::sync::atomic::Ordering::Relaxed) > 0
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
            state.chunks.clear();
            state.base = 0;
            state.len = 0;
            state.digest = AnswerDigest::default();
            state.complete = false;
            std::mem::take(&mut state.live)
        };
        drop(abandoned);
        Ok(())
    }

    /// The step in progress is streamed by a response; cancelling the token makes it let go.
    pub fn attach(&self) -> CancellationToken {
        let token = CancellationToken::new();
        lock(&self.state).live = Live::Attached(token.clone());
        token
    }

    /// A chunk of the answer went out.
    pub fn record(&self, chunk: &Bytes) {
        let window = self.window.load(std::sync::atomic::Ordering::Relaxed);
        let mut state = lock(&self.state);
        state.len += chunk.len() as u64;
        let before = state.digest;
        state.digest.update(chunk);
        state.chunks.push_back((before, chunk.clone()));
        while state.chunks.len() > 1 {
            let first = state.chunks.front().map_or(0, |(_, c)| c.len() as u64);
            if state.len - (state.base + first) < window {
                break;
            }
            state.chunks.pop_front();
            state.base += first;
        }
    }

    /// The answer of the step in progress ended.
    pub fn complete(&self) {
        let mut state = lock(&self.state);
        state.complete = true;
        state.live = Live::Idle;
    }

    /// The step in progress was answered at once with `body` (not streamed).
    pub fn record_whole(&self, status: StatusCode, body: &Bytes) {
        let mut state = lock(&self.state);
        if state.complete || !matches!(state.live, Live::Idle) {
            return;
        }
        state.status = status;
        state.len = body.len() as u64;
        state.chunks.push_back((AnswerDigest::default(), body.clone()));
        state.digest = AnswerDigest::default().then(body);
        state.complete = true;
    }

    /// The connection streaming the turn broke (or a resume took it over): keep the turn.
    pub fn park(&self, turn: Box<Turn>) {
        lock(&self.state).live = Live::Parked(turn);
        self.parked.notify_waiters();
    }

    /// True while a turn waits parked for its step to be sent again.
    pub fn is_parked(&self) -> bool {
        matches!(lock(&self.state).live, Live::Parked(_))
    }

    /// Ends a parked turn (the session closes): its link is closed.
    pub fn abandon(&self) {
        let parked = {
            let mut state = lock(&self.state);
            match std::mem::take(&mut state.live) {
                Live::Parked(turn) => Some(turn),
                other => {
                    state.live = other;
                    None
                }
            }
        };
        // Dropped outside the lock: closing its link may take a moment.
        drop(parked);
    }

    /// Step `step` again, from byte `from` of its answer.
    pub async fn resume(&self, step: u64, from: u64) -> Result<Resumed, Error> {
        loop {
            let parked = self.parked.notified();
            tokio::pin!(parked);
            parked.as_mut().enable();
            {
                let mut state = lock(&self.state);
                if step != state.step {
                    return Err(Error::StepRefused(format!(
                        "step {step} cannot be resumed: the last step is {}",
                        state.step
                    )));
                }
                match std::mem::take(&mut state.live) {
                    Live::Attached(token) => {
                        token.cancel();
                        state.live = Live::Attached(token);
                    }
                    Live::Parked(turn) => {
                        let (missed, before) = match missed(&state, from) {
                            Ok(missed) => missed,
                            Err(e) => {
                                state.live = Live::Parked(turn);
                                return Err(e);
                            }
                        };
                        let detach = CancellationToken::new();
                        state.live = Live::Attached(detach.clone());
                        return Ok(Resumed::Streamed { turn, missed, detach, before });
                    }
                    Live::Idle if state.complete => {
                        return missed(&state, from)
                            .map(|(m, before)| Resumed::Whole(state.status, m, before));
                    }
                    Live::Idle => {
                        return Err(Error::StepRefused(format!(
                            "step {step} has no answer to resume"
                        )));
                    }
                }
            }
            if tokio::time::timeout(DETACH_WAIT, parked).await.is_err() {
                return Err(Error::SessionBusy);
            }
        }
    }
}

/// The answer's bytes from `from` on, and the digest of those before.
fn missed(state: &State, from: u64) -> Result<(Bytes, AnswerDigest), Error> {
    if from < state.base || from > state.len {
        return Err(Error::StepRefused(format!(
            "the answer cannot be resumed from byte {from}: {} to {} are kept",
            state.base, state.len
        )));
    }
    let mut skip = from - state.base;
    let mut out = BytesMut::new();
    let mut before = state.digest;
    for (digest, chunk) in &state.chunks {
        let len = chunk.len() as u64;
        if skip >= len {
            skip -= len;
            continue;
        }
        if out.is_empty() {
            before = digest.then(&chunk[..skip as usize]);
        }
        out.extend_from_slice(&chunk[skip as usize..]);
        skip = 0;
    }
    Ok((out.freeze(), before))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resumed_bytes(r: &Resumable, step: u64, from: u64) -> Result<Bytes, String> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let rt = rt.map_err(|e| e.to_string())?;
        match rt.block_on(r.resume(step, from)) {
            Ok(Resumed::Whole(_, bytes, before)) => {
                assert_eq!(before.len(), from, "the digest covers the bytes before the resume");
                Ok(bytes)
            }
            Ok(Resumed::Streamed { .. }) => Err("streamed".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn steps_run_in_order_and_once() {
        let r = Resumable::default();
        assert!(r.begin(2).is_ok(), "step 1 was refused before it began");
        assert!(r.begin(2).is_err(), "a step never runs twice");
        assert!(r.begin(1).is_err(), "nor an older one");
        assert!(r.begin(3).is_ok());
    }

    #[test]
    fn a_whole_answer_resumes_from_any_byte() {
        let r = Resumable::default();
        assert!(r.begin(1).is_ok());
        r.record_whole(StatusCode::OK, &Bytes::from_static(b"hello world"));
        assert_eq!(resumed_bytes(&r, 1, 0), Ok(Bytes::from_static(b"hello world")));
        assert_eq!(resumed_bytes(&r, 1, 6), Ok(Bytes::from_static(b"world")));
        assert_eq!(resumed_bytes(&r, 1, 11), Ok(Bytes::new()));
        assert!(resumed_bytes(&r, 1, 12).is_err());
        assert!(resumed_bytes(&r, 2, 0).is_err(), "not the last step");
    }

    #[test]
    fn only_the_window_is_kept() {
        let r = Resumable::default();
        assert!(r.begin(1).is_ok());
        let chunk = Bytes::from(vec![7u8; 1 << 20]);
        for _ in 0..12 {
            r.record(&chunk);
        }
        r.complete();
        let kept = lock(&r.state).base;
        // (the default window: 8 MiB)
        assert_eq!(kept, 4 << 20, "the oldest 4 of 12 MiB are dropped");
        assert!(resumed_bytes(&r, 1, 0).is_err(), "too far behind");
        assert_eq!(resumed_bytes(&r, 1, 11 << 20).map(|b| b.len()), Ok(1 << 20));
    }
}
