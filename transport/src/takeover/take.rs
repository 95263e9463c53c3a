//! The new process's side of a take-over: it knocks at the running process's door, takes its
//! listeners, and registers each session that arrives; steps for sessions not arrived yet
//! wait for them meanwhile (`crate::handover`).

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use tokio::net::{TcpListener, UnixStream};
use tracing::{info, warn};

use super::channel::Channel;
use super::{Message, VERSION};
use crate::state::AppState;

/// Silence of the old process, beyond `shutdown_grace`, after which no more sessions are
/// awaited from it.
const ARRIVAL_SILENCE: std::time::Duration = std::time::Duration::from_secs(15);

/// What a new process takes before it serves.
#[derive(Debug)]
pub struct Inherited {
    /// The API's listener.
    pub api: TcpListener,
    /// The metrics' listener, when the old process had one.
    pub metrics: Option<TcpListener>,
    /// The sessions to come.
    pub arrivals: Arrivals,
}

/// The channel the sessions arrive on.
#[derive(Debug)]
pub struct Arrivals {
    channel: Channel,
}

/// Knocks at the door at `path` and takes the running process's listeners; `None` when no
/// process is there (no socket, or nobody listening on it).
pub async fn knock(path: &Path) -> std::io::Result<Option<Inherited>> {
    let at = |e: std::io::Error| {
        let e = format!("taking over the transport at {}: {e}", path.display());
        std::io::Error::other(e)
    };
    let socket = match UnixStream::connect(path).await {
        Ok(socket) => socket,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
            return Ok(None);
        }
        Err(e) => return Err(at(e)),
    };
    // (The peer must be a process of this user: another user's socket at the path is refused.)
    let mut channel = Channel::new(socket).map_err(at)?;
    channel.send(&Message::Hello { version: VERSION }, &[]).await?;
    let (message, _, fds) = channel.recv().await?.ok_or_else(|| at(eof()))?;
    let metrics = match message {
        Message::Listeners { version, metrics } if version <= VERSION => metrics,
        Message::Refused { reason } => return Err(std::io::Error::other(reason)),
        _ => return Err(std::io::Error::other("an unexpected take-over message")),
    };
    let mut listeners = fds.into_iter().map(|fd| {
        let listener = std::net::TcpListener::from(fd);
        listener.set_nonblocking(true)?;
        TcpListener::from_std(listener)
    });
    let api = listeners.next().ok_or_else(eof)??;
    let metrics = if metrics { Some(listeners.next().ok_or_else(eof)??) } else { None };
    Ok(Some(Inherited { api, metrics, arrivals: Arrivals { channel } }))
}

impl Arrivals {
    /// Receives the sessions, registering each as it arrives, until the old process is done.
    /// Steps wait for their session from here on; call it before accepting.
    pub fn receive(self, state: Arc<AppState>) -> impl Future<Output = ()> + Send + 'static {
        state.handover.begin_arriving();
        let mut channel = self.channel;
        async move {
            let (mut moved, mut failed) = (0u64, 0u64);
            // The old process may wait `shutdown_grace` for turns between two sessions.
            let silence = state.config().shutdown_grace + ARRIVAL_SILENCE;
            let mut outcome = channel.send(&Message::Serving, &[]).await.map(|()| None);
            while let Ok(None) = outcome {
                let next = tokio::time::timeout(silence, channel.recv::<Message>()).await;
                let next = next.unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()));
                outcome = match next {
                    Ok(Some((Message::Session(session), kept, fds))) => {
                        let id = session.id.clone();
                        let adopted = match fds.into_iter().next() {
                            Some(fd) => session.adopt(std::net::TcpStream::from(fd), kept, &state),
                            None => Err(crate::Error::Io(std::io::Error::other("no socket"))),
                        };
                        state.handover.arrived();
                        if let Err(e) = adopted {
                            failed += 1;
                            warn!(error = %e, "a moved session could not be registered");
                        } else {
                            moved += 1;
                        }
                        channel.send(&Message::Took { id }, &[]).await.map(|()| None)
                    }
                    Ok(Some((Message::Done { stayed, .. }, _, _))) => Ok(Some(stayed)),
                    Ok(Some(_)) => Err(std::io::Error::other("an unexpected take-over message")),
                    Ok(None) => Err(eof()),
                    Err(e) => Err(e),
                };
            }
            state.handover.end_arriving();
            state.metrics.take_over(&[("taken", moved), ("failed", failed)]);
            match outcome {
                Ok(stayed) => info!(moved, failed, stayed, "take-over done"),
                Err(e) => {
                    warn!(moved, failed, error = %e, "take-over ended early; the sessions not moved stay with the old process")
                }
            }
        }
    }
}

fn eof() -> std::io::Error {
    std::io::ErrorKind::UnexpectedEof.into()
}
