//! The one error type of the transport, and the one place it maps to HTTP answers.

use common::wire::{ApiError, ApiErrorKind, MysqlError, STREAM_PROTOCOL};
use http::StatusCode;

/// Everything that can go wrong in the transport.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Configuration or wire errors from shared code.
    #[error(transparent)]
    Config(#[from] common::Error),
    /// Socket errors of the HTTP server.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Missing or refused bearer token, and why.
    #[error("{}", .0.message())]
    Unauthorized(crate::identity::Refusal),
    /// Too many refused requests of one client are held, or in all: answered at once (429).
    #[error("too many requests with a wrong or missing token from this address; slow down")]
    Throttled,
    /// The caller's identity reached one of its shares of the transport (429).
    #[error("identity {identity:?} has reached its share: {limit}")]
    IdentityLimit {
        /// Who asked.
        identity: String,
        /// Which share, as the config key names it.
        limit: &'static str,
    },
    /// The caller's identity may not reach this upstream.
    #[error("identity {identity:?} may not reach upstream {upstream:?}")]
    UpstreamForbidden {
        /// The upstream asked for.
        upstream: String,
        /// Who asked.
        identity: String,
    },
    /// The session ended because its identity lost its access at a reload.
    #[error("the session of identity {0:?} was ended: its access was revoked")]
    AccessRevoked(String),
    /// Path or method not served.
    #[error("no such endpoint")]
    NotFound,
    /// Known path, wrong method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// Unknown or expired session id.
    #[error("unknown or expired session")]
    SessionNotFound,
    /// A command is already running on the session.
    #[error("another command is running on this session")]
    SessionBusy,
    /// The session moved to the process that took this one over: the step goes again, on a
    /// new connection (its answer is a hang-up: `reply.rs`).
    #[error("the session moved to the transport that took this one over")]
    SessionMoved,
    /// The connection gave its place to a newer one before its token was accepted: it closes
    /// unanswered.
    #[error("the connection gave its place in max_connections to a newer one")]
    Evicted,
    /// A step out of order, or one whose answer cannot be resumed.
    #[error("{0}")]
    StepRefused(String),
    /// Malformed request body.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The request body stopped arriving.
    #[error("the request body stalled for {0:?}")]
    BodyTimeout(std::time::Duration),
    /// `max_inflight_bytes` stayed full for `body_timeout`.
    #[error("the transport holds max_inflight_bytes of requests already; try again")]
    Busy,
    /// The audit log's writer stayed behind for `body_timeout`: the commands did not run.
    #[error(
        "the audit log is behind (its disk is slow, or many commands end at once): the command did not run; try again"
    )]
    AuditBehind,
    /// A stream asked for without a WebSocket upgrade (a proxy dropped it), or inside one.
    #[error("a stream needs a WebSocket upgrade: {0}")]
    UpgradeRequired(&'static str),
    /// A stream asked for in stream versions this transport does not speak.
    #[error(
        "this transport speaks stream version {STREAM_PROTOCOL} only; the sidecar offered another (upgrade the older of the two; until then its requests travel as plain HTTP)"
    )]
    StreamVersion,
    /// Request body over the limit.
    #[error("request body exceeds {limit} bytes")]
    TooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// Upstream name not configured.
    #[error("{}", unknown_upstream(.0))]
    UnknownUpstream(String),
    /// The OpenID issuer's keys (its JWKS) could not be fetched or used.
    #[error("{0}")]
    IssuerKeys(String),
    /// Too many sessions.
    #[error("too many sessions (max_sessions = {0})")]
    TooManySessions(usize),
    /// The transport is shutting down: no new work.
    #[error("Server shutdown in progress: the sqltunnel transport is shutting down")]
    ShuttingDown,
    /// The upstream could not be reached or the connection broke.
    #[error("upstream {name:?} unreachable: {reason}")]
    UpstreamUnreachable {
        /// Upstream name (never its address: callers may not be trusted with it).
        name: String,
        /// What failed.
        reason: String,
    },
}

impl Error {
    /// The HTTP status and JSON body a caller sees for this error.
    pub fn to_api(&self) -> (StatusCode, ApiError) {
        let (status, kind) = match self {
            Error::Unauthorized(refusal) => (StatusCode::UNAUTHORIZED, refusal.kind()),
            Error::Throttled => (StatusCode::TOO_MANY_REQUESTS, ApiErrorKind::Unauthorized),
            Error::IdentityLimit { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, ApiErrorKind::TooManySessions)
            }
            Error::UpstreamForbidden { .. } => {
                (StatusCode::FORBIDDEN, ApiErrorKind::UpstreamForbidden)
            }
            Error::AccessRevoked(_) => (StatusCode::FORBIDDEN, ApiErrorKind::AccessRevoked),
            Error::NotFound => (StatusCode::NOT_FOUND, ApiErrorKind::NotFound),
            Error::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, ApiErrorKind::NotFound),
            Error::SessionNotFound => (StatusCode::NOT_FOUND, ApiErrorKind::SessionNotFound),
            Error::SessionBusy => (StatusCode::CONFLICT, ApiErrorKind::SessionBusy),
            Error::StepRefused(_) => (StatusCode::CONFLICT, ApiErrorKind::StepRefused),
            Error::BadRequest(_) => (StatusCode::BAD_REQUEST, ApiErrorKind::BadRequest),
            Error::UpgradeRequired(_) | Error::StreamVersion => {
                (StatusCode::UPGRADE_REQUIRED, ApiErrorKind::BadRequest)
            }
            Error::BodyTimeout(_) => (StatusCode::REQUEST_TIMEOUT, ApiErrorKind::BadRequest),
            Error::Busy
            | Error::AuditBehind
            | Error::ShuttingDown
            | Error::SessionMoved
            | Error::Evicted => (StatusCode::SERVICE_UNAVAILABLE, ApiErrorKind::Unavailable),
            Error::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, ApiErrorKind::TooLarge),
            Error::UnknownUpstream(_) => (StatusCode::FORBIDDEN, ApiErrorKind::UnknownUpstream),
            Error::TooManySessions(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, ApiErrorKind::TooManySessions)
            }
            Error::UpstreamUnreachable { .. } => {
                (StatusCode::BAD_GATEWAY, ApiErrorKind::UpstreamUnreachable)
            }
            Error::Config(_) | Error::Io(_) | Error::IssuerKeys(_) => {
                (StatusCode::INTERNAL_SERVER_ERROR, ApiErrorKind::Unavailable)
            }
        };
        (status, ApiError { error: kind, message: self.to_string(), mysql: self.to_mysql() })
    }

    /// A short label of the error's kind (the `kind` label of the error counter).
    pub fn kind_label(&self) -> &'static str {
        match self {
            Error::Config(_) | Error::Io(_) | Error::IssuerKeys(_) => "internal",
            Error::Unauthorized(_) => "unauthorized",
            Error::Throttled => "throttled",
            Error::IdentityLimit { .. } => "identity_limit",
            Error::UpstreamForbidden { .. } => "upstream_forbidden",
            Error::AccessRevoked(_) => "access_revoked",
            Error::NotFound | Error::MethodNotAllowed => "not_found",
            Error::SessionNotFound => "session_not_found",
            Error::SessionBusy => "session_busy",
            Error::SessionMoved => "session_moved",
            Error::Evicted => "evicted",
            Error::StepRefused(_) => "step_refused",
            Error::BadRequest(_) => "bad_request",
            Error::UpgradeRequired(_) | Error::StreamVersion => "upgrade_required",
            Error::BodyTimeout(_) => "body_timeout",
            Error::Busy => "busy",
            Error::AuditBehind => "audit_behind",
            Error::TooLarge { .. } => "too_large",
            Error::UnknownUpstream(_) => "unknown_upstream",
            Error::TooManySessions(_) => "too_many_sessions",
            Error::ShuttingDown => "shutting_down",
            Error::UpstreamUnreachable { .. } => "upstream_unreachable",
        }
    }

    /// The payload of an ERR packet telling a client this error, where it must see one.
    pub fn to_err_payload(&self) -> Option<Vec<u8>> {
        let e = self.to_mysql()?;
        let sqlstate = e.sqlstate.as_bytes().try_into().unwrap_or(*b"HY000");
        let mut payload = Vec::with_capacity(9 + e.message.len());
        common::mysql::encode_err(&mut payload, e.code, &sqlstate, e.message.as_bytes());
        Some(payload)
    }

    /// The MySQL error a client gets for this one, where a client must see a MySQL error.
    pub fn to_mysql(&self) -> Option<MysqlError> {
        use common::mysql::error_code;
        let (code, sqlstate, message) = match self {
            Error::TooManySessions(_) => {
                (error_code::TOO_MANY_CONNECTIONS, "08004", "Too many connections".into())
            }
            Error::ShuttingDown => (error_code::SERVER_SHUTDOWN, "08S01", self.to_string()),
            Error::IdentityLimit { identity, limit } => (
                error_code::TOO_MANY_CONNECTIONS,
                "08004",
                format!(
                    "Too many connections: sqltunnel identity '{identity}' has reached {limit}"
                ),
            ),
            Error::UpstreamForbidden { upstream, identity } => (
                error_code::ACCESS_DENIED,
                "28000",
                format!(
                    "Access denied: sqltunnel identity '{identity}' may not reach upstream '{upstream}'"
                ),
            ),
            Error::AccessRevoked(identity) => (
                error_code::CONNECTION_KILLED,
                "70100",
                format!(
                    "Connection was killed: the access of sqltunnel identity '{identity}' was revoked"
                ),
            ),
            _ => return None,
        };
        Some(MysqlError { code, sqlstate: sqlstate.into(), message })
    }
}

fn unknown_upstream(name: &str) -> String {
    if name.is_empty() {
        "no upstream named and this transport has not exactly one: set auth.upstream in the sidecar's config".into()
    } else {
        format!("upstream {name:?} is not configured on this transport")
    }
}
