//! Process plumbing shared by both binaries: the tokio runtime and the shutdown signal.

/// Builds the runtime the process starts on: single-threaded (no cross-thread wake-ups on a
/// command's path). More threads are shards of it (`shards.rs`).
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Waits for Ctrl-C (SIGINT) or, on Unix, SIGTERM.
pub async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    drop(ctrl_c.await);
}

/// Pending connections a listener queues before the kernel drops new ones (capped by
/// `net.core.somaxconn`); a burst of hundreds of clients must not overflow it.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds a TCP listener with a deep accept queue and address reuse.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Accepts the next connection (TCP_NODELAY set), riding out transient accept errors such as
/// running out of file descriptors; `None` once `shutdown` is cancelled.
pub async fn accept(
    listener: &tokio::net::TcpListener,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Option<(tokio::net::TcpStream, std::net::SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => return None,
        };
        match accepted {
            Ok((stream, peer)) => {
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                }
                return Some((stream, peer));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
