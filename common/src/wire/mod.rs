//! The HTTP wire protocol between sidecar and transport (the single source of truth).
//!
//! Control messages (open a session, keep-alives, errors) are small JSON documents; a request
//! in a session carries the client's MySQL packets as they are, and its answer is the
//! upstream's packets in binary frames, streamed. This module does no I/O.

mod answer;
mod compression;
mod control;
mod digest;
mod fields;
mod frame;
mod route;
mod step;
mod stream;
mod upload;

pub use answer::{AnswerHead, Content};
pub use compression::{
    ChunkCompressor, StreamDecompressor, ZSTD, compress_whole, decompress_exact,
};
pub use control::{
    ApiError, ApiErrorKind, KeepAlive, KeepAliveAnswer, LoginAs, MysqlError, OpenRelay,
};
pub use digest::{ANSWER_CRC_HEADER, AnswerDigest, HeldDigest, RESUMED_FROM_HEADER, ResumeProof};
pub use frame::{
    DEFAULT_MAX_FRAME, FRAMING_OVERHEAD, Frame, FrameDecoder, TurnEnd, encode_heartbeat,
    encode_packets, encode_turn,
};
pub use route::{Route, SessionEnd};
pub use step::{BodyEncoding, HttpStep, StepHead, StepKind, UploadAt, header_number};
pub use stream::{
    LANE_HEADER, MAX_HEAD_BYTES, MAX_STREAM_BODY, NGINX_STREAM_LINES, STREAM_PROTOCOL,
    STREAM_VERSIONS_HEADER,
};
pub use upload::{
    RESUMABLE_FROM, UPLOAD_HAVE_HEADER, UPLOAD_HEADER, UPLOAD_PART, UploadRange, crc_before, parts,
};

/// Content type of a streamed frames body.
pub const FRAMES_CONTENT_TYPE: &str = "application/vnd.sqltunnel.frames";
/// Content type of a relayed request body: raw MySQL packets, headers included, as the client
/// sent them.
pub const PACKETS_CONTENT_TYPE: &str = "application/vnd.sqltunnel.packets";
/// Content type of control messages.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// Header carrying the session id on every session request, so both logs can be joined.
pub const SESSION_HEADER: &str = "x-tunnel-session";
/// Header on an infile upload: `more` (other pieces follow) or `end` (the file is complete).
pub const INFILE_HEADER: &str = "x-tunnel-infile";
/// Header of a session's request: its step number (1, 2, … after the open); a step runs once.
pub const STEP_HEADER: &str = "x-tunnel-step";
/// Header of a zstd request body: its decoded length (which bounds its decoding).
pub const DECODED_LENGTH_HEADER: &str = "x-tunnel-decoded-length";
/// Header of an opened session: the request encodings the transport takes (`zstd`).
pub const REQUEST_ENCODING_HEADER: &str = "x-tunnel-request-encoding";
/// Header of a step sent again after a broken connection: the bytes of its answer the sidecar
/// already has.
pub const RESUME_FROM_HEADER: &str = "x-tunnel-resume-from";
/// Header on an opened relayed session: the transport's `session_timeout` in milliseconds (a
/// session prepared ahead must be used well within it).
pub const SESSION_TIMEOUT_HEADER: &str = "x-tunnel-session-timeout-ms";
/// Header of the transport's answer to a new session: its heartbeat interval in milliseconds.
/// A streamed answer carries a frame at least this often, so a sidecar that hears nothing for
/// a few intervals knows the transport is gone.
pub const HEARTBEAT_HEADER: &str = "x-tunnel-heartbeat-ms";
/// Header of an opened session: how many commands with an answer one command request may
/// carry (commands the client pipelined, answered in order in one turn). Without it, one.
pub const PIPELINE_HEADER: &str = "x-tunnel-pipeline";
/// The most commands with an answer a command request carries.
pub const MAX_PIPELINED_COMMANDS: usize = 256;
/// Header a load balancer may hash on to keep one session on one transport.
pub const AFFINITY_HEADER: &str = "x-tunnel-affinity";
/// Number of random bytes in a session id (128 bits), rendered as 32 hex digits.
pub const SESSION_ID_BYTES: usize = 16;

/// How logs name a session: the first 8 of its 32 hex digits. Enough to join the sidecar's
/// lines with the transport's, too little to address the session (and a session answers only
/// the token that opened it anyway).
pub fn session_label(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}
