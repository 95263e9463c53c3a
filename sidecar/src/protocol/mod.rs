//! The server side of the MySQL client/server protocol: packet framing, the handshake,
//! authentication, and encoding of OK/ERR/EOF packets. Pure encoders and decoders except
//! [`PacketIo`], which owns the client socket.

mod auth;
mod handshake;
mod packet;
mod response;

pub use auth::{
    CACHING_SHA2_PASSWORD, CLEAR_PASSWORD, NATIVE_PASSWORD, PERFORM_FULL_AUTHENTICATION,
    REQUEST_PUBLIC_KEY, Scramble, auth_more_data, auth_switch_request, clear_password,
    native_password_matches, unmask_password,
};
pub use handshake::{ClientHello, Greeting, parse_client_hello, take_cstr};
pub use packet::{MAX_PAYLOAD, PacketIo, QueuedPacket};
pub use response::{
    encode_eof, encode_err, encode_err_before_greeting, encode_ok, encode_result_end,
    put_lenenc_int,
};
