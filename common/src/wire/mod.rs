//! The HTTP wire protocol between sidecar and transport (the single source of truth).
//!
//! Control messages (open a session, errors) are small JSON documents; command results are
//! compact binary frames streamed in a chunked body. This module does no I/O.

mod control;
mod frame;
mod long_data;
mod route;

pub use control::{
    ApiError, ApiErrorKind, KeepAlive, KeepAliveAnswer, LoginAs, MysqlError, OpenRelay,
    OpenSession, SessionOpened, UpstreamInfo,
};
pub use frame::{
    DEFAULT_MAX_FRAME, Frame, FrameDecoder, ListMark, OkInfo, PacketList, TurnEnd, encode_end,
    encode_err, encode_heartbeat, encode_infile, encode_ok, encode_packets, encode_prepared,
    encode_turn, list_begin, list_finish, list_item_begin, list_item_finish,
};
pub use long_data::{LONG_DATA_HEADER, decode_long_data, encode_long_data};
pub use route::Route;

/// Content type of a streamed frames body.
pub const FRAMES_CONTENT_TYPE: &str = "application/vnd.sqltunnel.frames";
/// Content type of a command request body (one MySQL command packet payload).
pub const COMMAND_CONTENT_TYPE: &str = "application/vnd.sqltunnel.command";
/// Content type of a relayed request body: raw MySQL packets, headers included, as the client
/// sent them.
pub const PACKETS_CONTENT_TYPE: &str = "application/vnd.sqltunnel.packets";
/// Content type of control messages.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// Header carrying the session id on every session request, so both logs can be joined.
pub const SESSION_HEADER: &str = "x-tunnel-session";
/// Header listing statement ids (comma-separated) to close before the command runs.
pub const CLOSE_STATEMENTS_HEADER: &str = "x-tunnel-close-statements";
/// Header on a COM_QUERY from a client with multi-statements off: the text must be refused, as
/// the server would, if it holds more than one statement.
pub const SINGLE_STATEMENT_HEADER: &str = "x-tunnel-single-statement";
/// Header on an infile upload: `more` (other pieces follow) or `end` (the file is complete).
pub const INFILE_HEADER: &str = "x-tunnel-infile";
/// Header on an opened relayed session: the transport's `session_timeout` in milliseconds (a
/// session prepared ahead must be used well within it).
pub const SESSION_TIMEOUT_HEADER: &str = "x-tunnel-session-timeout-ms";
/// Header a load balancer may hash on to keep one session on one transport.
pub const AFFINITY_HEADER: &str = "x-tunnel-affinity";
/// Number of random bytes in a session id (128 bits), rendered as 32 hex digits.
pub const SESSION_ID_BYTES: usize = 16;
