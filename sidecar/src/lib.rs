//! sqltunnel sidecar: a local MySQL endpoint whose every connection is relayed, packet for
//! packet, through the transport to the upstream server.
//!
//! Layers, lowest first (a module uses its own layer's and lower ones', never a higher one's;
//! `tests/docs.rs` checks it):
//! `error`, `metrics`, `client_tls` (TLS on the client leg), `login_config`, `config`,
//! `protocol` (packets, handshake fields, the few packets the sidecar writes itself)
//! → `http` (its own HTTP/1.1 client)
//! → `tunnel` (the transport's API), `login` (a person's single sign-on, whose tokens the
//! tunnel asks for)
//! → `live`, `greetings`, `exposure` (what a configuration leaves exposed)
//! → `shared`
//! → `connection` (one client connection: login, commands, answers, `users` entries)
//! → `heartbeat`, `server`, `check` (the `sidecar check` command), `service` (`sidecar
//! service`, a Windows service).

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
pub mod login_config;
pub mod metrics;
pub mod protocol;
pub mod server;
pub mod service;
pub mod shared;
pub mod tunnel;

pub use config::SidecarConfig;
pub use error::Error;
pub use server::{run, run_with_reloads};
