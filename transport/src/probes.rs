//! The readiness probe loop: every few seconds, each upstream with an `admin_user` is logged in
//! to and asked `DO 1`; the outcome is what `/v1/ready` reports (`readiness.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::relay::admin::{admin_login, probe};
use crate::state::AppState;

/// How often an upstream with an `admin_user` is probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);
/// Longest a probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Probes every upstream that has an `admin_user`, every [`PROBE_EVERY`], until `shutdown`.
pub async fn run(state: Arc<AppState>, shutdown: CancellationToken) {
    loop {
        let config = state.config();
        for upstream in &config.upstreams {
            let Some(login) = admin_login(upstream) else { continue };
            let outcome: Result<(), Box<dyn std::error::Error + Send + Sync>> =
                match state.upstream_tls(upstream) {
                    Ok(tls) => {
                        // Each probe is a task of its own: whatever an upstream sends, a failure
                        // (even a panic) is that probe's outcome, and the loop goes on.
                        let (upstream, login) = (upstream.clone(), login.clone());
                        let probing = tokio::spawn(async move {
                            probe(&upstream, tls, &login, PROBE_TIMEOUT).await
                        });
                        match probing.await {
                            Ok(probed) => probed.map_err(Into::into),
                            // What a panic said stays in the log (callers read readiness).
                            Err(_) => Err("the probe failed unexpectedly".into()),
                        }
                    }
                    Err(e) => Err(e.into()),
                };
            let outcome = outcome.as_ref().map(drop).map_err(|e| &**e as &dyn std::error::Error);
            state.readiness.record(&upstream.name, outcome);
        }
        tokio::select! {
            () = tokio::time::sleep(PROBE_EVERY) => {}
            () = shutdown.cancelled() => return,
        }
    }
}
