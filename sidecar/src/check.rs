//! `sidecar check`: walks to the transport step by step (DNS, TCP or the proxy, TLS, the API,
//! the token, the upstreams, the round trip, a proxy's body limit) and prints one line per
//! step; a step that fails says what to fix, and the walk stops where it cannot go on.

use std::fmt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::wire::{Frame, JSON_CONTENT_TYPE, OpenRelay, TurnEnd};
use prometheus_client::metrics::counter::Counter;
use serde::Deserialize;
use tokio::net::TcpStream;

use crate::Error;
use crate::config::SidecarConfig;
use crate::http::{HttpConn, ResponseHead};
use crate::protocol::split_payloads;
use crate::tunnel::{Target, TunnelClient};

/// Requests timed for the round trip.
const ROUND_TRIPS: usize = 5;
/// Longest wait for the answer to the body-limit request's head.
const BODY_LIMIT_WAIT: Duration = Duration::from_secs(5);
/// Largest body read from a diagnostic answer.
const MAX_BODY: usize = 64 * 1024;

/// How a step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Fine.
    Ok,
    /// Could not be checked; not an error.
    Warn,
    /// Wrong: the line says the fix.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Line {
    /// How it went.
    pub outcome: Outcome,
    /// The step: `dns`, `connect`, `proxy`, `tls`, `certificate`, `transport`, `path`,
    /// `token`, `round trip`, `upstream`, `body limit`.
    pub step: &'static str,
    /// What was found, and for a failure the fix.
    pub text: String,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Warn => "warn",
            Outcome::Fail => "FAIL",
        };
        write!(f, "{mark:<5} {:<12} {}", self.step, self.text)
    }
}

fn ok(step: &'static str, text: String) -> Line {
    Line { outcome: Outcome::Ok, step, text }
}

fn warn(step: &'static str, text: String) -> Line {
    Line { outcome: Outcome::Warn, step, text }
}

fn fail(step: &'static str, text: String) -> Line {
    Line { outcome: Outcome::Fail, step, text }
}

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
    let tunnel = match TunnelClient::new(&config.transport, Counter::default()) {
        Ok(tunnel) => tunnel,
        Err(e) => {
            note(fail("config", e.to_string()));
            return lines;
        }
    };
    let target = tunnel.target();
    if !note(resolve(&target).await) {
        return lines;
    }
    let (line, tcp) = reach(&target).await;
    let go_on = note(line);
    let Some(tcp) = tcp.filter(|_| go_on) else { return lines };
    let (line, conn) = secure(&target, tcp).await;
    let go_on = note(line);
    let Some(mut conn) = conn.filter(|_| go_on) else { return lines };
    let url = tunnel.url();
    let start = Instant::now();
    if !note(health(&target, &mut conn, url).await) {
        return lines;
    }
    let mut times = vec![start.elapsed()];
    for _ in 1..ROUND_TRIPS {
        let start = Instant::now();
        if get(&target, &mut conn, "v1/health", "").await.is_err() {
            break;
        }
        times.push(start.elapsed());
    }
    note(round_trip(times));
    let token_line = token(&tunnel, config).await;
    if !note(token_line) {
        return lines;
    }
    for line in upstreams(&tunnel, &target, config).await {
        note(line);
    }
    note(body_limit(&tunnel, &target, config.max_packet).await);
    lines
}

/// The name to resolve: the proxy's when one is used, else the transport's.
async fn resolve(target: &Target<'_>) -> Line {
    let (name, port, whose) = match target.proxy {
        Some(proxy) => {
            let (host, port) = proxy.host_port();
            (host, port, "the proxy's host name (transport.proxy or HTTPS_PROXY)")
        }
        None => (target.host, target.port, "the host name in transport.url"),
    };
    if name.parse::<std::net::IpAddr>().is_ok() {
        return ok("dns", format!("{name} is an address, nothing to resolve"));
    }
    let lookup = tokio::net::lookup_host((name, port));
    match tokio::time::timeout(target.connect_timeout, lookup).await {
        Ok(Ok(mut addrs)) => match addrs.next() {
            Some(addr) => ok("dns", format!("{name} resolves to {}", addr.ip())),
            None => fail("dns", format!("{name} resolves to no address. Fix: check {whose}")),
        },
        Ok(Err(e)) => fail(
            "dns",
            format!(
                "cannot resolve {name} ({e}). Fix: check {whose}, your DNS, or the VPN that serves it"
            ),
        ),
        Err(_) => fail(
            "dns",
            format!(
                "no DNS answer for {name} within {} s. Fix: check your DNS server or VPN",
                target.connect_timeout.as_secs()
            ),
        ),
    }
}

/// The TCP leg, directly or through the proxy.
async fn reach(target: &Target<'_>) -> (Line, Option<TcpStream>) {
    let open = HttpConn::open_tcp(target.host, target.port, target.proxy);
    let there = format!("{}:{}", target.host, target.port);
    let secs = target.connect_timeout.as_secs_f32();
    let result = tokio::time::timeout(target.connect_timeout, open).await;
    match (target.proxy, result) {
        (Some(proxy), Ok(Ok(tcp))) => (
            ok("proxy", format!("{} opened a tunnel to {there} (CONNECT)", proxy.address())),
            Some(tcp),
        ),
        (None, Ok(Ok(tcp))) => (ok("connect", format!("TCP to {there}")), Some(tcp)),
        (Some(proxy), Ok(Err(e))) => (
            fail(
                "proxy",
                format!(
                    "{e}. Fix: check transport.proxy or HTTPS_PROXY ({}), or list {} in NO_PROXY if it is reached without the proxy",
                    proxy.address(),
                    target.host
                ),
            ),
            None,
        ),
        (Some(proxy), Err(_)) => (
            fail(
                "proxy",
                format!(
                    "no tunnel through {} within {secs} s. Fix: check the proxy address, and that it allows CONNECT to port {}",
                    proxy.address(),
                    target.port
                ),
            ),
            None,
        ),
        (None, Ok(Err(e))) if e.kind() == std::io::ErrorKind::ConnectionRefused => (
            fail(
                "connect",
                format!(
                    "{there} refused the connection. Fix: start the transport (or the nginx in front of it), or correct the port in transport.url"
                ),
            ),
            None,
        ),
        (None, Ok(Err(e))) => (
            fail(
                "connect",
                format!(
                    "cannot connect to {there} ({e}). Fix: check the host and port in transport.url, and your network or VPN"
                ),
            ),
            None,
        ),
        (None, Err(_)) => (
            fail(
                "connect",
                format!(
                    "no answer from {there} within {secs} s: a firewall drops the packets, or the host or port is wrong. Fix: check transport.url, the VPN, or a corporate proxy (HTTPS_PROXY)"
                ),
            ),
            None,
        ),
    }
}

/// TLS for `https://` (and the certificate's checks), or the plain connection.
async fn secure(target: &Target<'_>, tcp: TcpStream) -> (Line, Option<HttpConn>) {
    let Some(tls) = target.tls else {
        return match HttpConn::over(tcp, target.host, None).await {
            Ok(conn) => (
                ok("tls", "none (http://): the token and data travel in clear text".into()),
                Some(conn),
            ),
            Err(e) => (fail("tls", e.to_string()), None),
        };
    };
    let handshake = HttpConn::over(tcp, target.host, Some(tls));
    match tokio::time::timeout(target.connect_timeout, handshake).await {
        Ok(Ok(conn)) => (ok("tls", format!("certificate valid for {}", target.host)), Some(conn)),
        Ok(Err(e)) => (tls_failure(target.host, &e), None),
        Err(_) => (
            fail(
                "tls",
                format!(
                    "no TLS handshake within {} s. Fix: the port in transport.url may not serve TLS: try http://",
                    target.connect_timeout.as_secs()
                ),
            ),
            None,
        ),
    }
}

/// One line naming what TLS refused, with its fix.
fn tls_failure(host: &str, e: &std::io::Error) -> Line {
    use rustls::CertificateError as C;
    let cause = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let text = match cause {
        Some(rustls::Error::InvalidCertificate(C::UnknownIssuer | C::BadSignature)) => {
            return fail(
                "certificate",
                format!(
                    "{host}'s certificate is not signed by a CA this machine trusts ({e}). Fix: set transport.tls.ca_file to the CA's PEM file"
                ),
            );
        }
        Some(rustls::Error::InvalidCertificate(
            C::NotValidForName | C::NotValidForNameContext { .. },
        )) => {
            return fail(
                "certificate",
                format!(
                    "the certificate is not valid for the name {host} ({e}). Fix: use in transport.url the name the certificate was issued for"
                ),
            );
        }
        Some(rustls::Error::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        )) => {
            return fail(
                "certificate",
                format!(
                    "the certificate is outside its validity dates ({e}). Fix: renew the transport's (or nginx's) certificate, or check this machine's clock"
                ),
            );
        }
        Some(rustls::Error::InvalidCertificate(_)) => {
            return fail(
                "certificate",
                format!(
                    "the certificate was refused ({e}). Fix: check the certificate the transport (or nginx) serves, and transport.tls.ca_file"
                ),
            );
        }
        Some(rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. }) => {
            format!(
                "the server does not speak TLS ({e}). Fix: use http:// in transport.url, or the port that serves TLS"
            )
        }
        _ => format!(
            "TLS handshake failed ({e}). Fix: check that transport.url's port serves TLS, and transport.tls"
        ),
    };
    fail("tls", text)
}

/// Sends a GET on `conn`; answers the head and the body.
async fn get(
    target: &Target<'_>,
    conn: &mut HttpConn,
    path: &str,
    extra: &str,
) -> std::io::Result<(ResponseHead, Bytes)> {
    let head = target.request_head("GET", path, 0, extra);
    let response = conn.request(head.as_bytes(), b"").await?;
    let body = conn.body_to_end(MAX_BODY).await?;
    Ok((response, body))
}

/// `GET v1/health`: is a sqltunnel transport at this URL?
async fn health(target: &Target<'_>, conn: &mut HttpConn, url: &str) -> Line {
    #[derive(Deserialize)]
    struct Health {
        status: String,
    }
    let (head, body) = match get(target, conn, "v1/health", "").await {
        Ok(answer) => answer,
        Err(e) => {
            let fix = if target.tls.is_none() {
                "Fix: if the transport (or nginx) serves TLS there, use https:// in transport.url"
            } else {
                "Fix: check that transport.url points at the transport or the nginx in front of it"
            };
            return fail("transport", format!("no HTTP answer from {url} ({e}). {fix}"));
        }
    };
    let sqltunnel = head.content_type.starts_with(JSON_CONTENT_TYPE)
        && serde_json::from_slice::<Health>(&body).is_ok_and(|h| h.status == "ok");
    match head.status {
        200 if sqltunnel => ok("transport", format!("sqltunnel transport at {url}")),
        404 => fail(
            "path",
            format!(
                "{url}v1/health is not found (404). Fix: transport.url's path must be the prefix the proxy forwards to the transport (like https://gateway/db-tunnel/)"
            ),
        ),
        502..=504 => fail(
            "transport",
            format!(
                "the proxy at {url} answered {} {}: the transport behind it is down or unreachable from it. Fix: start the transport, or correct the proxy's proxy_pass",
                head.status, head.reason
            ),
        ),
        status => fail(
            "transport",
            format!(
                "{url}v1/health answered {status} {}, which is not a sqltunnel answer. Fix: transport.url points at another service; correct its host, port or path",
                head.reason
            ),
        ),
    }
}

/// The median of the timed round trips.
fn round_trip(mut times: Vec<Duration>) -> Line {
    times.sort();
    let median = times[times.len() / 2];
    ok(
        "round trip",
        format!(
            "median {:.1} ms over {} requests on one connection",
            median.as_secs_f64() * 1e3,
            times.len()
        ),
    )
}

/// An authenticated request (an empty keep-alive): is the token accepted?
async fn token(tunnel: &TunnelClient, config: &SidecarConfig) -> Line {
    let source = match (&config.transport.token_env, &config.transport.token_file) {
        (Some(var), _) => format!("the environment variable {var}"),
        (None, Some(file)) => format!("the file {file}"),
        (None, None) => "transport.token".into(),
    };
    if config.transport.token.as_ref().is_none_or(|t| t.expose().is_empty()) {
        return fail(
            "token",
            format!("no token: {source} is empty. Fix: set it to one of the transport's tokens"),
        );
    }
    match tunnel.connection("check").keep_alive(Vec::new(), Duration::ZERO).await {
        Ok(_) => ok("token", format!("accepted (from {source})")),
        Err(Error::TokenRefused { .. }) => fail(
            "token",
            format!(
                "the transport refused the token from {source} (401). Fix: set it to one of the tokens in the transport's `tokens` list"
            ),
        ),
        Err(e) => fail("token", format!("{e}")),
    }
}

/// The transport's upstreams (its readiness report), each with its server version, and the
/// sidecar's references to them.
async fn upstreams(
    tunnel: &TunnelClient,
    target: &Target<'_>,
    config: &SidecarConfig,
) -> Vec<Line> {
    #[derive(Deserialize)]
    struct Ready {
        upstreams: Vec<Upstream>,
    }
    #[derive(Deserialize)]
    struct Upstream {
        name: String,
        error: Option<String>,
    }
    let ready = async {
        let tcp = HttpConn::open_tcp(target.host, target.port, target.proxy).await?;
        let mut conn = HttpConn::over(tcp, target.host, target.tls).await?;
        let (_, body) = get(target, &mut conn, "v1/ready", "").await?;
        serde_json::from_slice::<Ready>(&body).map_err(std::io::Error::other)
    };
    let listed = match tokio::time::timeout(target.connect_timeout * 2, ready).await {
        Ok(Ok(ready)) => ready.upstreams,
        Ok(Err(e)) => {
            return vec![warn(
                "upstream",
                format!("the transport's /v1/ready could not be read ({e}); upstreams not listed"),
            )];
        }
        Err(_) => {
            return vec![warn(
                "upstream",
                "the transport's /v1/ready did not answer in time; upstreams not listed".into(),
            )];
        }
    };
    let names: Vec<&str> = listed.iter().map(|u| u.name.as_str()).collect();
    let mut lines = Vec::new();
    let wanted =
        config.users.iter().map(|u| (u.upstream.as_str(), format!("users entry {:?}", u.name)));
    let wanted =
        wanted.chain(config.auth.upstream.as_deref().map(|u| (u, "auth.upstream".to_owned())));
    for (name, by) in wanted {
        if !names.contains(&name) {
            lines.push(fail("upstream", format!("{by} names upstream {name:?}, which the transport does not have (it has: {}). Fix: correct the name, or add it to the transport's upstreams", names.join(", "))));
        }
    }
    for upstream in &listed {
        let line = match greeting_version(tunnel, &upstream.name).await {
            Ok(version) => ok("upstream", format!("{}: server {version}", upstream.name)),
            Err(e) => {
                let probe = upstream
                    .error
                    .as_deref()
                    .map(|e| format!("; last probe: {e}"))
                    .unwrap_or_default();
                fail(
                    "upstream",
                    format!(
                        "{}: cannot be reached from the transport ({e}{probe}). Fix: check the upstream's address in the transport's config, and that the database runs",
                        upstream.name
                    ),
                )
            }
        };
        lines.push(line);
    }
    lines
}

/// Opens a relayed session on `upstream` and reads the server version from its greeting.
async fn greeting_version(tunnel: &TunnelClient, upstream: &str) -> Result<String, Error> {
    let mut conn = tunnel.connection("check");
    let open = OpenRelay { upstream: upstream.to_owned(), client_tls: false };
    let (session, _, mut frames) = conn.open_relay(&open).await?;
    let mut greeting = Vec::new();
    let mut end = None;
    while let Some(frame) = frames.next().await? {
        match frame {
            Frame::Packets(packets) => greeting.extend(split_payloads(&packets)?),
            Frame::Turn(turn) => end = Some(turn),
            Frame::Heartbeat => {}
        }
    }
    if !session.is_empty() {
        conn.close_session(&session).await;
    }
    let first = greeting.first().map(|p| &p[..]).unwrap_or_default();
    match (end, first.split_first()) {
        (Some(TurnEnd::AwaitAuth), Some((10, rest))) => {
            let version = rest.split(|b| *b == 0).next().unwrap_or_default();
            let version = String::from_utf8_lossy(version);
            // MariaDB prefixes its version with 5.5.5- for old clients.
            Ok(version.strip_prefix("5.5.5-").unwrap_or(&version).to_owned())
        }
        (_, Some((0xff, rest))) if rest.len() > 2 => {
            Err(Error::StreamBroken(String::from_utf8_lossy(&rest[2..]).into_owned()))
        }
        _ => Err(Error::StreamBroken("no greeting".into())),
    }
}

/// Announces a command body of `max_packet` bytes (with `Expect: 100-continue`, sending
/// none of it): a proxy whose body limit is lower answers 413 at once.
async fn body_limit(tunnel: &TunnelClient, target: &Target<'_>, max_packet: usize) -> Line {
    let mib = max_packet as f64 / f64::from(1 << 20);
    let headers = format!(
        "Authorization: {}\r\nContent-Type: application/octet-stream\r\nExpect: 100-continue\r\n",
        tunnel.authorization()
    );
    let head =
        target.request_head("POST", "v1/sessions/sqltunnelcheck/command", max_packet, &headers);
    let ask = async {
        let tcp = HttpConn::open_tcp(target.host, target.port, target.proxy).await?;
        let mut conn = HttpConn::over(tcp, target.host, target.tls).await?;
        conn.set_silence_limit(BODY_LIMIT_WAIT);
        conn.request(head.as_bytes(), b"").await
    };
    let response = match tokio::time::timeout(BODY_LIMIT_WAIT * 2, ask).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return warn("body limit", format!("not checked: {e}")),
        Err(_) => {
            return warn(
                "body limit",
                "not checked: no answer to the announced body in time".into(),
            );
        }
    };
    let from_transport = response.content_type.starts_with(JSON_CONTENT_TYPE);
    match response.status {
        413 if from_transport => fail(
            "body limit",
            format!(
                "the transport refuses {mib:.0} MiB requests: its max_request_bytes is below the sidecar's max_packet. Fix: raise max_request_bytes on the transport, or lower max_packet here"
            ),
        ),
        413 => fail(
            "body limit",
            format!(
                "a proxy between here and the transport refuses {mib:.0} MiB requests ({} {}): large statements and LOAD DATA would fail with error 1153. Fix: in nginx, client_max_body_size {}m; (at least the sidecar's max_packet)",
                response.status,
                response.reason,
                max_packet.div_ceil(1 << 20)
            ),
        ),
        _ => ok("body limit", format!("a {mib:.0} MiB command (max_packet) may pass")),
    }
}
