//! What of a relayed upstream link can move to another process in a take-over: everything
//! but its socket, which travels beside it as a file descriptor.

use common::mysql::greeting::Greeting;
use serde::{Deserialize, Serialize};

use super::framing::{Framing, Shape};

/// A link's state, without its socket.
#[derive(Debug, Serialize, Deserialize)]
pub struct LinkState {
    /// Bytes read from the upstream and not yet passed on.
    pub unread: Vec<u8>,
    /// Where the conversation stands.
    pub phase: Phase,
    /// The shape of answers.
    pub shape: Shape,
    /// A turn left for the client to answer (its file, an auth packet).
    pub pending: Option<Framing>,
    /// Sequence id of the last packet read during login.
    pub last_seq: u8,
    /// The upstream's id of the connection.
    pub connection_id: u32,
    /// The greeting's scramble and plugin (for the transport's own logins on it).
    pub greeting: Option<Greeting>,
}

/// Where a relayed conversation stands.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    /// Greeted; the client's handshake response is next.
    Greeted,
    /// Logging in: the upstream waits for the client's next auth packet.
    LoggingIn,
    /// Logged in: commands can be sent.
    Ready,
}
