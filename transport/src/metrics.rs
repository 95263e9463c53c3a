//! The transport's metrics, kept by `prometheus-client` and written in the OpenMetrics text
//! format: every family has HELP and TYPE, units are in the names. Served on `/metrics` (with a
//! token) and, when `metrics_listen` is set, on that address without one.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::readiness::UpstreamStatus;

/// Label pairs of a family member.
pub type Labels = Vec<(String, String)>;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric of the transport.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Sessions open (set when rendered).
    pub sessions_open: Gauge,
    /// Answer bytes kept for resumes, all sessions together.
    pub resume_bytes: Gauge,
    /// Sessions parked (their sidecar silent with no transaction open), since start.
    pub sessions_parked: Counter,
    /// Sessions parked now.
    pub parked_sessions: Gauge,
    /// Streams open now (a sidecar's busy and idle ones).
    pub streams_open: Gauge,
    /// Lanes (sidecar threads) with a stream open: each is served on one transport thread.
    pub stream_lanes: Gauge,
    /// Sessions opened.
    pub sessions_opened: Counter,
    /// Sessions closed because their sidecar went silent.
    pub sessions_expired: Counter,
    /// Sessions ended because the upstream closed their idle connection.
    pub sessions_ended_by_upstream: Counter,
    /// Times the reaper woke late (a stall) and forgave the sessions due.
    pub stalls_forgiven: Counter,
    /// Commands relayed.
    pub commands: Counter,
    /// Commands that came in one request behind another (a client's pipeline).
    pub pipelined: Counter,
    /// From a command's request to the end of its answer.
    pub command_seconds: Histogram,
    /// From a command's request to the first bytes of its answer (the upstream's time).
    pub upstream_first_byte_seconds: Histogram,
    /// Connecting to an upstream and reading its greeting.
    pub upstream_connect_seconds: Histogram,
    /// Bytes of client packets received (commands and files).
    pub request_bytes: Counter,
    /// Bytes of upstream answers relayed.
    pub answer_bytes: Counter,
    /// Requests answered with an error, by kind.
    pub errors: Family<Labels, Counter>,
    /// Requests refused for a bad or missing token.
    pub unauthorized: Counter,
    /// Refusals answered at once with 429 (too many held for one client or in all).
    pub refusals_throttled: Counter,
    /// Requests refused because their identity used up one of its shares.
    pub identity_limited: Family<Labels, Counter>,
    /// Sessions opened, by identity: its name when configured by name, otherwise the issuer
    /// or `token` (bounded by the configuration).
    pub identity_sessions: Family<Labels, Counter>,
    /// Sessions ended because a reload took their identity's access away.
    pub sessions_revoked: Counter,
    /// New connections closed at once: `max_connections` (or their client's share) were open.
    pub connections_refused: Counter,
    /// Connections that had shown no token, closed to make room for a new one.
    pub connections_evicted: Counter,
    /// HTTP connections accepted (a proxy that keeps its connections adds none under load).
    pub connections_accepted: Counter,
    /// Streams opened (WebSocket upgrades), each carrying a sidecar connection's requests.
    pub streams_opened: Counter,
    /// Requests that waited for room in `max_inflight_bytes`.
    pub budget_waits: Counter,
    /// Authorized requests that asked to close their connection.
    pub requests_closing: Counter,
    /// Audit lines dropped because the writer fell behind.
    pub audit_dropped: Counter,
    /// Whether each upstream can be reached (set when rendered).
    pub upstream_ready: Family<Labels, Gauge>,
    /// Sessions of take-overs by outcome: `moved`/`stayed` (given), `taken`/`failed` (taken).
    pub take_over_sessions: Family<Labels, Counter>,
    process: crate::process_metrics::ProcessMetrics,
}

fn latency_buckets() -> impl Iterator<Item = f64> {
    // 100 µs to about 52 s.
    exponential_buckets(0.0001, 2.0, 20)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric at zero, registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let r = registry.sub_registry_with_prefix("sqltunnel");
        let m = Self {
            sessions_open: Gauge::default(),
            resume_bytes: Gauge::default(),
            sessions_parked: Counter::default(),
            parked_sessions: Gauge::default(),
            streams_open: Gauge::default(),
            stream_lanes: Gauge::default(),
            sessions_opened: Counter::default(),
            sessions_expired: Counter::default(),
            sessions_ended_by_upstream: Counter::default(),
            stalls_forgiven: Counter::default(),
            commands: Counter::default(),
            pipelined: Counter::default(),
            command_seconds: Histogram::new(latency_buckets()),
            upstream_first_byte_seconds: Histogram::new(latency_buckets()),
            upstream_connect_seconds: Histogram::new(latency_buckets()),
            request_bytes: Counter::default(),
            answer_bytes: Counter::default(),
            errors: Family::default(),
            unauthorized: Counter::default(),
            refusals_throttled: Counter::default(),
            identity_limited: Family::default(),
            identity_sessions: Family::default(),
            sessions_revoked: Counter::default(),
            connections_refused: Counter::default(),
            connections_evicted: Counter::default(),
            connections_accepted: Counter::default(),
            streams_opened: Counter::default(),
            budget_waits: Counter::default(),
            upstream_ready: Family::default(),
            take_over_sessions: Family::default(),
            audit_dropped: Counter::default(),
            requests_closing: Counter::default(),
            process: crate::process_metrics::ProcessMetrics::default(),
            registry: Registry::default(),
        };
        r.register("sessions_open", "Sessions open", m.sessions_open.clone());
        r.register("parked_sessions", "Sessions parked now", m.parked_sessions.clone());
        r.register("streams_open", "WebSocket streams open now", m.streams_open.clone());
        let lanes =
            "Lanes with a stream open: the streams of one sidecar thread share a transport thread";
        r.register("stream_lanes", lanes, m.stream_lanes.clone());
        r.register(
            "resume_bytes",
            "Answer bytes kept for resumes, with 64 bytes per chunk kept (bounded by max_resume_bytes)",
            m.resume_bytes.clone(),
        );
        let counters = [
            ("sessions_opened", "Sessions opened", &m.sessions_opened),
            (
                "sessions_parked",
                "Sessions parked while their sidecar was silent with no transaction open",
                &m.sessions_parked,
            ),
            (
                "sessions_expired",
                "Sessions closed because their sidecar went silent",
                &m.sessions_expired,
            ),
            (
                "sessions_ended_by_upstream",
                "Sessions ended because the upstream closed their idle connection",
                &m.sessions_ended_by_upstream,
            ),
            (
                "stalls_forgiven",
                "Times the reaper woke late (a stall of the process) and forgave the sessions due",
                &m.stalls_forgiven,
            ),
            ("commands", "Commands relayed", &m.commands),
            (
                "pipelined_commands",
                "Commands the client pipelined: relayed in one request with the command before them, answered in the same turn",
                &m.pipelined,
            ),
            ("unauthorized", "Requests refused for a bad or missing token", &m.unauthorized),
            (
                "refusals_throttled",
                "Refused requests answered at once with 429 and the connection closed: too many refusals held for one client or in all",
                &m.refusals_throttled,
            ),
            (
                "sessions_revoked",
                "Sessions ended because a reload took their identity's access away",
                &m.sessions_revoked,
            ),
            (
                "streams_opened",
                "Streams opened: WebSocket upgrades, each then carrying one sidecar connection's requests",
                &m.streams_opened,
            ),
            (
                "http_connections_accepted",
                "HTTP connections accepted; under steady load behind a keep-alive proxy it stays still",
                &m.connections_accepted,
            ),
            (
                "connections_refused",
                "New connections closed at once because max_connections (or their client's max_connections_per_client) were open",
                &m.connections_refused,
            ),
            (
                "connections_evicted",
                "Connections that had shown no token, closed to make room for a new one while max_connections were open",
                &m.connections_evicted,
            ),
            (
                "budget_waits",
                "Requests that waited for room in max_inflight_bytes",
                &m.budget_waits,
            ),
            (
                "http_requests_closing",
                "Requests that asked to close their connection (HTTP/1.0 or Connection: close): a proxy without keep-alive",
                &m.requests_closing,
            ),
            (
                "audit_lines_dropped",
                "Audit lines dropped because the writer fell behind (the command path never waits)",
                &m.audit_dropped,
            ),
        ];
        for (name, help, counter) in counters {
            r.register(name, help, counter.clone());
        }
        let latencies = [
            (
                "command_duration",
                "From a command's request to the end of its answer",
                &m.command_seconds,
            ),
            (
                "upstream_first_byte",
                "From a command's request to the first bytes of its answer",
                &m.upstream_first_byte_seconds,
            ),
            (
                "upstream_connect",
                "Connecting to an upstream and reading its greeting",
                &m.upstream_connect_seconds,
            ),
        ];
        for (name, help, histogram) in latencies {
            r.register_with_unit(name, help, Unit::Seconds, histogram.clone());
        }
        let bytes = [
            ("request", "Bytes of client packets received (commands and files)", &m.request_bytes),
            ("answer", "Bytes of upstream answers relayed", &m.answer_bytes),
        ];
        for (name, help, counter) in bytes {
            r.register_with_unit(name, help, Unit::Bytes, counter.clone());
        }
        r.register("errors", "Requests answered with an error, by kind", m.errors.clone());
        r.register(
            "identity_sessions_opened",
            "Sessions opened, by identity (named identities by name, an issuer's by the issuer, plain tokens as token)",
            m.identity_sessions.clone(),
        );
        r.register(
            "identity_limited",
            "Requests refused because their identity reached one of its shares, by identity and limit",
            m.identity_limited.clone(),
        );
        r.register(
            "upstream_ready",
            "Whether each upstream can be reached (1) or not (0), as last probed",
            m.upstream_ready.clone(),
        );
        for outcome in ["moved", "stayed", "taken", "failed"] {
            drop(m.take_over_sessions.get_or_create(&vec![("outcome".into(), outcome.into())]));
        }
        let take_over =
            "Sessions of take-overs: moved or stayed (old process), taken or failed (new)";
        r.register("take_over_sessions", take_over, m.take_over_sessions.clone());
        let build: Family<Labels, Gauge> = Family::default();
        build.get_or_create(&vec![("version".into(), env!("CARGO_PKG_VERSION").into())]).set(1);
        r.register("build_info", "The running build (always 1)", build);
        m.process.register(&mut registry);
        Self { registry, ..m }
    }

    /// Counts a session opened by an identity of metrics label `identity`.
    pub fn session_opened(&self, identity: &str) {
        self.sessions_opened.inc();
        let label = vec![("identity".to_owned(), identity.to_owned())];
        self.identity_sessions.get_or_create(&label).inc();
    }

    /// Counts a request refused because identity `identity` (its metrics label) reached
    /// `limit`.
    pub fn identity_limited(&self, identity: &str, limit: &str) {
        let label =
            vec![("identity".to_owned(), identity.to_owned()), ("limit".into(), limit.into())];
        self.identity_limited.get_or_create(&label).inc();
    }

    /// Counts a take-over's sessions, each `(outcome, count)`.
    pub fn take_over(&self, outcomes: &[(&str, u64)]) {
        for (outcome, count) in outcomes {
            let label = vec![("outcome".to_owned(), (*outcome).to_owned())];
            self.take_over_sessions.get_or_create(&label).inc_by(*count);
        }
    }

    /// Counts an error of `kind`.
    pub fn error(&self, kind: &str) {
        self.errors.get_or_create(&vec![("kind".into(), kind.into())]).inc();
    }

    /// The exposition, with the gauges read now: open sessions, ready upstreams, the process.
    pub fn render(
        &self,
        (sessions_open, parked): (usize, usize),
        resume_bytes: u64,
        upstreams: &[UpstreamStatus],
    ) -> String {
        self.sessions_open.set(i64::try_from(sessions_open).unwrap_or(i64::MAX));
        self.parked_sessions.set(i64::try_from(parked).unwrap_or(i64::MAX));
        self.resume_bytes.set(i64::try_from(resume_bytes).unwrap_or(i64::MAX));
        for upstream in upstreams {
            let labels = vec![("upstream".into(), upstream.name.clone())];
            self.upstream_ready.get_or_create(&labels).set(i64::from(upstream.ready));
        }
        self.process.read();
        let mut out = String::with_capacity(8 * 1024);
        // Writing to a String cannot fail.
        encode(&mut out, &self.registry).unwrap_or_default();
        out
    }
}
