//! Where the transport is: the URL taken apart, the token, TLS, the proxy, and what the
//! transport told (silence limit, session timeout); [`TunnelClient`] is the handle to it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use common::config::Secret;
use prometheus_client::metrics::counter::Counter;
use tokio_rustls::TlsConnector;

use super::carrier::Via;
use super::connections::IdleConn;
use super::{Credential, TokenCommand};
use crate::Error;
use crate::config::{Compression, TransportLink};
use crate::http::{DEFAULT_SILENCE_LIMIT, Proxy, RequestHead};

/// Longest a step is sent again after its connection broke (less when the transport's session
/// timeout is shorter: by then the session is gone).
pub(super) const RESUME_FOR: Duration = Duration::from_secs(120);

/// Where the transport is and how to authenticate to it.
pub(super) struct Endpoint {
    pub(super) url: String,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) host_header: String,
    pub(super) prefix: String,
    pub(super) authorization: std::sync::RwLock<Credential>,
    pub(super) connect_timeout: Duration,
    pub(super) tls: Option<TlsConnector>,
    pub(super) proxy: Option<Proxy>,
    /// New HTTP connections made (a metric).
    pub(super) connects: Counter,
    /// Idle connections, oldest first: a stream with the affinity it is tied to, and each
    /// with the thread (shard) whose reactor its socket is registered with.
    pub(super) idle: std::sync::Mutex<Vec<IdleConn>>,
    /// Longest silence tolerated from the transport, in ms: three of its heartbeat intervals
    /// once it has told them.
    pub(super) silence_limit_ms: AtomicU64,
    /// The transport's session timeout in ms, once it has told it.
    pub(super) session_timeout_ms: AtomicU64,
    /// Asks for zstd answers (`transport.compression`).
    pub(super) compress: bool,
    /// The transport said it takes zstd request bodies.
    pub(super) takes_zstd: std::sync::atomic::AtomicBool,
    /// How many commands with an answer one request may carry, as the transport said (1 for a
    /// transport that does not take pipelined commands).
    pub(super) pipeline: std::sync::atomic::AtomicUsize,
    /// The largest part of a resumable upload a stream message carries (0: the transport
    /// takes no resumable uploads, and a body is sent again whole).
    pub(super) upload_part: std::sync::atomic::AtomicUsize,
    /// Whether new connections ask for a stream.
    pub(super) streams: super::connections::Streams,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint").field("url", &self.url).finish_non_exhaustive()
    }
}

/// The parts of the transport's address, as [`TunnelClient::target`] gives them.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    /// Host name or address.
    pub host: &'a str,
    /// Port.
    pub port: u16,
    /// TLS, for `https://`.
    pub tls: Option<&'a TlsConnector>,
    /// The forward proxy, if one is used.
    pub proxy: Option<&'a Proxy>,
    /// Time allowed to connect.
    pub connect_timeout: Duration,
    prefix: &'a str,
    host_header: &'a str,
}

impl<'a> Target<'a> {
    /// The head of a request for `path` under the URL's prefix, its headers to be added.
    pub fn head(self, method: &'a str, path: &'a str) -> RequestHead<'a> {
        let (prefix, host) = (self.prefix, self.host_header);
        RequestHead { method, prefix, path, host, headers: Vec::with_capacity(8) }
    }

    /// A request head as HTTP/1.1 text for `path` under the URL's prefix, ending with `extra`
    /// header lines.
    pub fn request_head(
        &self,
        method: &str,
        path: &str,
        content_length: usize,
        extra: &str,
    ) -> String {
        let mut text = self.head(method, path).text_lines(content_length);
        text.push_str(extra);
        text.push_str("\r\n");
        text
    }
}

impl Endpoint {
    /// What a step's HTTP request to this transport carries besides the step.
    pub(super) fn via<'a>(&'a self, authorization: &'a str, affinity: &'a str) -> Via<'a> {
        Via { prefix: &self.prefix, host: &self.host_header, authorization, affinity }
    }

    pub(super) fn target(&self) -> Target<'_> {
        Target {
            host: &self.host,
            port: self.port,
            tls: self.tls.as_ref(),
            proxy: self.proxy.as_ref(),
            connect_timeout: self.connect_timeout,
            prefix: &self.prefix,
            host_header: &self.host_header,
        }
    }
}

/// A handle to the transport; cheap to clone.
#[derive(Debug, Clone)]
pub struct TunnelClient(pub(super) Arc<Endpoint>);

impl TunnelClient {
    /// A client for the configured transport URL and token.
    pub fn new(link: &TransportLink, connects: Counter) -> Result<Self, Error> {
        let bad = |m: String| Error::Config(common::Error::ConfigInvalid(m));
        let uri: http::Uri = link
            .url
            .parse()
            .map_err(|_| bad(format!("transport.url {:?} is not a URL", link.url)))?;
        let host = uri
            .host()
            .ok_or_else(|| bad("transport.url has no host".into()))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tls = if https { Some(TlsConnector::from(link.tls.build()?)) } else { None };
        if https && link.tls.insecure_skip_verify {
            tracing::warn!(
                "transport.tls.insecure_skip_verify is ON: the transport's certificate is NOT verified; anyone on the path can read passwords and data"
            );
        }
        let host_header = uri.authority().map_or_else(|| host.clone(), |a| a.as_str().to_owned());
        let mut prefix = uri.path().to_owned();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        let authorization = match (&link.token_command, &link.login) {
            (Some(argv), _) => Credential::Command(Arc::new(TokenCommand::new(argv.clone()))),
            (None, Some(login)) => {
                let refresher =
                    crate::login::Refresher::new(login).map_err(|e| bad(e.to_string()))?;
                Credential::Command(Arc::new(TokenCommand::login(refresher)))
            }
            (None, None) => {
                let token = link.token.clone().unwrap_or_default();
                check_token(&token)?;
                Credential::fixed(&token)
            }
        };
        let proxy = Proxy::choose(link.proxy.as_deref(), https, &host, |v| std::env::var(v).ok())?;
        if let Some(proxy) = &proxy {
            tracing::info!(proxy = %proxy.address(), "the transport is reached through a proxy (CONNECT)");
        }
        let url = format!("{}://{host_header}{prefix}", uri.scheme_str().unwrap_or("http"));
        let compress = match link.compression {
            Compression::On => true,
            Compression::Off => false,
            Compression::Auto => !is_loopback(&host),
        };
        Ok(Self(Arc::new(Endpoint {
            url,
            host,
            port,
            host_header,
            prefix,
            authorization: std::sync::RwLock::new(authorization),
            connect_timeout: link.connect_timeout,
            tls,
            proxy,
            connects,
            idle: std::sync::Mutex::new(Vec::new()),
            silence_limit_ms: AtomicU64::new(DEFAULT_SILENCE_LIMIT.as_millis() as u64),
            session_timeout_ms: AtomicU64::new(RESUME_FOR.as_millis() as u64),
            compress,
            takes_zstd: false.into(),
            pipeline: 1.into(),
            upload_part: 0.into(),
            streams: super::connections::Streams::new(link.stream),
        })))
    }

    /// Sends `token` from now on (a reloaded configuration).
    pub fn set_token(&self, token: &Secret) -> Result<(), Error> {
        check_token(token)?;
        *self.0.authorization.write().unwrap_or_else(|p| p.into_inner()) = Credential::fixed(token);
        Ok(())
    }

    /// Where the `Authorization` of new sessions comes from.
    pub fn authorization(&self) -> Credential {
        self.0.authorization.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The base URL, for messages.
    pub fn url(&self) -> &str {
        &self.0.url
    }

    /// Where the transport is, for `sidecar check` to walk to it step by step.
    pub fn target(&self) -> Target<'_> {
        self.0.target()
    }
}

/// True for `localhost` and loopback addresses: the transport is on this machine.
pub(crate) fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses a token that cannot travel in a header.
fn check_token(token: &Secret) -> Result<(), Error> {
    if token.expose().bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(Error::Config(common::Error::ConfigInvalid(
            "transport.token has characters not allowed in a header".into(),
        )));
    }
    Ok(())
}
