//! sqltunnel transport: an HTTP server that holds one upstream MySQL connection per client
//! session and streams each command's answer back as binary frames.

pub mod api;
pub mod auth;
pub mod binary;
pub mod body;
pub mod command;
pub mod config;
pub mod error;
pub mod infile;
pub mod pool;
pub mod prepared;
pub mod reaper;
pub mod relay;
pub mod relayed;
pub mod results;
pub mod run;
pub mod server;
pub mod session;
pub mod sink;
pub mod state;
pub mod statement_text;
pub mod upstream;

pub use config::TransportConfig;
pub use error::Error;
pub use server::run;
