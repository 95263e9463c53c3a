//! Readiness (`/v1/ready`): whether each upstream can be reached, from a cached probe
//! (`probes.rs`), never one connection per scrape. An upstream with an `admin_user` is probed every few seconds
//! (log in, `DO 1`); for one without, the outcome of the last connection a session made counts
//! (a bare connect would count as a failed login and, repeated, get the transport's host
//! blocked by the server's `max_connect_errors`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use tracing::{info, warn};

use crate::config::UpstreamConfig;
use crate::session::lock;

/// The last word on each upstream.
#[derive(Debug, Default)]
pub struct Readiness {
    last: Mutex<HashMap<String, Outcome>>,
}

#[derive(Debug, Clone)]
struct Outcome {
    error: Option<String>,
    at: Instant,
}

/// One upstream in the `/v1/ready` answer.
#[derive(Debug, Serialize)]
pub struct UpstreamStatus {
    /// Its name.
    pub name: String,
    /// Reachable, as last seen (true when never tried yet).
    pub ready: bool,
    /// How long ago that was, in ms (absent when never tried).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_ms_ago: Option<u64>,
    /// What failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Readiness {
    /// Records the outcome of a connection to `upstream` (a probe, or a session's dial).
    pub fn record(&self, upstream: &str, outcome: Result<(), &dyn std::error::Error>) {
        let mut last = lock(&self.last);
        let was_ready = last.get(upstream).is_none_or(|o| o.error.is_none());
        match (&outcome, was_ready) {
            (Err(e), true) => warn!(upstream, error = %e, "upstream not ready"),
            (Ok(()), false) => info!(upstream, "upstream ready again"),
            _ => {}
        }
        let error = outcome.err().map(ToString::to_string);
        last.insert(upstream.to_owned(), Outcome { error, at: Instant::now() });
    }

    /// Each configured upstream's status; ready when all are.
    pub fn report(&self, upstreams: &[UpstreamConfig]) -> (bool, Vec<UpstreamStatus>) {
        let last = lock(&self.last);
        let statuses: Vec<UpstreamStatus> = upstreams
            .iter()
            .map(|upstream| {
                let seen = last.get(&upstream.name);
                UpstreamStatus {
                    name: upstream.name.clone(),
                    ready: seen.is_none_or(|o| o.error.is_none()),
                    checked_ms_ago: seen.map(|o| o.at.elapsed().as_millis() as u64),
                    error: seen.and_then(|o| o.error.clone()),
                }
            })
            .collect();
        (statuses.iter().all(|s| s.ready), statuses)
    }
}
