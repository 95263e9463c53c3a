//! sqltunnel sidecar: a local MySQL endpoint whose every connection is relayed, packet for
//! packet, through the transport to the upstream server.
//!
//! Layers, lowest first: `config`, `error`, `protocol` (packets, handshake fields, the few
//! packets the sidecar writes itself) → `http` (its own HTTP/1.1 client) → `tunnel` (the
//! transport's API) → `live`, `greetings`, `client_tls` → `shared` → `connection` (one
//! client connection: login, commands, answers, `users` entries) → `heartbeat`, `server`; `check` (the `sidecar check` command) and `service` (`sidecar service`,
//! a Windows service) beside them; `exposure` (what a configuration leaves exposed, for both).

#[cfg(feature = "calibrate")]
pub mod calibrate;
pub mod check;
pub mod client_tls;
pub mod config;
pub mod connection;
pub mod error;
pub mod exposure;
pub mod greetings;
pub mod heartbeat;
pub mod http;
pub mod live;
pub mod login;
pub mod metrics;
pub mod protocol;
pub mod server;
pub mod service;
pub mod shared;
pub mod tunnel;

pub use config::SidecarConfig;
pub use error::Error;
pub use server::{run, run_with_reloads};
