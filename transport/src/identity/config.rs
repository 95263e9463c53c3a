//! The configuration of who may use the transport: named identities (each with its token and
//! the upstreams it may reach) and OpenID Connect bearer tokens (JWTs of one issuer).

use std::collections::BTreeMap;
use std::time::Duration;

use common::config::{Secret, serde_duration};
use serde::Deserialize;

use crate::Error;

/// What every upstream means in an `upstreams` list.
pub const ALL_UPSTREAMS: &str = "*";

/// The algorithms a JWT may be signed with, as JOSE names them.
pub const ALGORITHMS: [&str; 3] = ["RS256", "ES256", "EdDSA"];

/// One person (or service) allowed in, by name.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdentityConfig {
    /// Who it is: in the audit log, log lines and metrics.
    pub name: String,
    /// Its token, inline.
    pub token: Option<Secret>,
    /// An environment variable holding its token.
    pub token_env: Option<String>,
    /// A file holding its token.
    pub token_file: Option<String>,
    /// The SHA-256 of its token, 64 hex digits (`transport hash-token`): no secret in the file.
    pub token_sha256: Option<String>,
    /// The upstreams it may reach (`"*"`: all).
    pub upstreams: Vec<String>,
}

impl IdentityConfig {
    /// Reads `token_env` / `token_file` into `token`.
    pub fn resolve(&mut self) -> Result<(), common::Error> {
        let key = format!("identities[{}].token", self.name);
        let (env, file) = (self.token_env.take(), self.token_file.take());
        self.token = Secret::resolve(&key, self.token.take(), env.as_deref(), file.as_deref())?;
        Ok(())
    }

    /// The SHA-256 of its token, from `token_sha256` or the token itself.
    pub fn token_hash(&self) -> Option<[u8; 32]> {
        match (&self.token, &self.token_sha256) {
            (Some(token), _) => Some(sha256(token.expose().as_bytes())),
            (None, Some(hex)) => parse_sha256(hex),
            (None, None) => None,
        }
    }
}

/// Bearer tokens that are JWTs from one OpenID Connect issuer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OidcConfig {
    /// The issuer (`iss`) every token must name, exactly.
    pub issuer: String,
    /// The audience (`aud`) every token must name.
    pub audience: String,
    /// Where the issuer publishes its public keys (a JWKS), fetched when a token names a key
    /// not seen yet.
    pub jwks_url: Option<String>,
    /// A JWKS file instead (read again at each reload).
    pub jwks_file: Option<String>,
    /// CA certificates to trust for an `https://` `jwks_url` instead of the system's.
    pub jwks_ca_file: Option<std::path::PathBuf>,
    /// The shortest time between two fetches of the keys.
    #[serde(with = "serde_duration")]
    pub jwks_min_interval: Duration,
    /// Accepted signature algorithms.
    pub algorithms: Vec<String>,
    /// Clock skew forgiven on `exp` and `nbf`.
    #[serde(with = "serde_duration")]
    pub leeway: Duration,
    /// The claim that names the person (`email`, `sub`, `preferred_username`).
    pub identity_claim: String,
    /// The claim listing the person's groups.
    pub groups_claim: String,
    /// Group → the upstreams its members may reach.
    pub groups: BTreeMap<String, Vec<String>>,
    /// The upstreams any valid token of the issuer may reach.
    pub upstreams: Vec<String>,
    /// People refused whatever their tokens say (the `identity_claim` values): at a reload,
    /// their sessions end and their still-valid tokens stop working.
    pub revoked: Vec<String>,
}

impl Default for OidcConfig {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            audience: String::new(),
            jwks_url: None,
            jwks_file: None,
            jwks_ca_file: None,
            jwks_min_interval: Duration::from_secs(10),
            algorithms: ALGORITHMS.iter().map(|a| (*a).to_owned()).collect(),
            leeway: Duration::from_secs(30),
            identity_claim: "email".into(),
            groups_claim: "groups".into(),
            groups: BTreeMap::new(),
            upstreams: Vec::new(),
            revoked: Vec::new(),
        }
    }
}

/// Checks `identities` and `oidc` against the configured upstream names.
pub fn validate(
    identities: &[IdentityConfig],
    oidc: Option<&OidcConfig>,
    upstreams: &[&str],
) -> Result<(), Error> {
    let known = |list: &[String], whose: &str| match list
        .iter()
        .find(|u| *u != ALL_UPSTREAMS && !upstreams.contains(&u.as_str()))
    {
        Some(u) => Err(invalid(format!("{whose}: upstream {u:?} is not configured"))),
        None => Ok(()),
    };
    for (i, identity) in identities.iter().enumerate() {
        let whose = format!("identities[{i}]");
        if identity.name.is_empty() || identity.name.chars().any(char::is_control) {
            return Err(invalid(format!(
                "{whose}: `name` is required, without control characters"
            )));
        }
        if identities[..i].iter().any(|o| o.name == identity.name) {
            return Err(invalid(format!("{whose}: duplicate name {:?}", identity.name)));
        }
        if let Some(why) =
            identity.token.as_ref().and_then(|t| super::strength::weakness(t.expose()))
        {
            return Err(invalid(format!("{whose}: {why}")));
        }
        match (&identity.token, &identity.token_sha256) {
            (Some(_), Some(_)) => {
                return Err(invalid(format!("{whose}: set `token` or `token_sha256`, not both")));
            }
            (None, None) => {
                return Err(invalid(format!(
                    "{whose}: a token is required (token, token_env, token_file or token_sha256)"
                )));
            }
            (None, Some(hex)) if parse_sha256(hex).is_none() => {
                return Err(invalid(format!(
                    "{whose}: token_sha256 must be 64 hex digits (transport hash-token prints it)"
                )));
            }
            _ => {}
        }
        if identity.upstreams.is_empty() {
            return Err(invalid(format!(
                "{whose}: `upstreams` must list what it may reach (\"*\" for all)"
            )));
        }
        known(&identity.upstreams, &whose)?;
    }
    let Some(oidc) = oidc else { return Ok(()) };
    if oidc.issuer.is_empty() || oidc.audience.is_empty() || oidc.identity_claim.is_empty() {
        return Err(invalid("oidc: `issuer`, `audience` and `identity_claim` are required".into()));
    }
    if oidc.jwks_url.is_some() == oidc.jwks_file.is_some() {
        return Err(invalid("oidc: set exactly one of `jwks_url` and `jwks_file`".into()));
    }
    if let Some(url) = &oidc.jwks_url {
        jwks_url_ok(url)?;
    }
    if oidc.leeway > MAX_LEEWAY {
        return Err(invalid(format!(
            "oidc.leeway must be at most {MAX_LEEWAY:?}: more accepts expired tokens"
        )));
    }
    if oidc.jwks_min_interval < Duration::from_secs(1) {
        return Err(invalid("oidc.jwks_min_interval must be at least 1s".into()));
    }
    if oidc.algorithms.is_empty() {
        return Err(invalid(format!("oidc.algorithms: name at least one of {ALGORITHMS:?}")));
    }
    if let Some(a) = oidc.algorithms.iter().find(|a| !ALGORITHMS.contains(&a.as_str())) {
        return Err(invalid(format!("oidc.algorithms: {a:?} is not one of {ALGORITHMS:?}")));
    }
    known(&oidc.upstreams, "oidc.upstreams")?;
    for (group, list) in &oidc.groups {
        known(list, &format!("oidc.groups.{group}"))?;
    }
    Ok(())
}

/// A configuration of identities that cannot be used, and why.
pub(super) fn invalid(why: String) -> Error {
    Error::Config(common::Error::ConfigInvalid(why))
}

/// The longest clock skew `oidc.leeway` may forgive.
const MAX_LEEWAY: Duration = Duration::from_secs(300);

/// A key URL must be `https://` (whoever answers it decides which tokens are valid), but for a
/// provider on this machine; without credentials in it (they would be logged).
fn jwks_url_ok(url: &str) -> Result<(), Error> {
    let uri: http::Uri = url.parse().map_err(|e| invalid(format!("oidc.jwks_url {url:?}: {e}")))?;
    let host = uri.host().unwrap_or("").trim_matches(['[', ']']);
    let loopback =
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if loopback => {}
        _ => {
            return Err(invalid(format!(
                "oidc.jwks_url {url:?} must be https:// (http:// only for a provider on this machine)"
            )));
        }
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(invalid("oidc.jwks_url must not carry credentials".into()));
    }
    Ok(())
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// 64 hex digits (either case) as 32 bytes.
pub fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_round_trips_through_hex() {
        let hash = sha256(b"abc");
        let hex = to_hex(&hash);
        assert_eq!(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(parse_sha256(&hex.to_uppercase()), Some(hash));
        assert_eq!(parse_sha256(&hex[1..]), None);
        assert_eq!(parse_sha256(&format!("{}g", &hex[1..])), None);
    }

    fn named(name: &str, hash: &str, upstreams: &[&str]) -> IdentityConfig {
        IdentityConfig {
            name: name.into(),
            token_sha256: Some(hash.into()),
            upstreams: upstreams.iter().map(|u| (*u).to_owned()).collect(),
            ..IdentityConfig::default()
        }
    }

    #[test]
    fn rejects_malformed_hashes_unknown_upstreams_and_duplicates() {
        let says =
            |r: Result<(), Error>, what: &str| r.is_err_and(|e| e.to_string().contains(what));
        let good = to_hex(&sha256(b"a token of alice"));
        let ok = validate(&[named("alice", &good, &["main"])], None, &["main"]);
        assert!(ok.is_ok(), "{ok:?}");
        let short = validate(&[named("alice", &good[2..], &["main"])], None, &["main"]);
        assert!(says(short, "64 hex digits"));
        let unknown = validate(&[named("alice", &good, &["other"])], None, &["main"]);
        assert!(says(unknown, "\"other\""));
        let twice = [named("a", &good, &["*"]), named("a", &good, &["*"])];
        assert!(says(validate(&twice, None, &["main"]), "duplicate"));
        let oidc = OidcConfig { issuer: "i".into(), audience: "a".into(), ..OidcConfig::default() };
        assert!(says(validate(&[], Some(&oidc), &["main"]), "jwks"));
        let plain =
            OidcConfig { jwks_url: Some("http://sso.example.com/keys".into()), ..oidc.clone() };
        assert!(says(validate(&[], Some(&plain), &["main"]), "https"));
        let local = OidcConfig { jwks_url: Some("http://127.0.0.1:9/keys".into()), ..oidc.clone() };
        assert!(validate(&[], Some(&local), &["main"]).is_ok());
        let lax = OidcConfig { leeway: Duration::from_secs(3600), ..local };
        assert!(says(validate(&[], Some(&lax), &["main"]), "leeway"));
        let bad_alg = OidcConfig {
            jwks_file: Some("k.json".into()),
            algorithms: vec!["HS256".into()],
            ..oidc
        };
        assert!(says(validate(&[], Some(&bad_alg), &["main"]), "HS256"));
    }
}
