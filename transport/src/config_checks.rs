//! The transport configuration's checks of values that parse but make no sense (or open the
//! door too wide): tokens, upstreams, limits, timeouts.

use std::time::Duration;

use crate::Error;
use crate::config::TransportConfig;

impl TransportConfig {
    /// Checks values that parse but make no sense.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |m: String| Err(Error::Config(common::Error::ConfigInvalid(m)));
        if self.tokens.is_empty() && self.identities.is_empty() && self.oidc.is_none() {
            return invalid(
                "`tokens`, `identities` or `oidc` must let someone in: make a token with `transport gen-token`".into(),
            );
        }
        for (i, token) in self.tokens.iter().enumerate() {
            if let Some(why) = crate::identity::strength::weakness(token.expose()) {
                // Which one, by place: `tokens` first, then tokens_file's, token_env, token_file.
                return invalid(format!("tokens[{i}]: {why}"));
            }
        }
        if self.upstreams.is_empty() {
            return invalid("`upstreams` must list at least one upstream".into());
        }
        for (i, u) in self.upstreams.iter().enumerate() {
            if u.name.is_empty() || u.address.is_empty() {
                return invalid(format!("upstreams[{i}]: `name` and `address` are required"));
            }
            if self.upstreams[..i].iter().any(|o| o.name == u.name) {
                return invalid(format!("upstreams[{i}]: duplicate name {:?}", u.name));
            }
            let port = u.address.rsplit_once(':').map(|(_, port)| port.parse::<u16>());
            if !matches!(port, Some(Ok(p)) if p > 0) {
                return invalid(format!(
                    "upstreams[{i}]: address {:?} needs a port (host:port)",
                    u.address
                ));
            }
            if u.tls.as_ref().is_some_and(|t| t.skip_domain_validation && t.ca_file.is_none()) {
                // Any publicly trusted certificate, for any name, would pass.
                return invalid(format!(
                    "upstreams[{i}]: `tls.skip_domain_validation` needs `tls.ca_file` (the CA of this server only)"
                ));
            }
            if u.admin_password.is_some() && u.admin_user.is_none() {
                return invalid(format!("upstreams[{i}]: `admin_password` needs `admin_user`"));
            }
        }
        let names: Vec<&str> = self.upstreams.iter().map(|u| u.name.as_str()).collect();
        crate::identity::config::validate(&self.identities, self.oidc.as_ref(), &names)?;
        // Reads a `jwks_file` and builds the issuer's TLS settings: what fails here fails now.
        crate::identity::Identities::new(&self.tokens, &self.identities, self.oidc.as_ref(), None)?;
        self.log.validate()?;
        if self.session_timeout < Duration::from_secs(1) {
            return invalid("`session_timeout` must be at least 1s".into());
        }
        if self.heartbeat_interval < Duration::from_millis(100) {
            return invalid("`heartbeat_interval` must be at least 100ms".into());
        }
        if let Some(tls) = &self.tls {
            tls.build()?;
        }
        if self.idle_timeout < Duration::from_secs(1) || self.body_timeout < Duration::from_secs(1)
        {
            return invalid("`idle_timeout` and `body_timeout` must be at least 1s".into());
        }
        if self.max_inflight_bytes < self.max_request_bytes
            || self.max_inflight_bytes > u32::MAX as usize
        {
            return invalid(
                "`max_inflight_bytes` must be at least `max_request_bytes` and below 4 GiB".into(),
            );
        }
        if self.max_connections == 0 {
            return invalid("`max_connections` must be at least 1".into());
        }
        let at_least_one = [
            ("max_sessions", self.max_sessions),
            ("max_sessions_per_token", self.max_sessions_per_token),
            ("max_sessions_logging_in_per_token", self.max_sessions_logging_in_per_token),
            ("max_streams_per_token", self.max_streams_per_token),
            ("max_opening_per_token", self.max_opening_per_token),
            ("max_connections_per_client", self.max_connections_per_client),
            ("max_connections_per_token", self.max_connections_per_token),
        ];
        if let Some((key, _)) = at_least_one.iter().find(|(_, n)| *n == 0) {
            return invalid(format!("`{key}` must be at least 1"));
        }
        if self.max_inflight_bytes_per_token < self.max_request_bytes {
            return invalid(
                "`max_inflight_bytes_per_token` must be at least `max_request_bytes`".into(),
            );
        }
        Ok(())
    }
}
