//! One turn of a relayed conversation: the upstream's answer, read from its socket and passed
//! on as `Packets` frames while the framing looks for its end, then a `Turn` frame. Driven by
//! whoever polls the HTTP response body: no task and no channel of its own.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use common::rare::RareWait;
use common::wire::{FRAMING_OVERHEAD, TurnEnd, encode_heartbeat, encode_packets, encode_turn};
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::framing::{Framing, Tally};
use super::link::{Phase, READ_CHUNK, RelayLink};
use common::mysql::packets::PacketHead;

/// Who uses a session's link: one turn at a time, and between turns its idle watcher
/// (`idle_watch.rs`), which holds it only for a read that does not wait.
#[derive(Debug, Default)]
pub struct LinkUse {
    /// A turn holds (or is about to hold) the link.
    pub in_turn: AtomicBool,
    /// The idle watcher's wake-up, once it listened: each turn's end registers it with the
    /// link's socket.
    pub watcher: OnceLock<Waker>,
    /// The last answer's status said a transaction is open (its locks are held).
    pub in_transaction: AtomicBool,
    /// The login is done: the session has a client's state (a session opened ahead has not).
    pub logged_in: AtomicBool,
    /// The upstream waits for the client mid-exchange (a LOAD DATA LOCAL file, an auth step).
    pub awaiting_client: AtomicBool,
}

/// A session's upstream link, held for one turn; letting go of it has the idle watcher woken
/// when the upstream speaks.
pub struct LinkGuard {
    guard: OwnedMutexGuard<Option<RelayLink>>,
    link_use: Arc<LinkUse>,
}

impl LinkGuard {
    /// Who uses the link (the session's record of it).
    pub fn link_use(&self) -> &LinkUse {
        &self.link_use
    }

    /// Holds the link for a turn.
    pub fn new(guard: OwnedMutexGuard<Option<RelayLink>>, link_use: Arc<LinkUse>) -> Self {
        Self { guard, link_use }
    }
}

impl Deref for LinkGuard {
    type Target = Option<RelayLink>;
    fn deref(&self) -> &Self::Target {
        &self.guard
    }
}

impl DerefMut for LinkGuard {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.guard
    }
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        self.link_use.in_turn.store(false, Ordering::Release);
        // The idle watcher is woken when the upstream speaks from here on (nothing is woken
        // now, per command), or at once when it has spoken or the link is closed; it waits
        // for the lock, so it reads once this guard is gone.
        if let Some(waker) = self.link_use.watcher.get()
            && self.guard.as_ref().is_none_or(|link| link.wake_when_readable(waker))
        {
            waker.wake_by_ref();
        }
    }
}

/// The answer of one turn, streamed as it arrives.
pub struct Turn {
    guard: LinkGuard,
    framing: Framing,
    heartbeat_every: Duration,
    /// Cancelled to cut the turn short (shutdown); a waiting turn is woken by the link's
    /// `cut_wait`.
    cut: Arc<CancellationToken>,
    /// One per answer, oldest first: each is told how its answer went once it ends (the last
    /// once the turn ends, however it ends).
    on_end: VecDeque<OnEnd>,
    /// Bytes of the answer passed on so far.
    passed: u64,
    /// Bytes of the answers already reported (a pipelined batch's earlier answers).
    reported: u64,
    finished: bool,
}

/// What a turn reports when it ends. (The turn knows no session: whoever made it logs, with
/// the session's id.)
pub type OnEnd = Box<dyn FnOnce(TurnReport) + Send>;

/// How a turn went.
#[derive(Debug)]
pub struct TurnReport {
    /// Bytes of the answer passed on.
    pub bytes: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// What the answer said (rows, affected rows, error, statement id).
    pub tally: Tally,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The answer ended; whose turn it is next.
    Ended(TurnEnd),
    /// The upstream closed or broke the connection mid-answer (the reason).
    UpstreamLost(String),
    /// The upstream sent something that is not an answer; the connection was closed.
    NotUnderstood(String),
    /// Cut short by a shutdown.
    Cut,
    /// Dropped before its end (the sidecar went away); the connection was closed.
    Abandoned,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn").field("finished", &self.finished).finish_non_exhaustive()
    }
}

impl Turn {
    /// A turn reading the answer `framing` describes from the link in `guard`, until it ends
    /// or `cut` is cancelled.
    pub fn new(
        mut guard: LinkGuard,
        framing: Framing,
        heartbeat_every: Duration,
        cut: Arc<CancellationToken>,
    ) -> Self {
        if let Some(link) = guard.as_mut() {
            put_off_heartbeat(link, heartbeat_every);
        }
        Self {
            guard,
            framing,
            heartbeat_every,
            cut,
            on_end: VecDeque::new(),
            passed: 0,
            reported: 0,
            finished: false,
        }
    }

    /// Calls each of `hooks` when its answer ends, in order (given before the turn is
    /// polled: one per answer it carries).
    pub fn on_end(&mut self, hooks: Vec<OnEnd>) {
        if self.on_end.is_empty() {
            self.on_end = VecDeque::from(hooks);
        } else {
            self.on_end.extend(hooks);
        }
    }

    /// Reports the answers of a pipelined batch that ended before its last.
    fn report_answered(&mut self) {
        for answered in self.framing.take_answered() {
            let bytes = answered.end.saturating_sub(self.reported);
            self.reported = answered.end;
            if let Some(on_end) = self.on_end.pop_front() {
                let outcome = Outcome::Ended(TurnEnd::Done);
                on_end(TurnReport { bytes, outcome, tally: answered.tally });
            }
        }
    }

    /// Marks the turn over and reports it: the current answer with `outcome` and what it
    /// said, and the answers of a batch that never came with `outcome` alone.
    fn report(&mut self, outcome: Outcome) {
        self.finished = true;
        self.report_answered();
        let (bytes, tally) = (self.passed.saturating_sub(self.reported), self.framing.tally);
        for (i, on_end) in self.on_end.drain(..).enumerate() {
            let (bytes, tally) = if i == 0 { (bytes, tally) } else { (0, Tally::default()) };
            on_end(TurnReport { bytes, outcome: outcome.clone(), tally });
        }
    }

    /// True once the turn has ended (nothing more to poll).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The next chunk of frames; `None` once the turn has ended.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if self.finished {
            return Poll::Ready(None);
        }
        loop {
            if self.is_cut(cx) {
                return Poll::Ready(Some(self.cut_short()));
            }
            let Some(link) = self.guard.as_mut() else {
                self.report(Outcome::UpstreamLost("already closed".into()));
                return Poll::Ready(Some(turn_frame(TurnEnd::Closed)));
            };
            let mut out = BytesMut::new();
            if !link.rbuf.is_empty() {
                match self.framing.scan(&link.rbuf) {
                    Ok(scan) => {
                        if scan.used > 0 {
                            // One buffer for the packets and the turn's end, when it is here.
                            out.reserve(scan.used + FRAMING_OVERHEAD);
                            encode_packets(&mut out, &link.rbuf[..scan.used]);
                            link.rbuf.advance(scan.used);
                            self.passed += scan.used as u64;
                        }
                        self.report_answered();
                        if let Some(end) = scan.end {
                            return Poll::Ready(Some(self.last_chunk(out, Outcome::Ended(end))));
                        }
                    }
                    Err(e) => {
                        // Answers that ended in what could not be passed on are not reported.
                        drop(self.framing.take_answered());
                        let outcome = Outcome::NotUnderstood(e.to_string());
                        return Poll::Ready(Some(self.last_chunk(out, outcome)));
                    }
                }
            }
            if !out.is_empty() {
                self.rearm_heartbeat();
                return Poll::Ready(Some(out.freeze()));
            }
            let Some(link) = self.guard.as_mut() else { continue };
            if link.rbuf.capacity() - link.rbuf.len() < READ_CHUNK / 4 {
                link.rbuf.reserve(READ_CHUNK);
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut link.stream), cx, &mut link.rbuf) {
                Poll::Ready(Ok(0)) => {
                    let outcome = Outcome::UpstreamLost("closed".into());
                    return Poll::Ready(Some(self.last_chunk(out, outcome)));
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => {
                    let outcome = Outcome::UpstreamLost(e.to_string());
                    return Poll::Ready(Some(self.last_chunk(out, outcome)));
                }
                Poll::Pending => {
                    // The cut's wait was polled at the top of the loop: it wakes this task.
                    while let Poll::Ready(()) = link.heartbeat.as_mut().poll(cx) {
                        match link.heartbeat.deadline() < link.heartbeat_due {
                            true => link.heartbeat.as_mut().reset(link.heartbeat_due),
                            false => break,
                        }
                    }
                    if !link.heartbeat.is_elapsed() {
                        return Poll::Pending;
                    }
                    put_off_heartbeat(link, self.heartbeat_every);
                    let mut hb = BytesMut::new();
                    encode_heartbeat(&mut hb);
                    return Poll::Ready(Some(hb.freeze()));
                }
            }
        }
    }

    /// Ends the turn at once: the client gets error 1053 (where a packet may go) and the
    /// upstream connection is closed.
    fn cut_short(&mut self) -> Bytes {
        self.report(Outcome::Cut);
        *self.guard = None;
        let mut out = BytesMut::new();
        if let (Some(seq), Some(payload)) =
            (self.framing.next_seq_at_boundary(), crate::Error::ShuttingDown.to_err_payload())
        {
            let mut packet = BytesMut::with_capacity(PacketHead::LEN + payload.len());
            PacketHead::write(&mut packet, payload.len(), seq);
            packet.extend_from_slice(&payload);
            encode_packets(&mut out, &packet);
        }
        encode_turn(&mut out, TurnEnd::Closed);
        out.freeze()
    }

    /// True once the session's cut came. Its wait, kept on the link, registers this task and
    /// is checked without a lock until it wakes it.
    fn is_cut(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(link) = self.guard.as_mut() else { return self.cut.is_cancelled() };
        let cut = &self.cut;
        let wait =
            link.cut_wait.get_or_insert_with(|| RareWait::new((**cut).clone().cancelled_owned()));
        Pin::new(wait).poll(cx).is_ready()
    }

    fn rearm_heartbeat(&mut self) {
        if let Some(link) = self.guard.as_mut() {
            put_off_heartbeat(link, self.heartbeat_every);
        }
    }

    /// The turn's last chunk: the frames in `out`, then its `Turn` frame; reports the
    /// outcome and leaves the link as the next request must find it.
    fn last_chunk(&mut self, mut out: BytesMut, outcome: Outcome) -> Bytes {
        let end = match &outcome {
            Outcome::Ended(end) => *end,
            _ => TurnEnd::Closed,
        };
        let extra = self.guard.as_ref().map_or(0, |link| link.rbuf.len());
        self.report(outcome);
        match end {
            TurnEnd::Closed => *self.guard = None,
            TurnEnd::AwaitFile | TurnEnd::AwaitAuth => {
                self.guard.link_use.awaiting_client.store(true, Ordering::Release);
                if let Some(link) = self.guard.as_mut() {
                    link.pending = Some(self.framing.clone());
                    link.last_seq = self.framing.last_seq();
                }
            }
            TurnEnd::Done => {
                self.guard.link_use.awaiting_client.store(false, Ordering::Release);
                if let Some(status) = self.framing.tally.status {
                    let open = status & common::mysql::status::IN_TRANS != 0;
                    self.guard.link_use.in_transaction.store(open, Ordering::Release);
                }
                self.guard.link_use.logged_in.store(true, Ordering::Release);
                if let Some(link) = self.guard.as_mut() {
                    link.phase = Phase::Ready;
                    if extra > 0 {
                        let session = &*link.session;
                        warn!(session, bytes = extra, "upstream sent more than its answer");
                    }
                }
            }
        }
        encode_turn(&mut out, end);
        out.freeze()
    }
}

impl Drop for Turn {
    /// A turn abandoned half-way (the sidecar went away) leaves the conversation in an unknown
    /// state: the link cannot be used again.
    fn drop(&mut self) {
        if !self.finished {
            self.guard.take();
            self.report(Outcome::Abandoned);
        }
    }
}

fn turn_frame(end: TurnEnd) -> Bytes {
    let mut out = BytesMut::new();
    encode_turn(&mut out, end);
    out.freeze()
}

/// Puts the link's next heartbeat off to `every` from now: the timer is reset only when it
/// would be late (a lowered interval); else it is put off once due.
fn put_off_heartbeat(link: &mut RelayLink, every: Duration) {
    link.heartbeat_due = Instant::now() + every;
    if link.heartbeat.deadline() > link.heartbeat_due {
        link.heartbeat.as_mut().reset(link.heartbeat_due);
    }
}
