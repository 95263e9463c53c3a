//! `sidecar check`: names what the configuration leaves exposed (`exposure.rs`, a `warn` line
//! each), then walks to the transport step by step (DNS, TCP or the proxy, TLS, the API,
//! the round trip, the token, the carrier the path allows, the upstreams, a proxy's body limit) and prints one line per
//! step; a step that fails says what to fix, and the walk stops where it cannot go on.
//! Layers: `line` (a report line) → `way` (reaching the transport), `api` (what it answers).

mod api;
mod line;
mod way;

use std::process::ExitCode;
use std::time::Instant;

use common::wire::Route;
use prometheus_client::metrics::counter::Counter;

use line::fail;
pub use line::{Line, Outcome};

use crate::config::SidecarConfig;
use crate::tunnel::TunnelClient;

/// Requests timed for the round trip.
const ROUND_TRIPS: usize = 5;

/// Runs the check and prints its lines; exits 1 when a step failed.
pub fn run(config: SidecarConfig) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("sidecar check: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let lines = runtime.block_on(check(&config, |line| println!("{line}")));
    if lines.iter().any(|l| l.outcome == Outcome::Fail) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Checks the way to the transport; `show` sees each line as it is found.
pub async fn check(config: &SidecarConfig, mut show: impl FnMut(&Line)) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut note = |line: Line| {
        show(&line);
        let go_on = line.outcome != Outcome::Fail;
        lines.push(line);
        go_on
    };
    for exposed in crate::exposure::exposures(config) {
        note(line::warn("exposure", exposed.to_string()));
    }
    let tunnel = match TunnelClient::new(&config.transport, Counter::default()) {
        Ok(tunnel) => tunnel,
        Err(e) => {
            note(fail("config", e.to_string()));
            return lines;
        }
    };
    let target = tunnel.target();
    if !note(way::resolve(&target).await) {
        return lines;
    }
    let (line, tcp) = way::reach(&target).await;
    let go_on = note(line);
    let Some(tcp) = tcp.filter(|_| go_on) else { return lines };
    let (line, conn) = way::secure(&target, tcp).await;
    let go_on = note(line);
    let Some(mut conn) = conn.filter(|_| go_on) else { return lines };
    let url = tunnel.url();
    let start = Instant::now();
    if !note(api::health(&target, &mut conn, url).await) {
        return lines;
    }
    let mut times = vec![start.elapsed()];
    for _ in 1..ROUND_TRIPS {
        let start = Instant::now();
        if api::get(&target, &mut conn, &Route::Health.path(), "").await.is_err() {
            break;
        }
        times.push(start.elapsed());
    }
    note(api::round_trip(times));
    let token_line = api::token(&tunnel, &target, config).await;
    if !note(token_line) {
        return lines;
    }
    note(api::carrier(&tunnel, &target, config.transport.stream).await);
    for line in api::upstreams(&tunnel, &target, config).await {
        note(line);
    }
    note(api::body_limit(&tunnel, &target, config.max_packet).await);
    lines
}
