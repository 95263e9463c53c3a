//! Writing to a link's upstream socket: one packet, packets as they are, or what the socket
//! takes now without waiting (nothing left half done).

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{BufMut, BytesMut};
use common::mysql::packets::PacketHead;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::link::RelayLink;

impl RelayLink {
    /// Sends one packet with sequence id `seq` (payloads under 16 MiB: login packets).
    pub async fn write_packet(&mut self, payload: &[u8], seq: u8) -> std::io::Result<()> {
        let mut out = BytesMut::with_capacity(PacketHead::LEN + payload.len());
        PacketHead::write(&mut out, payload.len(), seq);
        out.put_slice(payload);
        self.write_raw(&out).await
    }

    /// Writes what the socket takes of `bytes` now, without waiting, and flushes it (TLS
    /// records); how many bytes it took, and whether they are all out. Nothing is left half
    /// done: the rest is written later with [`Self::write_raw`].
    pub fn write_now(&mut self, bytes: &[u8]) -> std::io::Result<(usize, bool)> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut taken = 0;
        while taken < bytes.len() {
            match Pin::new(&mut self.stream).poll_write(&mut cx, &bytes[taken..]) {
                Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => taken += n,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok((taken, false)),
            }
        }
        match Pin::new(&mut self.stream).poll_flush(&mut cx) {
            Poll::Ready(flushed) => flushed.map(|()| (taken, true)),
            Poll::Pending => Ok((taken, false)),
        }
    }

    /// Sends bytes that are already MySQL packets.
    pub async fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }
}
