//! A small HTTP/1.1 client for the transport: one keep-alive connection per client session,
//! with a sans-IO body decoder, upgraded to a stream where the path allows it.

use std::io;

use bytes::{Bytes, BytesMut};

mod body;
mod conn;
mod head;
mod messages;
mod proxy;
mod silence;

pub use body::{BodyDecoder, Decoded};
pub use conn::{DEFAULT_SILENCE_LIMIT, HttpConn, ResponseHead};
pub use head::RequestHead;
pub use messages::{OpenedAs, StreamConn, Upgrade, upgrade_request};
pub use proxy::Proxy;

/// An answer's body, read piece by piece: decoded from an HTTP response, or the messages of
/// a stream.
pub(crate) trait AnswerBody {
    /// The next piece of the body; `None` at its end.
    async fn body_chunk(&mut self) -> io::Result<Option<Bytes>>;

    /// True when the body is known to be over without reading on (a stream answer that came
    /// whole in one message, its piece taken).
    fn has_ended(&self) -> bool {
        false
    }

    /// Reads the whole body, refusing more than `limit` bytes.
    async fn body_to_end(&mut self, limit: usize) -> io::Result<Bytes> {
        let mut all = BytesMut::new();
        while let Some(chunk) = self.body_chunk().await? {
            if all.len() + chunk.len() > limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "answer larger than expected",
                ));
            }
            all.extend_from_slice(&chunk);
        }
        Ok(all.freeze())
    }
}
