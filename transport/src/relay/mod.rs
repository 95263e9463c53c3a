//! The relay: the transport's upstream leg at packet level. The upstream's greeting and login
//! reach the client, the client's packets reach the upstream as they are, and answers come back
//! byte for byte; only where an answer ends is read (`framing`).
//!
//! Layers, lowest first: `packets` (headers, integers) → `handshake`, `answer_shape` and `framing` (sans-IO
//! protocol logic, and `credentials` for the transport's own logins) → `request` (what a
//! request body holds) → `link`, `link_write`, `link_state` (what of it can move to another process) and `tls` (the socket) → `turn` (one answer streamed as an
//! HTTP body) and `admin` (the transport's own connections: KILL QUERY, readiness probes).

pub mod admin;
pub mod answer_shape;
pub mod credentials;
pub mod framing;
pub mod handshake;
pub mod link;
pub mod link_state;
pub mod link_write;
pub mod request;
pub mod tls;
pub mod turn;

pub use framing::{Expect, Framing};
pub use link::{Phase, RelayLink};
pub use turn::Turn;
