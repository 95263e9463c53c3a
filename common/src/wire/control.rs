//! JSON control messages: opening a relayed session, a login checked by the sidecar,
//! keep-alives, and machine-readable errors.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::Secret;

/// Body of `POST {base}/v1/relay`: open a relayed session (the answer is the upstream's
/// greeting, as a `Packets` frame, and the session id in the `X-Tunnel-Session` header).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenRelay {
    /// Name of the upstream, as configured on the transport (empty: its only one).
    #[serde(default)]
    pub upstream: String,
    /// The client leg offers TLS (the greeting then announces CLIENT_SSL).
    #[serde(default)]
    pub client_tls: bool,
    /// The sidecar speaks the compressed protocol with its client (the greeting then
    /// announces CLIENT_COMPRESS when the server does).
    #[serde(default)]
    pub client_compression: bool,
}

/// JSON body of `POST {base}/v1/sessions/{id}/login` for a login the sidecar has checked
/// itself (a `users` entry): the transport logs in upstream with these credentials, on the
/// connection whose greeting the client saw, with the client's own capabilities.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginAs {
    /// Upstream user name.
    pub user: String,
    /// Upstream password (travels only inside the request body).
    pub password: String,
    /// Initial database, if the client asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The client's capability flags.
    pub client_flags: u32,
    /// The client's MariaDB extended capabilities.
    #[serde(default)]
    pub mariadb_flags: u32,
    /// The client's collation id.
    pub collation: u8,
}

impl fmt::Debug for LoginAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoginAs")
            .field("user", &self.user)
            .field("password", &Secret::default())
            .field("database", &self.database)
            .field("client_flags", &format_args!("{:#x}", self.client_flags))
            .finish_non_exhaustive()
    }
}

/// Body of `POST {base}/v1/keepalive`: every session the sidecar still serves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeepAlive {
    /// Session ids.
    pub sessions: Vec<String>,
    /// Wait up to this long (ms) for one of them to end before answering (a long poll; the
    /// transport caps it at its heartbeat interval). 0: answer at once.
    #[serde(default)]
    pub wait_ms: u64,
}

/// Answer to a keepalive: the sessions the transport no longer has.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeepAliveAnswer {
    /// Session ids that are gone (expired, or the transport restarted).
    pub gone: Vec<String>,
    /// Those of `gone` whose server reset the connection (a direct client would have seen a
    /// reset, not an orderly close).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reset: Vec<String>,
    /// Those of `gone` ended because their identity's access was revoked: the client is told
    /// so at its next command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoked: Vec<String>,
}

/// What kind of failure an [`ApiError`] reports; clients branch on this, not on text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiErrorKind {
    /// Missing or invalid bearer token (401).
    Unauthorized,
    /// Unknown path or method (404/405).
    NotFound,
    /// The session id is unknown or expired (404).
    SessionNotFound,
    /// The request body is malformed (400).
    BadRequest,
    /// The request body is larger than allowed (413).
    TooLarge,
    /// The upstream name is not configured (403).
    UnknownUpstream,
    /// The upstream could not be reached (502).
    UpstreamUnreachable,
    /// Too many sessions (503).
    TooManySessions,
    /// Another command is already running on this session (409).
    SessionBusy,
    /// A step out of order, or one whose answer cannot be resumed (409).
    StepRefused,
    /// The transport is shutting down or failed internally (503/500).
    Unavailable,
    /// The bearer token is not a JWT the transport can read, or lacks the person's claim (401).
    TokenMalformed,
    /// The JWT is not signed (`alg: none`) (401).
    TokenUnsigned,
    /// The JWT is signed with an algorithm not accepted (401).
    TokenAlgorithm,
    /// The JWT's signature does not verify (401).
    TokenBadSignature,
    /// The JWT names a key the issuer does not publish (401).
    TokenUnknownKey,
    /// The issuer's keys could not be fetched (401).
    TokenKeysUnavailable,
    /// The JWT has expired (401).
    TokenExpired,
    /// The JWT is not valid yet (401).
    TokenNotYetValid,
    /// The JWT is for another audience (401).
    TokenWrongAudience,
    /// The JWT is from another issuer (401).
    TokenWrongIssuer,
    /// The caller's identity may not reach this upstream (403).
    UpstreamForbidden,
    /// The session was ended because its identity's access was revoked (403).
    AccessRevoked,
}

/// A MySQL error carried inside an [`ApiError`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MysqlError {
    /// Error code.
    pub code: u16,
    /// SQLSTATE.
    pub sqlstate: String,
    /// Message.
    pub message: String,
}

/// The JSON body of every non-2xx answer from the transport.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// Machine-readable kind.
    pub error: ApiErrorKind,
    /// Human-readable explanation.
    pub message: String,
    /// The upstream's own error, relayed unchanged, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mysql: Option<MysqlError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_as_debug_hides_the_password() {
        let req = LoginAs {
            user: "app".into(),
            password: "s3cr3t".into(),
            database: None,
            client_flags: 2,
            mariadb_flags: 0,
            collation: 45,
        };
        let text = format!("{req:?}");
        assert!(!text.contains("s3cr3t"), "{text}");
        let json = serde_json::to_string(&req).unwrap_or_default();
        let back: LoginAs = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back.password, "s3cr3t");
    }

    #[test]
    fn api_error_is_machine_readable() {
        let e = ApiError {
            error: ApiErrorKind::SessionNotFound,
            message: "no such session".into(),
            mysql: None,
        };
        let json = serde_json::to_string(&e).unwrap_or_default();
        assert_eq!(json, r#"{"error":"session_not_found","message":"no such session"}"#);
    }
}
