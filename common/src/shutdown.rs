//! Process shutdown: resolves on Ctrl-C or SIGTERM, for both binaries' `main`.

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
