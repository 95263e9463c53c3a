//! The running process's side of a take-over: its door (`take_over_socket`, 0600, its own
//! user only), and the hand-over: listeners first, then each session between turns.

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tracing::{info, warn};

use super::channel::Channel;
use super::leaving::{self, Leave};
use super::{Message, VERSION, next, unexpected};
use crate::state::AppState;

/// Pause between two rounds over the sessions still in a turn.
const ROUND_PAUSE: Duration = Duration::from_millis(2);
/// Sessions sent before their acknowledgements are read.
const BATCH: usize = 32;

/// The door a new process knocks at.
#[derive(Debug)]
pub struct Door {
    listener: UnixListener,
}

impl Door {
    /// Opens the door at `path`, created 0600. A live transport already there is an error
    /// unless `replace` (a process that took that one over); a socket file left by a dead one
    /// is replaced.
    pub fn open(path: &Path, replace: bool) -> std::io::Result<Self> {
        if !replace && std::os::unix::net::UnixStream::connect(path).is_ok() {
            let e = format!("a running transport already listens on {}", path.display());
            return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, e));
        }
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        info!(path = %path.display(), "take-over socket open");
        Ok(Self { listener })
    }

    /// The next knock of a process of this user (others are turned away, and logged).
    pub async fn knock(&self) -> Channel {
        let me = rustix::process::getuid();
        loop {
            let Ok((socket, _)) = self.listener.accept().await else { continue };
            match rustix::net::sockopt::socket_peercred(&socket) {
                Ok(peer) if peer.uid == me => return Channel::new(socket),
                Ok(peer) => warn!(uid = peer.uid.as_raw(), "a take-over from another user refused"),
                Err(e) => warn!(error = %e, "a take-over whose user is unknown refused"),
            }
        }
    }

    /// Hands each knock to the receiver, until it is dropped; then the door closes. (The
    /// socket file is left: a process that took this one over opened its own there.)
    pub fn serve(self) -> tokio::sync::mpsc::Receiver<Channel> {
        let (knocks, received) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            loop {
                let channel = tokio::select! {
                    channel = self.knock() => channel,
                    () = knocks.closed() => return,
                };
                if knocks.send(channel).await.is_err() {
                    return;
                }
            }
        });
        received
    }
}

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

/// Why a hand-over stopped: before the listeners left (`early`), nothing changed.
#[derive(Debug)]
pub struct Failed {
    /// True when it failed before the new process accepted connections.
    pub early: bool,
    /// The cause.
    pub error: std::io::Error,
}

/// Hands this process's listeners and sessions to the process at `channel`. Once the new
/// process accepts, `closing` is cancelled (connections close after their answer in
/// progress) and each session moves at its turn's end, for `shutdown_grace` at most. A
/// failure leaves the sessions not yet taken here.
pub async fn hand_over(
    mut channel: Channel,
    state: &Arc<AppState>,
    listeners: (&TcpListener, Option<&TcpListener>),
    closing: &tokio_util::sync::CancellationToken,
) -> Result<Report, Failed> {
    let early = |error| Failed { early: true, error };
    match next(&mut channel).await.map_err(early)? {
        Message::Hello { version } if version >= VERSION => {}
        Message::Hello { version } => {
            let reason = format!("version {version} cannot take over from version {VERSION}");
            drop(channel.send(&Message::Refused { reason: reason.clone() }, &[]).await);
            return Err(early(std::io::Error::other(reason)));
        }
        _ => return Err(early(unexpected())),
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
    let late = |error| {
        state.handover.set_leaving(false);
        Failed { early: false, error }
    };
    let deadline = tokio::time::Instant::now() + state.config().shutdown_grace;
    let mut report = Report::default();
    let (mut stay, mut finishing) = (HashSet::new(), HashSet::new());
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let mut waiting = 0;
        for session in state.sessions.all() {
            if stay.contains(&session.id) {
                continue;
            }
            // Its sidecar's keep-alives go to the new process now, which vouches for it: a
            // session waiting to move is not silent (a parked one stays parked).
            if !session.is_parked() {
                session.touch();
            }
            // A turn waiting for a resume runs to its end here, its answer kept: the
            // sidecar's resume, sent to the new process, reads it there.
            if session.resume.is_parked() && finishing.insert(session.id.clone()) {
                let session = session.clone();
                tokio::spawn(async move { session.resume.finish_parked().await });
            }
            match leaving::take_apart(state, &session) {
                Leave::Going(going) => batch.push(*going),
                Leave::Stays => drop(stay.insert(session.id.clone())),
                Leave::Busy => waiting += 1,
            }
            if batch.len() >= BATCH {
                report.moved +=
                    leaving::send(&mut channel, state, batch.split_off(0)).await.map_err(late)?;
            }
        }
        let sent = leaving::send(&mut channel, state, batch.split_off(0)).await.map_err(late)?;
        report.moved += sent;
        // Done after a round that found nothing to move nor to wait for (a session whose
        // open was under way when this began may still have come in during the last one).
        let idle = waiting == 0 && sent == 0 && state.sessions.len() <= stay.len();
        if idle || tokio::time::Instant::now() >= deadline {
            report.stayed = (stay.len() + waiting) as u64;
            report.finished = finishing.len() as u64;
            break;
        }
        tokio::time::sleep(ROUND_PAUSE).await;
    }
    let done = Message::Done { moved: report.moved, stayed: report.stayed };
    channel.send(&done, &[]).await.map_err(late)?;
    Ok(report)
}
