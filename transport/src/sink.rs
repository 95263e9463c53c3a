//! The producing end of a streamed command response: frames are encoded into a buffer and sent
//! down a bounded channel in ~64 KiB chunks, so memory per session stays bounded.

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

/// A buffer is sent once it holds this much.
pub const FLUSH_AT: usize = 64 * 1024;
/// Chunks in flight between the command task and the HTTP body.
pub const CHANNEL_CHUNKS: usize = 4;

/// The HTTP client went away; stop producing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientGone;

/// Buffered frame writer feeding a response body.
#[derive(Debug)]
pub struct FrameSink {
    buf: BytesMut,
    tx: mpsc::Sender<Bytes>,
}

impl FrameSink {
    /// A sink sending into `tx`.
    pub fn new(tx: mpsc::Sender<Bytes>) -> Self {
        Self { buf: BytesMut::with_capacity(4096), tx }
    }

    /// The buffer to encode frames into.
    pub fn buf(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Sends the buffer if it is full enough.
    pub async fn maybe_flush(&mut self) -> Result<(), ClientGone> {
        if self.buf.len() >= FLUSH_AT { self.flush().await } else { Ok(()) }
    }

    /// Sends whatever is buffered.
    pub async fn flush(&mut self) -> Result<(), ClientGone> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = self.buf.split().freeze();
        self.tx.send(chunk).await.map_err(|_| ClientGone)
    }
}
