//! Code shared by the sidecar and the transport: the HTTP wire protocol, the timing wheel,
//! configuration helpers, telemetry setup and the shared error type.

pub mod cli;
pub mod config;
pub mod error;
pub mod log_line;
pub mod mysql;
pub mod rare;
pub mod runtime;
pub mod seeded;
pub mod shards;
pub mod stream;
pub mod telemetry;
pub mod tls;
pub mod websocket;
pub mod wheel;

pub mod wire;

pub use error::Error;
