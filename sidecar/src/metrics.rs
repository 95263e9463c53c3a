//! The sidecar's metrics (`prometheus-client`, OpenMetrics text), served on `metrics_listen`
//! when set: a tiny responder for `GET /metrics` on a local address, nothing else.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Label pairs of a family member.
type Labels = Vec<(String, String)>;

/// Longest a scraper may take to send its request head.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Every metric of the sidecar.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Client connections open.
    pub clients_open: Gauge,
    /// Client connections accepted.
    pub clients_accepted: Counter,
    /// Client connections refused (`max_clients`).
    pub clients_refused: Counter,
    /// A command as its client sees it: from its packet read to the end of its answer.
    pub command_seconds: Histogram,
    /// New HTTP connections to the transport (the first, and every reconnect).
    pub transport_connects: Counter,
    /// Client connections ended by an error, by kind.
    pub errors: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            clients_open: Gauge::default(),
            clients_accepted: Counter::default(),
            clients_refused: Counter::default(),
            command_seconds: Histogram::new(exponential_buckets(0.0001, 2.0, 20)),
            transport_connects: Counter::default(),
            errors: Family::default(),
        };
        let mut registry = Registry::default();
        let r = registry.sub_registry_with_prefix("sqltunnel_sidecar");
        r.register("clients_open", "Client connections open", m.clients_open.clone());
        let counters = [
            ("clients_accepted", "Client connections accepted", &m.clients_accepted),
            (
                "clients_refused",
                "Client connections refused at max_clients (error 1040)",
                &m.clients_refused,
            ),
            (
                "transport_connects",
                "New HTTP connections to the transport (the first and every reconnect)",
                &m.transport_connects,
            ),
        ];
        for (name, help, counter) in counters {
            r.register(name, help, counter.clone());
        }
        r.register_with_unit(
            "command_duration",
            "A command as its client sees it: from its packet read to the end of its answer",
            Unit::Seconds,
            m.command_seconds.clone(),
        );
        r.register("errors", "Client connections ended by an error, by kind", m.errors.clone());
        Metrics { registry, ..m }
    }
}

impl Metrics {
    /// Counts a connection ended by an error of `kind`.
    pub fn error(&self, kind: &str) {
        self.errors.get_or_create(&vec![("kind".into(), kind.into())]).inc();
    }

    /// The exposition.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        // Writing to a String cannot fail.
        encode(&mut out, &self.registry).unwrap_or_default();
        out
    }
}

/// Answers `GET /metrics` on `listener` until `shutdown`; anything else gets 404.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, shutdown: CancellationToken) {
    while let Some((stream, _)) = common::runtime::accept(&listener, &shutdown).await {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            drop(tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &metrics)).await);
        });
    }
}

async fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() > 8192 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let (status, content_type, body) = match line {
        l if l.starts_with(b"GET /metrics ") || l.starts_with(b"HEAD /metrics ") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.render(),
        ),
        _ => ("404 Not Found", "text/plain", "not found\n".to_owned()),
    };
    let head_only = line.starts_with(b"HEAD ");
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !head_only {
        out.push_str(&body);
    }
    stream.write_all(out.as_bytes()).await?;
    stream.shutdown().await
}
