//! The transport's API once reached: the path, the round trip, the token, the upstreams and
//! their versions, a proxy's body limit.

use std::time::Duration;

use bytes::Bytes;
use common::mysql::err_packet::ErrPacket;
use common::wire::{JSON_CONTENT_TYPE, NGINX_STREAM_LINES, OpenRelay, Route, TurnEnd};
use serde::Deserialize;

use super::line::{Line, fail, ok, warn};
use crate::Error;
use crate::config::{SidecarConfig, StreamMode};
use crate::error::Broken;
use crate::http::{AnswerBody, HttpConn, OpenedAs, ResponseHead, Upgrade, upgrade_request};
use crate::tunnel::{Target, TunnelClient, other_version, refuses_streams};

/// Longest wait for the answer to the body-limit request's head.
const BODY_LIMIT_WAIT: Duration = Duration::from_secs(5);
/// Largest body read from a diagnostic answer.
const MAX_BODY: usize = 64 * 1024;

/// A new connection to the transport (through the proxy, with TLS, as configured).
async fn connect(target: &Target<'_>) -> std::io::Result<HttpConn> {
    let (host, port, timeout) = (target.host, target.port, target.connect_timeout);
    HttpConn::connect(host, port, timeout, target.tls, target.proxy).await
}

/// Sends a GET on `conn`; answers the head and the body.
pub async fn get(
    target: &Target<'_>,
    conn: &mut HttpConn,
    path: &str,
    extra: &str,
) -> std::io::Result<(Box<ResponseHead>, Bytes)> {
    let head = target.request_head("GET", path, 0, extra);
    let response = conn.request(head.as_bytes(), b"").await?;
    let body = conn.body_to_end(MAX_BODY).await?;
    Ok((response, body))
}

/// `GET v1/health`: is a sqltunnel transport at this URL?
pub async fn health(target: &Target<'_>, conn: &mut HttpConn, url: &str) -> Line {
    #[derive(Deserialize)]
    struct Health {
        status: String,
    }
    let (head, body) = match get(target, conn, &Route::Health.path(), "").await {
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
                "the proxy at {url} answered {}: the transport behind it is down or unreachable from it. Fix: start the transport, or correct the proxy's proxy_pass",
                head.status_line()
            ),
        ),
        _ => fail(
            "transport",
            format!(
                "{url}v1/health answered {}, which is not a sqltunnel answer. Fix: transport.url points at another service; correct its host, port or path",
                head.status_line()
            ),
        ),
    }
}

/// The median of the timed round trips.
pub fn round_trip(mut times: Vec<Duration>) -> Line {
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

/// The `Authorization` header line of the sidecar's requests now (empty when a token command
/// gives none: the token step says why).
async fn authorization_line(tunnel: &TunnelClient) -> String {
    match tunnel.authorization().header().await {
        Ok(header) => format!("Authorization: {header}\r\n"),
        Err(_) => String::new(),
    }
}

/// An authenticated request (an empty keep-alive): is the token accepted, and who did the
/// transport take the sidecar for (its `/v1/ready` names the identity and what it may reach)?
pub async fn token(tunnel: &TunnelClient, target: &Target<'_>, config: &SidecarConfig) -> Line {
    let link = &config.transport;
    let source = match (&link.token_env, &link.token_file, &link.token_command, &link.login) {
        (Some(var), ..) => format!("the environment variable {var}"),
        (None, Some(file), ..) => format!("the file {file}"),
        (None, None, Some(argv), _) => format!("token_command {}", argv.join(" ")),
        (None, None, None, Some(login)) => match crate::login::status(login) {
            Ok(status) => format!("the login: {status}"),
            Err(why) => return fail("token", format!("{why}. Fix: run `sidecar login`")),
        },
        (None, None, None, None) => "transport.token".into(),
    };
    let given_elsewhere = link.token_command.is_some() || link.login.is_some();
    if !given_elsewhere && link.token.as_ref().is_none_or(|t| t.expose().is_empty()) {
        return fail(
            "token",
            format!("no token: {source} is empty. Fix: set it to one of the transport's tokens"),
        );
    }
    match tunnel.connection("check").keep_alive(Vec::new(), Duration::ZERO).await {
        Ok(_) => {}
        Err(Error::TokenRefused { reason, .. }) => {
            return fail(
                "token",
                format!(
                    "the transport refused the token from {source} (401: {reason}). Fix: use a token of one of the transport's identities"
                ),
            );
        }
        Err(e @ Error::LoginNeeded(_)) => return fail("token", e.to_string()),
        Err(e) => return fail("token", format!("{e}")),
    }
    #[derive(Deserialize)]
    struct Whoami {
        identity: Option<String>,
        #[serde(default)]
        upstreams: Vec<Named>,
    }
    #[derive(Deserialize)]
    struct Named {
        name: String,
    }
    let asked = async {
        let mut conn = connect(target).await?;
        let line = authorization_line(tunnel).await;
        let (_, body) = get(target, &mut conn, &Route::Ready.path(), &line).await?;
        serde_json::from_slice::<Whoami>(&body).map_err(std::io::Error::other)
    };
    match tokio::time::timeout(target.connect_timeout * 2, asked).await {
        Ok(Ok(Whoami { identity: Some(who), upstreams })) => {
            let names: Vec<String> = upstreams.into_iter().map(|u| u.name).collect();
            let reach = if names.is_empty() { "none".into() } else { names.join(", ") };
            ok("token", format!("accepted as {who} (from {source}), upstreams: {reach}"))
        }
        _ => ok("token", format!("accepted (from {source})")),
    }
}

/// Which carrier the path allows: a WebSocket stream (the upgrade passes every proxy on the
/// way) or one HTTP request per command, and what `transport.stream` makes of it.
pub async fn carrier(tunnel: &TunnelClient, target: &Target<'_>, mode: StreamMode) -> Line {
    if mode == StreamMode::Off {
        return ok("stream", "off (transport.stream): one HTTP request per command".into());
    }
    let (key, lines) = upgrade_request();
    let headers = format!("{}{lines}", authorization_line(tunnel).await);
    let head = target.request_head("GET", &Route::Stream.path(), 0, &headers);
    let opened_as = OpenedAs(std::sync::Arc::from(""));
    let upgraded = match connect(target).await {
        Ok(conn) => conn.upgrade(head.as_bytes(), &key, opened_as).await,
        Err(e) => Err(e),
    };
    let refusal = match upgraded {
        Ok(Upgrade::Stream(_)) => {
            return ok(
                "stream",
                "the path passes WebSocket upgrades: sessions ride streams".into(),
            );
        }
        Ok(Upgrade::Refused(_, refusal, _)) if !refuses_streams(refusal.status) => {
            let status = refusal.status_line();
            let text = format!("the upgrade to a stream was answered {status}, as any request");
            return fail("stream", format!("{text}. Fix: as for the steps above"));
        }
        Ok(Upgrade::Refused(_, refusal, body)) => match other_version(&refusal, &body) {
            Some(said) => {
                let text = format!(
                    "the transport speaks another stream version ({said}): one HTTP request per command until sidecar and transport are of one release"
                );
                return if mode == StreamMode::On {
                    fail("stream", text)
                } else {
                    warn("stream", text)
                };
            }
            None => refusal.status_line(),
        },
        Err(e) => e.to_string(),
    };
    let text = format!(
        "the path does not pass WebSocket upgrades ({refusal}): one HTTP request per command, which works but costs more. Fix: in nginx, {NGINX_STREAM_LINES}"
    );
    if mode == StreamMode::On { fail("stream", text) } else { warn("stream", text) }
}

/// The transport's upstreams (its readiness report), each with its server version, and the
/// sidecar's references to them.
pub async fn upstreams(
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
        let mut conn = connect(target).await?;
        let authorization = authorization_line(tunnel).await;
        let (_, body) = get(target, &mut conn, &Route::Ready.path(), &authorization).await?;
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
    let open = OpenRelay { upstream: upstream.to_owned(), ..OpenRelay::default() };
    let (session, _, mut frames) = conn.open_relay(&open).await?;
    let (greeting, end) = frames.payloads().await?;
    if !session.is_empty() {
        conn.close_session(&session).await;
    }
    let first = greeting.first().map(|p| &p[..]).unwrap_or_default();
    match (end, first.split_first()) {
        (Some(TurnEnd::AwaitAuth), Some((10, _))) => {
            let version = common::mysql::greeting::Greeting::parse(first)
                .map(|g| g.version)
                .ok_or(Broken::Greeting("a greeting cut short"))?;
            // MariaDB prefixes its version with 5.5.5- for old clients.
            Ok(version.strip_prefix("5.5.5-").unwrap_or(&version).to_owned())
        }
        _ => match ErrPacket::parse_before_greeting(first) {
            Some(err) if !err.message.is_empty() => {
                let said = String::from_utf8_lossy(err.message).into_owned();
                Err(Broken::UpstreamSaid(said).into())
            }
            _ => Err(Broken::Greeting("no greeting").into()),
        },
    }
}

/// Announces a command body of `max_packet` bytes (with `Expect: 100-continue`, sending
/// none of it): a proxy whose body limit is lower answers 413 at once.
pub async fn body_limit(tunnel: &TunnelClient, target: &Target<'_>, max_packet: usize) -> Line {
    let mib = max_packet as f64 / f64::from(1 << 20);
    let headers = format!(
        "{}Content-Type: application/octet-stream\r\nExpect: 100-continue\r\n",
        authorization_line(tunnel).await
    );
    let path = Route::Command("sqltunnelcheck".into()).path();
    let head = target.request_head("POST", &path, max_packet, &headers);
    let ask = async {
        let mut conn = connect(target).await?;
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
                "a proxy between here and the transport refuses {mib:.0} MiB requests ({}): large statements and LOAD DATA would fail with error 1153. Fix: in nginx, client_max_body_size {}m; (at least the sidecar's max_packet)",
                response.status_line(),
                max_packet.div_ceil(1 << 20)
            ),
        ),
        _ => ok("body limit", format!("a {mib:.0} MiB command (max_packet) may pass")),
    }
}
