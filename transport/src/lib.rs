//! sqltunnel transport: an HTTP server that holds one relayed upstream MySQL connection per
//! client session and streams each answer back as binary frames.
//!
//! Layers, lowest first (a module uses its own layer's and lower ones', never a higher one's;
//! `tests/docs.rs` checks it):
//! `error`, `client_addr`, `id_hash`, `audit_redact`, `audit` (the audit log), `identity` (who
//! a token is), `config`, `config_checks`
//! → `relay` (the upstream leg at packet level)
//! → `shares` (each identity's share of what the transport holds), `ended` (sessions ended
//! lately, each identity's news of them)
//! → `resume_idle` (finished answers a step without room may let go), `resume_room` (the
//! budget all sessions share and each identity's share of it), `resume_kept`, `resume` (a
//! step's answer kept for a resume)
//! → `upload_held`, `session`, `handover` (what a take-over's
//! two processes know while sessions move), `readiness`, `refusals`
//! → `process_metrics`, `metrics`, `churn`, `state`
//! → `steps` (a step as either carrier brings it, run once, resumed), `request_body`, `reply`
//! (a step's answer: its head and body, a turn streamed), `stream` (the WebSocket carrier),
//! `command_log`, `turn_reply` (a step answered with its turn), `uploads`, `idle_watch`,
//! `ending`, `probes`
//! → `session_endpoints`, `session_login` (a session's steps: open, command, infile; login)
//! → `run` (a step's one entry point, whichever carrier brought it)
//! → `api` (the HTTP carrier: routing, the token, what only HTTP has)
//! → `slots` (a connection's place), `write_stall` (a bound on a write's wait), `http_conn`
//! (one HTTP connection served), `reaper`,
//! `takeover` (a new process takes the listeners and sessions over; Unix)
//! → `listening` (the listeners given or taken over, and the door), `server`.

pub mod api;
pub mod audit;
pub mod audit_redact;
pub mod churn;
pub mod client_addr;
pub mod command_log;
pub mod config;
pub mod config_checks;
pub mod ended;
pub mod ending;
pub mod error;
pub mod handover;
pub mod http_conn;
pub mod id_hash;
pub mod identity;
pub mod idle_watch;
pub mod listening;
pub mod metrics;
pub mod probes;
pub mod process_metrics;
pub mod readiness;
pub mod reaper;
pub mod refusals;
pub mod relay;
pub mod reply;
pub mod request_body;
pub mod resume;
pub mod resume_idle;
pub mod resume_kept;
pub mod resume_room;
pub mod run;
pub mod server;
pub mod session;
pub mod session_endpoints;
pub mod session_login;
pub mod shares;
pub mod slots;
pub mod state;
pub mod steps;
pub mod stream;
#[cfg(unix)]
pub mod takeover;
pub mod turn_reply;
pub mod upload_held;
pub mod uploads;
pub mod write_stall;

pub use config::TransportConfig;
pub use error::Error;
pub use server::{run, run_with_reloads};
