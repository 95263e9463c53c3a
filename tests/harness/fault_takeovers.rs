//! Take-overs during a fault run: every few seconds (drawn from the run's seed) a new
//! transport, in this process, takes the running one's listener and sessions over its
//! `take_over_socket`, while the clients run and the cuts go on.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio_util::sync::CancellationToken;

/// Take-overs going on in the background.
pub struct TakeOvers {
    stop: CancellationToken,
    /// Take-overs begun.
    pub count: Arc<AtomicU64>,
    /// The socket's path.
    pub socket: PathBuf,
}

impl TakeOvers {
    /// A socket path for a run tagged `tag`, to go in the transport's config.
    pub fn socket_for(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("fault-take-over-{tag}.sock"))
    }

    /// Starts a new transport with `transport_yaml` every `every` (a range of milliseconds,
    /// drawn from `seed`), each taking over the last.
    pub fn start(transport_yaml: &str, socket: PathBuf, seed: u64, every: (u64, u64)) -> Self {
        let config: transport::TransportConfig =
            common::config::parse_yaml(transport_yaml).expect("transport yaml");
        let (stop, count) = (CancellationToken::new(), Arc::new(AtomicU64::new(0)));
        let (stopping, counting) = (stop.clone(), count.clone());
        tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(seed ^ 0x7A4E_0FE5);
            loop {
                let pause = Duration::from_millis(rng.random_range(every.0..=every.1));
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = stopping.cancelled() => return,
                }
                counting.fetch_add(1, Ordering::Relaxed);
                let reloads = tokio::sync::mpsc::unbounded_channel().1;
                let taker =
                    transport::run_with_reloads(None, config.clone(), stopping.clone(), reloads);
                tokio::spawn(async move {
                    if let Err(e) = taker.await {
                        panic!("a take-over failed to start: {e}");
                    }
                });
            }
        });
        Self { stop, count, socket }
    }

    /// Take-overs begun so far.
    pub fn begun(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for TakeOvers {
    fn drop(&mut self) {
        self.stop.cancel();
        drop(std::fs::remove_file(&self.socket));
    }
}
