//! Transport configuration: YAML schema, defaults in one place, and validation.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::config::{Secret, load_yaml, serde_duration};
use common::telemetry::LogConfig;
use common::tls::ServerTls;
use serde::Deserialize;

use crate::Error;

/// Bytes of a step's answer kept for a resume unless `resume_window` says otherwise.
pub const DEFAULT_RESUME_WINDOW: u64 = 8 << 20;

/// The whole transport configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransportConfig {
    /// Address the HTTP server listens on.
    pub listen: SocketAddr,
    /// Also serve `GET /metrics` here, without a token (keep it off the address nginx reaches).
    pub metrics_listen: Option<SocketAddr>,
    /// Proxies in front (nginx): a request from one of these addresses or blocks is taken to
    /// come from the client it names in `X-Forwarded-For` / `X-Real-IP`.
    pub trusted_proxies: Vec<crate::client_addr::Cidr>,
    /// Bearer tokens accepted from sidecars (several, so they can be rotated).
    pub tokens: Vec<Secret>,
    /// Name of an environment variable holding one more token.
    pub token_env: Option<String>,
    /// Path of a file holding one more token.
    pub token_file: Option<String>,
    /// Path of a file of tokens, one per line (blank lines and `#` comments skipped): several
    /// tokens kept out of this file (systemd's `LoadCredential=`).
    pub tokens_file: Option<String>,
    /// Named identities: each with its token and the upstreams it may reach.
    pub identities: Vec<crate::identity::IdentityConfig>,
    /// JWT bearer tokens of an OpenID Connect issuer.
    pub oidc: Option<crate::identity::OidcConfig>,
    /// The only upstream servers sessions may reach.
    pub upstreams: Vec<UpstreamConfig>,
    /// A session not heard from for this long is closed.
    #[serde(with = "serde_duration")]
    pub session_timeout: Duration,
    /// A session whose sidecar goes silent with no transaction open (a laptop asleep) is
    /// parked, not closed, for this long: its sidecar finds it as it was on waking (the
    /// server's `wait_timeout` still ends it first if shorter). `0s`: sessions are never
    /// parked. A session with a transaction open always ends at `session_timeout`.
    #[serde(with = "serde_duration")]
    pub park_timeout: Duration,
    /// Most sessions parked at once; a silent session past it ends at `session_timeout`. Each
    /// holds an upstream connection: keep it well under the server's `max_connections`.
    pub max_parked_sessions: usize,
    /// Most sessions of one token parked at once.
    pub max_parked_sessions_per_token: usize,
    /// Interval of progress heartbeats while a command runs (keeps proxies from timing out).
    #[serde(with = "serde_duration")]
    pub heartbeat_interval: Duration,
    /// Timeout for connecting to an upstream.
    #[serde(with = "serde_duration")]
    pub connect_timeout: Duration,
    /// Largest request body accepted (a command packet, e.g. a big INSERT).
    pub max_request_bytes: usize,
    /// An HTTP connection between requests, or a request's head, may take this long; then the
    /// connection is closed. Longer than nginx's upstream `keepalive_timeout` (60s), so nginx
    /// never sends on a connection the transport is closing.
    #[serde(with = "serde_duration")]
    pub idle_timeout: Duration,
    /// Longest pause while a request body arrives; then the request fails with 408.
    #[serde(with = "serde_duration")]
    pub body_timeout: Duration,
    /// Most HTTP connections at once; beyond it new connections are closed at once.
    pub max_connections: usize,
    /// Most bytes of command and file bodies held at once, over all sessions; a request that
    /// would exceed it waits (up to `body_timeout`) for room, then gets 503.
    pub max_inflight_bytes: usize,
    /// Most sessions at once; beyond it logins get error 1040.
    pub max_sessions: usize,
    /// The same limit for the sessions of any one token (identity).
    pub max_sessions_per_token: usize,
    /// Most sessions of one identity opened but not logged in yet (each an upstream
    /// connection waiting for a login); such a session also ends after `connect_timeout`.
    pub max_sessions_logging_in_per_token: usize,
    /// Most WebSocket streams of one identity at once.
    pub max_streams_per_token: usize,
    /// Most upstream connects of one identity in flight at once; more wait (up to
    /// `connect_timeout`) for one of theirs to end.
    pub max_opening_per_token: usize,
    /// One identity's share of `max_inflight_bytes` (at least `max_request_bytes`).
    pub max_inflight_bytes_per_token: usize,
    /// Most HTTP connections from one client address (an IPv6 one by its /64); a trusted
    /// proxy's connections are not counted (its clients are limited by it).
    pub max_connections_per_client: usize,
    /// Most HTTP connections whose place is one identity's own (it showed its token on them);
    /// its others stay among those a new connection may take the place of.
    pub max_connections_per_token: usize,
    /// Serve HTTPS (certificate, key, optional client CA for mTLS).
    pub tls: Option<ServerTls>,
    /// Threads, each with its own single-threaded runtime, that connections are spread over
    /// (`common::shards`); 0 = one per CPU core.
    pub worker_threads: usize,
    /// On SIGTERM, how long running commands may go on; then their statements are ended
    /// (`KILL QUERY`, see `admin_user`) and their clients get error 1053.
    #[serde(with = "serde_duration")]
    pub shutdown_grace: Duration,
    /// A Unix socket (created 0600) where a new transport started with `--take-over` takes
    /// this one's listeners and sessions over (an upgrade that keeps every session); off
    /// unless set. Unix only.
    pub take_over_socket: Option<std::path::PathBuf>,
    /// Compress answers with zstd for sidecars that ask (`Accept-Encoding: zstd`).
    pub compression: bool,
    /// Bytes of a session's last answer kept for a resume after a broken connection (per
    /// session streaming an answer); 0: answers are not resumed.
    pub resume_window: u64,
    /// Bytes kept for resumes by all sessions together; a session that finds no room keeps
    /// less of its answer, and a cut beyond what it kept is a lost connection for its client.
    pub max_resume_bytes: u64,
    /// One identity's share of `max_resume_bytes`: its sessions together keep no more.
    pub max_resume_bytes_per_token: u64,
    /// The audit log: one JSON line per command (off unless set).
    pub audit: Option<crate::audit::AuditConfig>,
    /// Logging.
    pub log: LogConfig,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            metrics_listen: None,
            trusted_proxies: Vec::new(),
            tokens: Vec::new(),
            token_env: None,
            token_file: None,
            tokens_file: None,
            identities: Vec::new(),
            oidc: None,
            upstreams: Vec::new(),
            session_timeout: Duration::from_secs(30),
            park_timeout: Duration::from_secs(8 * 3600),
            max_parked_sessions: 64,
            max_parked_sessions_per_token: 20,
            heartbeat_interval: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            max_request_bytes: 64 << 20,
            idle_timeout: Duration::from_secs(75),
            body_timeout: Duration::from_secs(30),
            max_connections: 4096,
            max_inflight_bytes: 256 << 20,
            max_sessions: 1000,
            max_sessions_per_token: 100,
            max_sessions_logging_in_per_token: 128,
            max_streams_per_token: 128,
            max_opening_per_token: 32,
            max_inflight_bytes_per_token: 128 << 20,
            max_connections_per_client: 256,
            max_connections_per_token: 256,
            tls: None,
            worker_threads: 0,
            shutdown_grace: Duration::from_secs(10),
            take_over_socket: None,
            compression: true,
            resume_window: DEFAULT_RESUME_WINDOW,
            max_resume_bytes: 256 << 20,
            max_resume_bytes_per_token: 128 << 20,
            audit: None,
            log: LogConfig::default(),
        }
    }
}

/// One upstream database server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Name sidecars refer to.
    pub name: String,
    /// `host:port` of the MySQL/MariaDB server.
    pub address: String,
    /// Connect to it over TLS.
    #[serde(default)]
    pub tls: Option<UpstreamTls>,
    /// The transport's own account: readiness probes (`/v1/ready`), and ending a running
    /// statement (`KILL QUERY`) cut short at shutdown or when a sidecar shutting down asks.
    /// It needs CONNECTION ADMIN (MariaDB 10.5+; SUPER before) or MySQL's CONNECTION_ADMIN.
    /// Without it, a `users` entry's statement is ended with the entry's own credentials and a
    /// passthrough statement runs on until the server notices its connection is closed.
    #[serde(default)]
    pub admin_user: Option<String>,
    /// Password of `admin_user` (or `admin_password_env` / `admin_password_file`).
    #[serde(default)]
    pub admin_password: Option<Secret>,
    /// Environment variable holding `admin_user`'s password.
    #[serde(default)]
    pub admin_password_env: Option<String>,
    /// File holding `admin_user`'s password.
    #[serde(default)]
    pub admin_password_file: Option<String>,
}

/// TLS to an upstream server.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamTls {
    /// PEM CA certificates that sign the server's certificate (default: the operating
    /// system's trusted roots).
    pub ca_file: Option<std::path::PathBuf>,
    /// Accept a certificate whose name does not match the address (e.g. an IP address).
    pub skip_domain_validation: bool,
}

impl TransportConfig {
    /// Loads, resolves secrets and validates a config file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let mut config: Self = load_yaml(path)?;
        config.resolve_secrets()?;
        config.validate()?;
        Ok(config)
    }

    /// The config file when `--config` is not given.
    pub fn default_path() -> Option<std::path::PathBuf> {
        Some("/etc/sqltunnel/transport.yaml".into())
    }

    /// The transport needs a file: the flags are the sidecar's.
    pub fn from_flags(_: &common::cli::LinkFlags) -> Result<Self, Error> {
        Err(Error::Config(common::Error::ConfigInvalid(
            "no configuration: pass --config FILE (default /etc/sqltunnel/transport.yaml)".into(),
        )))
    }

    /// `--transport` and `--token-env` are the sidecar's.
    pub fn apply_flags(&mut self, _: &common::cli::LinkFlags) -> Result<(), Error> {
        Err(Error::Config(common::Error::ConfigInvalid(
            "--transport and --token-env are sidecar options".into(),
        )))
    }

    /// Adds the tokens given through `token_env` / `token_file` / `tokens_file`.
    pub fn resolve_secrets(&mut self) -> Result<(), Error> {
        if let Some(path) = &self.tokens_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::Config(common::Error::ConfigInvalid(format!("tokens_file {path}: {e}")))
            })?;
            let listed =
                text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
            self.tokens.extend(listed.map(Secret::new));
        }
        for (env, file) in [(self.token_env.clone(), None), (None, self.token_file.clone())] {
            if let Some(token) = Secret::resolve("token", None, env.as_deref(), file.as_deref())? {
                self.tokens.push(token);
            }
        }
        for identity in &mut self.identities {
            identity.resolve()?;
        }
        for u in &mut self.upstreams {
            let (env, file) = (u.admin_password_env.take(), u.admin_password_file.take());
            let inline = u.admin_password.take();
            u.admin_password =
                Secret::resolve("admin_password", inline, env.as_deref(), file.as_deref())?;
        }
        Ok(())
    }

    /// The upstream with this name, if configured.
    /// An empty name means the only upstream, when there is exactly one.
    pub fn upstream(&self, name: &str) -> Option<&UpstreamConfig> {
        match self.upstreams.as_slice() {
            [only] if name.is_empty() => Some(only),
            all => all.iter().find(|u| u.name == name),
        }
    }
}

common::service_config!(TransportConfig);

#[cfg(test)]
mod tests {
    use common::config::parse_yaml;

    use super::*;

    const MINIMAL: &str = "listen: 127.0.0.1:8080\ntokens: [0123456789abcdef0123456789abcdef]\nupstreams:\n  - name: main\n    address: 127.0.0.1:3306\nsession_timeout: 30s\n";

    #[test]
    fn minimal_config_parses_with_defaults() {
        let c: TransportConfig = parse_yaml(MINIMAL).expect("parses");
        assert!(c.validate().is_ok());
        assert_eq!(c.session_timeout, Duration::from_secs(30));
        assert_eq!(c.upstream("main").map(|u| u.address.as_str()), Some("127.0.0.1:3306"));
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let text = format!("{MINIMAL}sesion_timeout: 5s\n");
        let err =
            parse_yaml::<TransportConfig>(&text).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("sesion_timeout"), "{err}");
        assert!(err.contains("line 7") || err.contains("7:"), "{err}");
    }

    #[test]
    fn validation_refuses_nonsense() {
        let mut c: TransportConfig = parse_yaml(MINIMAL).expect("parses");
        c.tokens.clear();
        assert!(c.validate().is_err());
        let c: TransportConfig =
            parse_yaml(&MINIMAL.replace("127.0.0.1:3306", "db-without-port")).expect("parses");
        assert!(c.validate().is_err());
    }
}
