//! The stream carrier: the same steps and answers as over HTTP/1.1, carried as WebSocket
//! messages on one upgraded connection (`GET …/v1/stream`), so a command costs no HTTP
//! parsing at either end.
//!
//! - The upgrade is an HTTP request like any: its `Authorization` is checked once, and every
//!   step on the stream runs as that caller while the token holds (a reload that takes it
//!   away, or its expiry, ends the stream with `401`: the sidecar opens another).
//! - A step is one binary message: its [`super::StepHead`] (a few bytes), then its body.
//! - Its answer is a binary message holding its [`super::AnswerHead`] and the body, whole
//!   when it fits in one message; otherwise the head says more follows, then one binary
//!   message per piece of the body, then an empty binary message: the body's end. The next
//!   step may follow.
//! - Steps, resumes, frames, heartbeats and zstd are those of HTTP: a broken stream is a
//!   broken connection, and its step is sent again on a new one.
//!
//! A proxy that does not pass the upgrade answers the `GET` without `101 Switching
//! Protocols`; the sidecar then uses plain requests.

/// The WebSocket subprotocol both ends name (`Sec-WebSocket-Protocol`). Version 1 carried
/// HTTP/1.1 text heads, version 2 compact HTTP heads with every request authenticated; version
/// 3 carries typed steps on a stream authenticated at its upgrade. A transport refuses an
/// upgrade that does not offer its version (`426`, naming it in [`STREAM_VERSIONS_HEADER`]),
/// and the sidecar then sends plain requests, which every version takes.
pub const STREAM_PROTOCOL: &str = "sqltunnel.v3";

/// Header of a transport's `426` to an upgrade offering no stream version it speaks: the
/// versions it does speak, comma-separated (as `Sec-WebSocket-Version` lists WebSocket's own,
/// RFC 6455 §4.4). A transport of version 2 said so only in its error's words.
pub const STREAM_VERSIONS_HEADER: &str = "x-tunnel-stream-versions";

/// Header of a stream's upgrade: the sidecar thread's lane key (16 hex digits), so that the
/// transport serves the streams of one sidecar thread on one of its own threads
/// (`common::shards`). Optional; it only places the stream.
pub const LANE_HEADER: &str = "x-tunnel-lane";

/// Largest request body a stream message carries; a larger one (a statement over 1 MiB)
/// travels as a plain HTTP request, whose body the transport reads within its
/// `max_inflight_bytes`. A stream thus holds at most one message of this and a head.
pub const MAX_STREAM_BODY: usize = 1 << 20;

/// Room a stream message has beyond its body for its head (a step's or an answer's is a few
/// hundred bytes at most), and the largest HTTP response head the sidecar reads.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The nginx lines that let the upgrade through, as logs and `sidecar check` quote them.
pub const NGINX_STREAM_LINES: &str = "proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection $sqltunnel_connection; with, in the http block, map $http_upgrade $sqltunnel_connection { default upgrade; '' ''; } (see configs/nginx.example.conf)";
