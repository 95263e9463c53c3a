//! Where a transport listens: the listener it was given, or those it took over from the
//! running transport (`--take-over`), and the door where a later one takes them over in
//! turn (`take_over_socket`; Unix only, see `takeover/`).

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::state::AppState;

/// A take-over's first message at this process's door.
#[cfg(unix)]
pub type Knock = crate::takeover::door::Knock;
#[cfg(not(unix))]
pub type Knock = std::convert::Infallible;

/// The listeners to serve on (the API's, given or taken over, and the metrics'), and the
/// knocks of a take-over.
pub async fn listeners(
    listener: Option<TcpListener>,
    state: &Arc<AppState>,
) -> std::io::Result<(TcpListener, Option<Arc<TcpListener>>, tokio::sync::mpsc::Receiver<Knock>)> {
    let config = state.config();
    #[cfg(unix)]
    let (listener, metrics, taking) = match listener {
        Some(listener) => (listener, None, None),
        None => {
            let needed = "--take-over needs take_over_socket in the configuration";
            let path = take_over_socket(&config).ok_or(std::io::Error::other(needed))?;
            match crate::takeover::take::knock(&path).await? {
                Some(taken) => {
                    info!(path = %path.display(), "took the listeners over: sessions arriving");
                    (taken.api, taken.metrics, Some(taken.arrivals))
                }
                None => {
                    info!(path = %path.display(), "no transport to take over: starting anew");
                    (common::runtime::bind(config.listen)?, None, None)
                }
            }
        }
    };
    #[cfg(not(unix))]
    let (listener, metrics) = match listener {
        Some(listener) => (listener, None),
        None => return Err(std::io::Error::other("--take-over works on Unix only")),
    };
    let metrics = match (metrics, config.metrics_listen) {
        (Some(metrics), _) => Some(metrics),
        (None, Some(addr)) => Some(TcpListener::bind(addr).await?),
        (None, None) => None,
    };
    #[cfg(unix)]
    let knocks = crate::takeover::door(take_over_socket(&config), taking, state)?;
    #[cfg(not(unix))]
    let knocks = tokio::sync::mpsc::channel(1).1;
    Ok((listener, metrics.map(Arc::new), knocks))
}

/// Hands this process over to the one that knocked ([`crate::takeover::give`]): `Ok` when
/// this one is done (taken over, or the new one goes on without the rest); on failure, says
/// whether its connections had been asked to close (`Err(true)`).
pub async fn hand_over(
    knock: Knock,
    state: &Arc<AppState>,
    listeners: (&TcpListener, Option<&TcpListener>),
    closing: &CancellationToken,
) -> Result<(), bool> {
    #[cfg(unix)]
    use crate::takeover::give::Failed;
    #[cfg(unix)]
    match crate::takeover::give::hand_over(knock, state, listeners, closing).await {
        Ok(report) => {
            let outcomes = [("moved", report.moved), ("stayed", report.stayed)];
            state.metrics.take_over(&outcomes);
            let (moved, stayed, finished) = (report.moved, report.stayed, report.finished);
            info!(moved, stayed, finished_for_a_resume = finished, "taken over");
            if stayed > 0 {
                warn!(
                    stayed,
                    "sessions that could not move (over TLS to their upstream, or a turn past shutdown_grace) end as at a shutdown"
                );
            }
            Ok(())
        }
        Err(Failed::Early(e)) => {
            warn!(error = %e, "take-over failed: this process serves on");
            Err(false)
        }
        Err(Failed::RolledBack(e)) => {
            warn!(error = %e, "take-over failed: this process serves on");
            Err(true)
        }
        Err(Failed::Abandoned(e)) => {
            warn!(error = %e, "take-over broke off; the new process goes on, and what this one holds ends as at a shutdown");
            Ok(())
        }
    }
    #[cfg(not(unix))]
    match knock {}
}

/// The take-over's socket: `take_over_socket`, else, under systemd with a
/// `RuntimeDirectory=`, `take-over.sock` in it (`$RUNTIME_DIRECTORY`, its first).
pub fn take_over_socket(config: &crate::config::TransportConfig) -> Option<std::path::PathBuf> {
    let runtime = std::env::var_os("RUNTIME_DIRECTORY").filter(|d| !d.is_empty());
    let under_systemd = runtime.and_then(|dirs| std::env::split_paths(&dirs).next());
    config.take_over_socket.clone().or_else(|| under_systemd.map(|d| d.join("take-over.sock")))
}
