//! Sidecar configuration: YAML schema, defaults in one place, and validation.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::config::{Secret, load_yaml, serde_duration};
use common::telemetry::LogConfig;
use common::tls::ClientTls;
use serde::Deserialize;

use crate::Error;
use crate::client_tls::ClientLegTls;

/// The whole sidecar configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SidecarConfig {
    /// Address the MySQL server side listens on (loopback by default).
    pub listen: SocketAddr,
    /// How to reach the transport.
    pub transport: TransportLink,
    /// Local logins, each mapped to an upstream and its credentials.
    pub users: Vec<UserConfig>,
    /// Who may log in: `users` entries, and (passthrough) anyone the upstream accepts.
    pub auth: AuthConfig,
    /// How often live sessions are reported to the transport.
    #[serde(with = "serde_duration")]
    pub heartbeat_interval: Duration,
    /// Time a client has to complete its login.
    #[serde(with = "serde_duration")]
    pub handshake_timeout: Duration,
    /// Largest command packet accepted from a client (bytes).
    pub max_packet: usize,
    /// Most client connections at once; beyond it a new one gets error 1040.
    pub max_clients: usize,
    /// Most bytes of client commands held at once over all clients (at least `max_packet`); a
    /// command beyond it waits for room.
    pub max_inflight_bytes: usize,
    /// TLS for clients that ask for it.
    pub client_tls: ClientLegTls,
    /// Threads, each with its own single-threaded runtime, that connections are spread over
    /// (`common::shards`); 0 = one per CPU core.
    pub worker_threads: usize,
    /// Serve `GET /metrics` here (e.g. `127.0.0.1:9109`); off unless set.
    pub metrics_listen: Option<SocketAddr>,
    /// On SIGTERM, how long running commands may go on; then the transport ends their
    /// statements (`KILL QUERY`) and their clients get error 1053.
    #[serde(with = "serde_duration")]
    pub shutdown_grace: Duration,
    /// Logging.
    pub log: LogConfig,
    /// The file it was loaded from, if any (not a setting: for the warning about who may read
    /// the secrets in it, `exposure.rs`).
    #[serde(skip)]
    pub loaded_from: Option<std::path::PathBuf>,
}

impl Default for SidecarConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 3306)),
            transport: TransportLink::default(),
            users: Vec::new(),
            auth: AuthConfig::default(),
            heartbeat_interval: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            max_packet: 64 << 20,
            max_clients: 1000,
            max_inflight_bytes: 256 << 20,
            client_tls: ClientLegTls::default(),
            worker_threads: 0,
            metrics_listen: None,
            shutdown_grace: Duration::from_secs(10),
            log: LogConfig::default(),
            loaded_from: None,
        }
    }
}

/// The `transport` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransportLink {
    /// Base URL of the transport, possibly with a path prefix (`https://gw/db-tunnel/`).
    pub url: String,
    /// Bearer token.
    pub token: Option<Secret>,
    /// Environment variable holding the token.
    pub token_env: Option<String>,
    /// File holding the token.
    pub token_file: Option<String>,
    /// A command that prints the token (program and arguments), run again when the token
    /// expires (a JWT's `exp`) or is refused: an SSO helper, a secrets manager's CLI.
    pub token_command: Option<Vec<String>>,
    /// A person's single sign-on (`sidecar login`): the provider, and this sidecar's client.
    pub login: Option<crate::login_config::LoginConfig>,
    /// Time allowed to connect to the transport.
    #[serde(with = "serde_duration")]
    pub connect_timeout: Duration,
    /// How to trust an `https://` transport.
    pub tls: ClientTls,
    /// An HTTP forward proxy to reach the transport through (`http://[user:pass@]host:port`,
    /// with CONNECT), or `direct`; unset: `HTTPS_PROXY` / `HTTP_PROXY` and `NO_PROXY`.
    pub proxy: Option<String>,
    /// zstd on answers from the transport: `auto` (on unless the transport is on this
    /// machine), `on` or `off`.
    pub compression: Compression,
    /// The session stream: `auto` (a WebSocket stream when the path passes the upgrade, else
    /// one HTTP request per step), `on` (streams only) or `off` (requests only).
    pub stream: StreamMode,
}

/// Whether requests travel on a WebSocket stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamMode {
    /// Tried on each new connection; a path that refuses it is remembered for a while.
    #[default]
    Auto,
    /// Required: a path that refuses it is an error.
    On,
    /// Never asked for.
    Off,
}

/// Whether answers from the transport are compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// On unless the transport's host is a loopback address or `localhost`.
    #[default]
    Auto,
    /// Always asked for.
    On,
    /// Never asked for.
    Off,
}

impl Default for TransportLink {
    fn default() -> Self {
        Self {
            url: String::new(),
            token: None,
            token_env: None,
            token_file: None,
            token_command: None,
            login: None,
            connect_timeout: Duration::from_secs(10),
            tls: ClientTls::default(),
            proxy: None,
            compression: Compression::Auto,
            stream: StreamMode::Auto,
        }
    }
}

/// The `auth` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `passthrough` or `users`; default: `passthrough` when `users` is empty, else `users`.
    pub mode: Option<AuthMode>,
    /// Upstream for passed-through logins (default: the transport's only upstream).
    pub upstream: Option<String>,
    /// A passed-through login may answer a server that asks for the password in clear
    /// (`mysql_clear_password`, `dialog`: PAM or LDAP logins); off by default, since the server
    /// (or whoever stands in for it on a leg without TLS) then reads the password.
    pub cleartext_passwords: bool,
}

/// How logins are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// `users` entries use them; everyone else logs in with their own database credentials.
    Passthrough,
    /// Only `users` entries may log in.
    Users,
}

/// A local login.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// Login name the client uses.
    pub name: String,
    /// Password the client uses (checked with mysql_native_password).
    pub password: Secret,
    /// Upstream name on the transport.
    pub upstream: String,
    /// User name upstream (default: `name`).
    #[serde(default)]
    pub upstream_user: Option<String>,
    /// Password upstream (default: `password`).
    #[serde(default)]
    pub upstream_password: Option<Secret>,
}

impl UserConfig {
    /// The upstream login name.
    pub fn upstream_user(&self) -> &str {
        self.upstream_user.as_deref().unwrap_or(&self.name)
    }

    /// The upstream password.
    pub fn upstream_password(&self) -> &Secret {
        self.upstream_password.as_ref().unwrap_or(&self.password)
    }
}

impl SidecarConfig {
    /// Loads, resolves secrets and validates a config file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let mut config: Self = load_yaml(path)?;
        config.loaded_from = Some(path.to_owned());
        config.resolve_secrets()?;
        config.validate()?;
        Ok(config)
    }

    /// The config file when `--config` is not given: `sqltunnel/sidecar.yaml` in the user's
    /// config directory: `%APPDATA%` on Windows, else `$XDG_CONFIG_HOME` or `~/.config` (on
    /// macOS too, as for most command-line tools).
    pub fn default_path() -> Option<std::path::PathBuf> {
        let set = |var: &str| std::env::var_os(var).filter(|d| !d.is_empty());
        let windows = if cfg!(windows) { set("APPDATA") } else { None };
        let dir = windows
            .or_else(|| set("XDG_CONFIG_HOME"))
            .map(std::path::PathBuf::from)
            .or_else(|| set("HOME").map(|h| std::path::PathBuf::from(h).join(".config")))?;
        Some(dir.join("sqltunnel").join("sidecar.yaml"))
    }

    /// A laptop's sidecar without a file: `--transport URL` and the token from `--token-env`
    /// (default `SQLTUNNEL_TOKEN`); everything else at its default (passthrough logins on
    /// 127.0.0.1:3306).
    pub fn from_flags(flags: &common::cli::LinkFlags) -> Result<Self, Error> {
        let Some(url) = &flags.transport else {
            let default = Self::default_path().map(|p| p.display().to_string()).unwrap_or_default();
            return Err(Error::Config(common::Error::ConfigInvalid(format!(
                "no configuration: pass --transport URL (and the token in $SQLTUNNEL_TOKEN), or --config FILE (default {default})"
            ))));
        };
        let mut config = Self::default();
        config.transport.url = url.clone();
        config.transport.token_env =
            Some(flags.token_env.clone().unwrap_or_else(|| "SQLTUNNEL_TOKEN".into()));
        config.resolve_secrets()?;
        config.validate()?;
        Ok(config)
    }

    /// `--transport` / `--token-env` over a loaded file.
    pub fn apply_flags(&mut self, flags: &common::cli::LinkFlags) -> Result<(), Error> {
        if let Some(url) = &flags.transport {
            self.transport.url = url.clone();
        }
        if let Some(var) = &flags.token_env {
            let t = &mut self.transport;
            (t.token, t.token_env, t.token_file) = (None, Some(var.clone()), None);
            t.token_command = None;
            self.resolve_secrets()?;
        }
        self.validate()
    }

    /// Resolves `transport.token_env` / `transport.token_file`.
    pub fn resolve_secrets(&mut self) -> Result<(), Error> {
        let t = &mut self.transport;
        t.token = Secret::resolve(
            "transport.token",
            t.token.take(),
            t.token_env.as_deref(),
            t.token_file.as_deref(),
        )?;
        Ok(())
    }

    /// Checks values that parse but make no sense.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |m: String| Err(Error::Config(common::Error::ConfigInvalid(m)));
        let url = &self.transport.url;
        if !url.starts_with("http://") && !url.starts_with("https://") {
            return invalid(format!("transport.url {url:?} must start with http:// or https://"));
        }
        if url.starts_with("https://") {
            self.transport.tls.build()?;
        }
        if url.parse::<http::Uri>().is_err() {
            return invalid(format!("transport.url {url:?} is not a valid URL"));
        }
        let t = &self.transport;
        match (&t.token, &t.token_command, &t.login) {
            (None, None, None) => {
                return invalid(
                    "transport.token (or token_env / token_file / token_command / login) is required"
                        .into(),
                );
            }
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                return invalid("set one of transport.token (or token_env / token_file), transport.token_command and transport.login".into());
            }
            (None, None, Some(login)) if login.issuer.is_empty() || login.client_id.is_empty() => {
                return invalid("transport.login: `issuer` and `client_id` are required".into());
            }
            (None, Some(argv), None) if argv.first().is_none_or(String::is_empty) => {
                return invalid(
                    "transport.token_command: name a program (a list: [program, args…])".into(),
                );
            }
            _ => {}
        }
        if self.users.is_empty() && !self.passthrough() {
            return invalid(
                "auth.mode is `users` but `users` lists no login (list some, or use auth.mode: passthrough)".into(),
            );
        }
        for (i, u) in self.users.iter().enumerate() {
            if u.name.is_empty() || u.upstream.is_empty() {
                return invalid(format!("users[{i}]: `name` and `upstream` are required"));
            }
            if self.users[..i].iter().any(|o| o.name == u.name) {
                return invalid(format!("users[{i}]: duplicate name {:?}", u.name));
            }
            if u.password.expose().is_empty() {
                return invalid(format!(
                    "users[{i}] ({:?}): `password` is empty, so any program on this machine could log in as it: set a password",
                    u.name
                ));
            }
        }
        if self.client_tls.enabled && self.client_tls.cert_file.is_some() {
            self.client_tls.acceptor()?;
        }
        self.log.validate()?;
        if self.max_clients == 0 {
            return invalid("`max_clients` must be at least 1".into());
        }
        if self.max_inflight_bytes < self.max_packet {
            return invalid("`max_inflight_bytes` must be at least `max_packet`".into());
        }
        if self.max_packet < 1024 {
            return invalid("`max_packet` must be at least 1024".into());
        }
        Ok(())
    }

    /// True when users without an entry log in with their own database credentials.
    pub fn passthrough(&self) -> bool {
        let default = if self.users.is_empty() { AuthMode::Passthrough } else { AuthMode::Users };
        self.auth.mode.unwrap_or(default) == AuthMode::Passthrough
    }

    /// The upstream passed-through logins go to (empty: the transport's only one).
    pub fn passthrough_upstream(&self) -> &str {
        self.auth.upstream.as_deref().unwrap_or("")
    }

    /// The upstream whose version the greeting announces.
    pub fn default_upstream(&self) -> &str {
        self.users.first().map_or(self.passthrough_upstream(), |u| u.upstream.as_str())
    }

    /// The login with this name.
    pub fn user(&self, name: &str) -> Option<&UserConfig> {
        self.users.iter().find(|u| u.name == name)
    }
}

common::service_config!(SidecarConfig);

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
