//! The door under attack, one test binary: the chosen attacks against a real transport with a
//! legitimate client working meanwhile (`attacks.rs`), a flood of commands while the audit
//! log is behind (`audit_flood.rs`), the seeded door fuzzer (`fuzz.rs`), a
//! rogue server or transport asking a laptop for its files (`rogue_server.rs`) or a password
//! in clear (`cleartext.rs`),
//! connections without a token holding every place (`places.rs`), forged log lines
//! (`log_lines.rs`), long request heads (`heads.rs`), resumes never read (`resumes.rs`), resumable
//! uploads held, hashed again and smuggled (`uploads.rs`). (Port checks count the database's
//! aborted connects, which these tests make too: `port_checks.rs` runs in a binary of its
//! own.)

mod attacks;
mod audit_flood;
mod cleartext;
mod fuzz;
mod heads;
mod log_lines;
mod places;
mod resumes;
mod rogue_server;
mod uploads;
