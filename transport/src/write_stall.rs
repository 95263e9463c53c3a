//! A bound on how long a write may wait: a peer that stops reading an answer would otherwise
//! hold its connection, and the turn it streams, for as long as it likes. A write (or flush)
//! that stays pending past the limit fails with `TimedOut`; the connection then ends, and a
//! resumable turn is kept for its sidecar's resume. The timer exists only while a write waits.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `IO` whose writes may wait at most a limit.
#[derive(Debug)]
pub struct WriteStall<IO> {
    io: IO,
    limit: Duration,
    waiting: Option<Pin<Box<Sleep>>>,
}

impl<IO> WriteStall<IO> {
    /// `io`, its writes bounded by `limit`.
    pub fn new(io: IO, limit: Duration) -> Self {
        Self { io, limit, waiting: None }
    }

    /// The socket inside.
    pub fn into_inner(self) -> IO {
        self.io
    }

    /// `outcome` of a write: a pending one starts (or checks) the limit's timer, anything
    /// else stops it.
    fn bounded<T>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if outcome.is_ready() {
            self.waiting = None;
            return outcome;
        }
        let limit = self.limit;
        let timer = self.waiting.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.waiting = None;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the peer stopped reading",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteStall<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteStall<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_write(cx, buf);
        this.bounded(cx, outcome)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.bounded(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_flush(cx);
        this.bounded(cx, outcome)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_the_peer_never_reads_fails_at_the_limit() {
        let (ours, theirs) = tokio::io::duplex(1024);
        let mut bounded = WriteStall::new(ours, Duration::from_millis(200));
        bounded.write_all(&[0u8; 1024]).await.expect("the buffer takes the first KiB");
        let started = std::time::Instant::now();
        let stalled = bounded.write_all(&[0u8; 1024]).await;
        assert_eq!(stalled.err().map(|e| e.kind()), Some(io::ErrorKind::TimedOut));
        assert!(started.elapsed() >= Duration::from_millis(200));
        drop(theirs);
    }

    #[tokio::test]
    async fn a_peer_that_reads_slowly_is_not_cut() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut bounded = WriteStall::new(ours, Duration::from_millis(300));
        let reader = tokio::spawn(async move {
            let mut sink = [0u8; 64];
            let mut total = 0;
            while total < 4096 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                total +=
                    tokio::io::AsyncReadExt::read(&mut theirs, &mut sink).await.unwrap_or(4096);
            }
        });
        bounded.write_all(&[1u8; 4096]).await.expect("each write waits less than the limit");
        reader.await.expect("reader");
    }
}
