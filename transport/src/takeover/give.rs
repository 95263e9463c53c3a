//! The running process's side of a take-over: listeners first, then each session between
//! turns, in batches (`leaving.rs`). Once the new process accepts, this one opens no session
//! and begins no step. If the take-over breaks after that, who goes on is decided by
//! whether the new process lives: alive, it keeps the listener and what it took, and this
//! one ends what it still holds, as at a shutdown; gone (or silent, and then stopped), this
//! one accepts again and keeps what it had not sent, and the sessions the new process had
//! taken end, said gone to their sidecars. One upstream connection is never used by both.

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tracing::{info, warn};

use super::door::Knock;
use super::leaving::{self, Broke, Leave};
use super::{Message, VERSION, next, unexpected};
use crate::identity::IdentityId;
use crate::state::AppState;

/// Pause between two rounds over the sessions still in a turn.
const ROUND_PAUSE: Duration = Duration::from_millis(2);
/// Sessions sent before their acknowledgements are read.
const BATCH: usize = 32;
/// How long a new process stopped for its silence has to be gone.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// How long a new process that broke the channel has to be gone, else it lives on.
const EXIT_WAIT: Duration = Duration::from_secs(1);

/// What a hand-over did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Report {
    /// Sessions moved.
    pub moved: u64,
    /// Sessions that stayed (over TLS, or a turn past the bound): they end as at a shutdown.
    pub stayed: u64,
    /// Turns that waited for a resume, run to their end here before their session moved.
    pub finished: u64,
}

/// How a hand-over failed.
#[derive(Debug)]
pub enum Failed {
    /// Before the new process accepted: nothing changed.
    Early(std::io::Error),
    /// After: the new process is gone, the sessions it had taken ended, and this one serves
    /// on (its connections were asked to close).
    RolledBack(std::io::Error),
    /// After: the new process lives and goes on; this one ends what it still holds.
    Abandoned(std::io::Error),
}

/// Hands this process's listeners and sessions to the process that knocked. Once the new
/// process accepts, `closing` is cancelled (connections close after their answer in
/// progress) and each session moves at its turn's end, for `shutdown_grace` at most.
pub async fn hand_over(
    knock: Knock,
    state: &Arc<AppState>,
    listeners: (&TcpListener, Option<&TcpListener>),
    closing: &tokio_util::sync::CancellationToken,
) -> Result<Report, Failed> {
    let Knock { mut channel, version } = knock;
    let early = Failed::Early;
    if version < VERSION {
        let reason = format!("version {version} cannot take over from version {VERSION}");
        drop(channel.send(&Message::Refused { reason: reason.clone() }, &[]).await);
        return Err(early(std::io::Error::other(reason)));
    }
    let mut fds = vec![listeners.0.as_fd()];
    fds.extend(listeners.1.map(AsFd::as_fd));
    let sent = Message::Listeners { version: VERSION, metrics: listeners.1.is_some() };
    channel.send(&sent, &fds).await.map_err(early)?;
    if !matches!(next(&mut channel).await.map_err(early)?, Message::Serving) {
        return Err(early(unexpected()));
    }
    info!(sessions = state.sessions.len(), "a new process took the listeners: moving sessions");
    // From here no session opens and no step begins here: each goes to the new process.
    state.handover.set_leaving(true);
    closing.cancel();
    let deadline = tokio::time::Instant::now() + state.config().shutdown_grace;
    let mut report = Report::default();
    let mut moved = Vec::new();
    let (mut stay, mut finishing) = (HashSet::new(), HashSet::new());
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let (mut waiting, mut sent_now) = (0, 0);
        let sessions = state.sessions.all();
        for (i, session) in sessions.iter().enumerate() {
            if stay.contains(&session.id) {
                continue;
            }
            // Its sidecar's keep-alives go to the new process now, which vouches for it: a
            // session waiting to move is not silent (a parked one stays parked).
            if !session.is_parked() {
                session.touch(std::time::Instant::now());
            }
            // A turn waiting for a resume runs to its end here, its answer kept: the
            // sidecar's resume, sent to the new process, reads it there.
            if session.resume.is_parked() && finishing.insert(session.id.clone()) {
                let session = session.clone();
                tokio::spawn(async move { session.resume.finish_parked().await });
            }
            match leaving::take_apart(state, session) {
                Leave::Going(going) => batch.push(*going),
                Leave::Stays => drop(stay.insert(session.id.clone())),
                Leave::Busy => waiting += 1,
            }
            if batch.len() >= BATCH || (i + 1 == sessions.len() && !batch.is_empty()) {
                match leaving::send(&mut channel, state, batch.split_off(0)).await {
                    Ok(sent) => {
                        sent_now += sent.moved.len();
                        moved.extend(sent.moved);
                        stay.extend(sent.stayed);
                    }
                    Err(broke) => return Err(broke_off(state, &channel, moved, broke).await),
                }
            }
        }
        // Done after a round that found nothing to move nor to wait for (a session whose
        // open was under way when this began may still have come in during the last one).
        let idle = waiting == 0 && sent_now == 0 && state.sessions.len() <= stay.len();
        if idle || tokio::time::Instant::now() >= deadline {
            report.stayed = (stay.len() + waiting) as u64;
            report.finished = finishing.len() as u64;
            break;
        }
        tokio::time::sleep(ROUND_PAUSE).await;
    }
    report.moved = moved.len() as u64;
    let done = Message::Done { moved: report.moved, stayed: report.stayed };
    if let Err(error) = channel.send(&done, &[]).await {
        let broke = Broke { error, unacknowledged: Vec::new() };
        return Err(broke_off(state, &channel, moved, broke).await);
    }
    Ok(report)
}

/// The take-over broke after the new process began accepting: if it lives, it goes on, and
/// this one ends what it holds; if it is gone (or went silent and, not being this very
/// process, was stopped), the sessions it had taken end, said gone, and this one serves on.
async fn broke_off(
    state: &AppState,
    channel: &super::channel::Channel,
    moved: Vec<(String, IdentityId)>,
    broke: Broke,
) -> Failed {
    let peer = channel.peer();
    let me = rustix::process::getpid();
    if broke.error.kind() == std::io::ErrorKind::TimedOut && peer != me && alive(peer) {
        warn!(pid = peer.as_raw_nonzero().get(), "the new process went silent: stopping it");
        if let Err(e) = rustix::process::kill_process(peer, rustix::process::Signal::KILL) {
            warn!(error = %e, "the new process could not be stopped");
        }
        let stopping = tokio::time::Instant::now() + STOP_WAIT;
        while alive(peer) && tokio::time::Instant::now() < stopping {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // A process that broke the channel by dying may still be on its way out: it gets a
    // moment to be gone.
    let settling = tokio::time::Instant::now() + EXIT_WAIT;
    while alive(peer) && tokio::time::Instant::now() < settling {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if alive(peer) {
        return Failed::Abandoned(broke.error);
    }
    let lost = moved.len() + broke.unacknowledged.len();
    for (id, owner) in moved.into_iter().chain(broke.unacknowledged) {
        state.handover.unmark_moved(&id);
        state.session_ended(&id, &owner, false);
    }
    state.handover.set_leaving(false);
    warn!(lost, "the new process is gone: its sessions ended, this process serves on");
    Failed::RolledBack(broke.error)
}

/// True while process `pid` runs (not a zombie waiting to be reaped).
fn alive(pid: rustix::process::Pid) -> bool {
    if rustix::process::test_kill_process(pid).is_err() {
        return false;
    }
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero()));
    // The state follows the command's closing parenthesis: `Z` is a zombie.
    stat.map_or(true, |s| s.rsplit_once(") ").is_none_or(|(_, rest)| !rest.starts_with('Z')))
}
