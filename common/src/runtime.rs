//! Process plumbing shared by both binaries: the tokio runtime and the shutdown signal.

/// Builds the runtime: `worker_threads == 1` gives a single-threaded scheduler (lowest
/// latency per command: no cross-thread wake-ups), `0` one worker per CPU core.
pub fn build(worker_threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if worker_threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if worker_threads > 1 {
            builder.worker_threads(worker_threads);
        }
        builder.enable_all().build()
    }
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
