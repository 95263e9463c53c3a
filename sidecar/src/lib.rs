//! sqltunnel sidecar: a local MySQL server that forwards each client command over HTTP to the
//! transport and relays the answer.

pub mod change_user;
pub mod client_tls;
pub mod config;
pub mod connection;
pub mod error;
pub mod greetings;
pub mod heartbeat;
pub mod http;
pub mod infile;
pub mod kill;
pub mod login;
pub mod protocol;
pub mod relay;
pub mod relayed;
pub mod rsa_key;
pub mod server;
pub mod statements;
pub mod tunnel;

pub use config::SidecarConfig;
pub use error::Error;
pub use server::run;
