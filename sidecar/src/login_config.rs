//! The `transport.login` section of the sidecar's config: the identity provider a person
//! logs in at with `sidecar login` (`login/`), and the sidecar's client there.

use serde::Deserialize;

/// The `transport.login` section: the provider a person logs in at.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginConfig {
    /// The provider's issuer URL (its discovery document is read from it).
    pub issuer: String,
    /// The sidecar's client id there: a public, native client with a loopback redirect
    /// (`http://127.0.0.1/callback`, any port) and the device grant.
    pub client_id: String,
    /// The scopes asked for (`offline_access` gets a refresh token at most providers).
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The transport's resource indicator (RFC 8707), for providers that issue access tokens
    /// per resource.
    #[serde(default)]
    pub resource: Option<String>,
}

fn default_scopes() -> Vec<String> {
    vec!["openid".into(), "offline_access".into()]
}
