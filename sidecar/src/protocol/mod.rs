//! The server side of the MySQL client/server protocol, as far as the sidecar needs it: packet
//! framing on the client socket, the handshake response and COM_CHANGE_USER fields, the
//! native-password check of `users` entries, and the auth switch it writes itself (its errors are
//! `common::mysql`'s). Pure encoders and decoders except [`PacketIo`], which owns the client socket.

mod auth;
mod change_user;
mod compressed_framing;
mod handshake;
mod packet;
mod relayed;

pub use auth::{NATIVE_PASSWORD, Scramble, auth_switch_request, native_password_matches};
pub use change_user::{ChangeUser, parse_change_user};
pub use handshake::{
    ClientHello, greeting_capabilities, greeting_scramble, parse_client_hello, take_cstr,
};
pub use packet::{MAX_PAYLOAD, PacketIo, split_payloads};
