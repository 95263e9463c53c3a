//! The one error type of the sidecar, and the one place it maps to what a MySQL client sees.

use common::mysql::error_code as code;
use common::wire::MysqlError;

/// Everything that can go wrong in the sidecar.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Configuration or wire errors from shared code.
    #[error(transparent)]
    Config(#[from] common::Error),
    /// Socket errors on the client side.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The client broke the MySQL protocol.
    #[error("client protocol error: {0}")]
    ClientProtocol(&'static str),
    /// The client sent a packet out of sequence where the protocol wants the next one (a
    /// command pipelined behind a LOAD DATA LOCAL instead of the file), or a command whose
    /// sequence id is not 0 (a file sent for a request no turn announced).
    #[error("Got packets out of order")]
    PacketsOutOfOrder,
    /// A compressed packet from the client that does not inflate to what it announced.
    #[error("Couldn't uncompress communication packet")]
    UncompressFailed,
    /// A client packet exceeded `max_packet`.
    #[error("Got a packet bigger than 'max_allowed_packet' bytes ({limit})")]
    PacketTooLarge {
        /// The limit.
        limit: usize,
    },
    /// Wrong user or password.
    #[error("Access denied for user '{user}'@'{host}' (using password: {})", if *.using_password { "YES" } else { "NO" })]
    AccessDenied {
        /// Login name.
        user: String,
        /// Client host.
        host: String,
        /// Whether a password was sent.
        using_password: bool,
    },
    /// `max_clients` connections are open already.
    #[error("Too many connections")]
    TooManyClients,
    /// `max_inflight_bytes` stayed full too long.
    #[error("Out of resources: the sidecar holds max_inflight_bytes of commands from its clients")]
    Busy,
    /// A command the tunnel does not carry (replication streams).
    #[error("Unknown command")]
    NotRelayed,
    /// The server asked a passed-through login for the password in clear.
    #[error(
        "the server asked for the password in clear ({plugin}), which would let it, or whoever stands in for it, read the password: refused. If your database logs in with PAM or LDAP and every leg is TLS, set auth.cleartext_passwords: true in the sidecar's config"
    )]
    CleartextRefused {
        /// The auth plugin it named.
        plugin: String,
    },
    /// The client wants TLS, and the sidecar's `client_tls` is off.
    #[error(
        "this sqltunnel sidecar does not offer SSL on the client connection (client_tls.enabled is false); connect without SSL (e.g. --ssl-mode=DISABLED / --skip-ssl) or set client_tls.enabled: true"
    )]
    TlsUnsupported,
    /// The transport could not be reached.
    #[error("cannot reach the sqltunnel transport at {url}: {reason}")]
    TransportUnreachable {
        /// Base URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A connection to the transport opened, then broke before the answer's head (a proxy
    /// restarted, a network changed): worth another connection.
    #[error("the connection to the sqltunnel transport at {url} broke: {reason}")]
    ConnectionBroken {
        /// Base URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The transport refused the token (HTTP 401).
    #[error(
        "the sqltunnel transport at {url} refused the sidecar's token (HTTP 401: {reason}): check transport.token (or token_command) against the transport's identities"
    )]
    TokenRefused {
        /// Base URL.
        url: String,
        /// What the transport said (an expired token, a wrong audience, …).
        reason: String,
    },
    /// `transport.token_command` gave no token.
    #[error("transport.token_command gave no token: {0}")]
    TokenCommand(String),
    /// `transport.login`: nobody is logged in, or the provider ended the login.
    #[error("Access denied: {0}: run `sidecar login` to log in again")]
    LoginNeeded(String),
    /// `sidecar login`, `logout` and `check`: what a person is told went wrong with a login
    /// (the provider's answer, the login kept, the browser's return).
    #[error("{0}")]
    Login(String),
    /// `transport.login`: the identity provider could not give a token now.
    #[error("cannot get a token from the identity provider of transport.login: {0}")]
    LoginFailed(String),
    /// The transport ended the session: its identity's access was revoked.
    #[error(
        "Connection was killed: the sqltunnel transport revoked this identity's access to the upstream"
    )]
    AccessRevoked,
    /// A proxy or the transport refused the request size (HTTP 413).
    #[error(
        "the request ({size} bytes) was refused as too large by {url} (HTTP 413): raise nginx's client_max_body_size and the transport's max_request_bytes"
    )]
    RequestTooLarge {
        /// Base URL.
        url: String,
        /// Request size.
        size: usize,
    },
    /// A connection to the transport was made, then nothing came back within the silence
    /// limit (the transport is frozen or overloaded, or the path went silent).
    #[error("the sqltunnel transport at {url} went silent: {reason}")]
    TransportSilent {
        /// Base URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The transport (or a proxy) answered with something that is not a sqltunnel answer.
    #[error("the sqltunnel transport at {url} answered HTTP {status}{detail}")]
    BadAnswer {
        /// Base URL.
        url: String,
        /// Status line, e.g. `502 Bad Gateway`.
        status: String,
        /// Extra explanation.
        detail: String,
    },
    /// The upstream server reported an error (relayed unchanged).
    #[error("{}", .0.message)]
    Upstream(MysqlError),
    /// The session is gone on the transport (expired, or the transport restarted).
    #[error(
        "Lost connection to MySQL server: the tunnel session expired or the transport restarted"
    )]
    SessionLost,
    /// The sidecar is shutting down and its grace is over.
    #[error("Server shutdown in progress: the sqltunnel sidecar is shutting down")]
    ShuttingDown,
    /// The answer stream broke off, and why.
    #[error("Lost connection to MySQL server during query: {0}")]
    StreamBroken(Broken),
    /// The connection to the transport broke and the step could not be resumed.
    #[error(
        "Lost connection to MySQL server during query: the connection to the sqltunnel transport broke and could not be resumed: {0}"
    )]
    NotResumed(String),
    /// Another request of the session still runs on the transport.
    #[error("the sqltunnel transport is still running another request of this session")]
    SessionBusy,
    /// A LOCAL INFILE request (the server asking the client for a file) that does not answer
    /// a `LOAD DATA|XML … LOCAL INFILE` statement naming that file: never shown to the client.
    #[error(
        "LOAD DATA LOCAL INFILE request refused by the sqltunnel sidecar: the server asked for the local file '{}', which this query did not name in a LOAD DATA LOCAL INFILE statement (a rogue server, or something between, may be trying to read your files); the connection is closed",
        .requested.as_deref().unwrap_or("(name not readable)")
    )]
    FileRequestRefused {
        /// The file the server asked for, when its request could be read.
        requested: Option<String>,
    },
}

/// Why an answer from the transport broke off, or could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Broken {
    /// The connection to the transport is gone.
    #[error("connection lost")]
    ConnectionLost,
    /// Reading the answer's body failed.
    #[error("{reason} (transport at {url})")]
    Read {
        /// Base URL.
        url: String,
        /// What failed.
        reason: std::io::Error,
    },
    /// A control answer's body could not be read.
    #[error("{0}")]
    ControlBody(std::io::Error),
    /// The body ended before the turn's end.
    #[error("the transport's answer ended early")]
    EndedEarly,
    /// The body ended inside a frame.
    #[error("answer ended inside a frame")]
    InsideFrame,
    /// Frames came after the turn's end.
    #[error("frames after the end of a turn")]
    AfterTurnEnd,
    /// A frame the decoder refused.
    #[error("{0}")]
    BadFrame(common::Error),
    /// A zstd answer that does not decode.
    #[error("a compressed answer is corrupt: {0}")]
    Corrupt(std::io::Error),
    /// No zstd decoder could be made for a compressed answer.
    #[error("{0}")]
    NoDecoder(std::io::Error),
    /// A relayed login answer holds a cut packet.
    #[error("a cut packet in a relayed answer")]
    CutPacket,
    /// The upstream answered a new connection without a greeting to log in to.
    #[error("the upstream refused a connection")]
    UpstreamRefused,
    /// The upstream's greeting is not one the sidecar can use (what is wrong with it).
    #[error("{0}")]
    Greeting(&'static str),
    /// The upstream answered a new connection with an error (its message).
    #[error("{0}")]
    UpstreamSaid(String),
}

impl From<Broken> for Error {
    fn from(broken: Broken) -> Self {
        Error::StreamBroken(broken)
    }
}

impl Error {
    /// The code, SQLSTATE and message a MySQL client is sent for this error.
    pub fn to_mysql(&self) -> (u16, [u8; 5], String) {
        let msg = self.to_string();
        match self {
            Error::Upstream(e) => {
                let mut state = *code::STATE_GENERAL;
                if e.sqlstate.len() == 5 {
                    state.copy_from_slice(e.sqlstate.as_bytes());
                }
                (e.code, state, e.message.clone())
            }
            Error::AccessDenied { .. } | Error::LoginNeeded(_) => {
                (code::ACCESS_DENIED, *code::STATE_ACCESS, msg)
            }
            Error::NotRelayed => (code::UNKNOWN_COMMAND, *code::STATE_COMM, msg),
            Error::CleartextRefused { .. } => (code::AUTH_MODE, *b"08004", msg),
            Error::TooManyClients => (code::TOO_MANY_CONNECTIONS, *b"08004", msg),
            Error::Busy => (code::OUT_OF_RESOURCES, *code::STATE_GENERAL, msg),
            Error::PacketTooLarge { .. } | Error::RequestTooLarge { .. } => {
                (code::PACKET_TOO_LARGE, *code::STATE_COMM, msg)
            }
            Error::ClientProtocol(_) | Error::TlsUnsupported => {
                (code::HANDSHAKE, *code::STATE_COMM, msg)
            }
            Error::PacketsOutOfOrder => (code::PACKETS_OUT_OF_ORDER, *code::STATE_COMM, msg),
            Error::UncompressFailed => (code::UNCOMPRESS, *code::STATE_COMM, msg),
            Error::TransportUnreachable { .. }
            | Error::ConnectionBroken { .. }
            | Error::TransportSilent { .. }
            | Error::TokenRefused { .. }
            | Error::TokenCommand(_)
            | Error::LoginFailed(_)
            | Error::Login(_)
            | Error::BadAnswer { .. }
            | Error::SessionBusy => (code::CANNOT_REACH, *code::STATE_GENERAL, msg),
            Error::ShuttingDown => (code::SERVER_SHUTDOWN, *code::STATE_COMM, msg),
            Error::AccessRevoked => (code::CONNECTION_KILLED, *b"70100", msg),
            Error::SessionLost | Error::StreamBroken(_) | Error::NotResumed(_) => {
                (code::CONNECTION_LOST, *code::STATE_COMM, msg)
            }
            Error::Config(_) | Error::Io(_) => (code::CONNECTION_LOST, *code::STATE_COMM, msg),
            Error::FileRequestRefused { .. } => (code::NOT_ALLOWED_COMMAND, *b"42000", msg),
        }
    }

    /// A short label of the error's kind (the `kind` label of the error counter).
    pub fn kind_label(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Io(_) => "client_io",
            Error::ClientProtocol(_) | Error::PacketsOutOfOrder | Error::UncompressFailed => {
                "client_protocol"
            }
            Error::PacketTooLarge { .. } | Error::RequestTooLarge { .. } => "too_large",
            Error::AccessDenied { .. } => "access_denied",
            Error::TooManyClients => "too_many_clients",
            Error::Busy => "busy",
            Error::NotRelayed => "not_relayed",
            Error::TlsUnsupported => "tls_unsupported",
            Error::CleartextRefused { .. } => "cleartext_refused",
            Error::TransportUnreachable { .. } => "transport_unreachable",
            Error::ConnectionBroken { .. } => "connection_broken",
            Error::TransportSilent { .. } => "transport_silent",
            Error::TokenRefused { .. } => "token_refused",
            Error::BadAnswer { .. } => "bad_answer",
            Error::Upstream(_) => "upstream",
            Error::SessionLost => "session_lost",
            Error::AccessRevoked => "access_revoked",
            Error::TokenCommand(_) => "token_command",
            Error::LoginNeeded(_) => "login_needed",
            Error::LoginFailed(_) => "login_failed",
            Error::Login(_) => "login",
            Error::ShuttingDown => "shutting_down",
            Error::StreamBroken(_) => "stream_broken",
            Error::NotResumed(_) => "not_resumed",
            Error::SessionBusy => "session_busy",
            Error::FileRequestRefused { .. } => "file_request_refused",
        }
    }

    /// True when the client connection cannot go on after this error.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::SessionLost
                | Error::ShuttingDown
                | Error::StreamBroken(_)
                | Error::NotResumed(_)
                | Error::Io(_)
                | Error::ClientProtocol(_)
                | Error::PacketsOutOfOrder
                | Error::UncompressFailed
                | Error::PacketTooLarge { .. }
                | Error::Busy
                | Error::FileRequestRefused { .. }
                | Error::CleartextRefused { .. }
        )
    }
}
