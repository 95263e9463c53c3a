//! A small HTTP/1.1 client for the transport: one keep-alive connection per client session,
//! with a sans-IO body decoder.

mod body;
mod conn;
mod head;
mod messages;
mod proxy;
mod silence;

pub use body::{BodyDecoder, Decoded};
pub use conn::{DEFAULT_SILENCE_LIMIT, HttpConn, OpenedAs, ResponseHead};
pub use head::RequestHead;
pub use messages::upgrade_request;
pub use proxy::Proxy;
