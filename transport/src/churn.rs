//! Noticing a proxy that opens a connection per request (HTTP/1.0, or `Connection: close`):
//! each command then costs a TCP handshake and leaves a socket in TIME_WAIT, which under load
//! exhausts ephemeral ports. Counted in a metric, and warned about once, naming the fix.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use http::{HeaderMap, Version};
use prometheus_client::metrics::counter::Counter;
use tracing::warn;

/// Requests seen before judging.
const JUDGE_AFTER: u64 = 200;

/// Requests seen, and those that asked to close their connection.
#[derive(Debug, Default)]
pub struct Churn {
    requests: AtomicU64,
    closing: AtomicU64,
    warned: AtomicBool,
}

impl Churn {
    /// Notes an authorized request; warns once when most ask to close their connection.
    pub fn note(&self, version: Version, headers: &HeaderMap, closing_total: &Counter) {
        let requests = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let closes = version < Version::HTTP_11
            || headers.get_all(http::header::CONNECTION).iter().any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
            });
        if !closes {
            return;
        }
        closing_total.inc();
        let closing = self.closing.fetch_add(1, Ordering::Relaxed) + 1;
        if requests >= JUDGE_AFTER
            && closing * 2 > requests
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            warn!(
                requests,
                closing,
                "most requests come on a new connection (HTTP/1.0 or `Connection: close`): a proxy in front opens a connection per command; with nginx set `proxy_http_version 1.1;`, `proxy_set_header Connection \"\";` and an upstream `keepalive` (see configs/nginx.example.conf)"
            );
        }
    }
}
