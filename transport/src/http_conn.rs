//! One HTTP connection of the transport, on its shard: closed when it sends nothing at first,
//! else served with keep-alive (over TLS when the transport has a certificate) until a
//! shutdown asks it to finish what it is answering.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::write_stall::WriteStall;

/// Time a client has to complete the TLS handshake.
const TLS_HANDSHAKE: Duration = Duration::from_secs(10);

/// Time a new connection has to send its first byte (sidecars and proxies send at once).
pub const FIRST_BYTE: Duration = Duration::from_secs(10);

/// Most bytes a connection buffers, a request head with them: a longer head is refused (431).
/// hyper's default, about 400 KB, let each connection without a token hold that much for
/// `idle_timeout` (4,096 of them 1.7 GB); a sidecar's head is well under 16 KiB, and nginx
/// refuses a header line over 8 KiB by default.
pub const MAX_BUFFER: usize = 64 * 1024;

/// One HTTP connection on its shard: closed when it sends nothing for `FIRST_BYTE`, else
/// served, over TLS when the transport has a certificate.
pub async fn connection<S>(
    stream: TcpStream,
    peer: SocketAddr,
    service: S,
    (closing, began): (CancellationToken, Arc<tokio::sync::Notify>),
    (tls, idle_timeout): (Option<TlsAcceptor>, Duration),
) where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = crate::reply::ResponseBody>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    // A silent connection costs this small task only: HTTP and TLS state (boxed
    // below) is allocated once it speaks.
    let first_byte = FIRST_BYTE.min(idle_timeout);
    // (A peek, not `readable()`: a new socket counts as readable until a read fails.)
    match tokio::time::timeout(first_byte, stream.peek(&mut [0u8; 1])).await {
        Ok(Ok(n)) if n > 0 => {}
        Ok(_) => return,
        Err(_) => return debug!(%peer, "a new connection sent nothing: closed"),
    }
    Box::pin(async move {
        // A write may wait `idle_timeout` at most: a peer that stops reading an answer
        // does not hold its connection (and the turn it streams) for ever.
        let result = match tls {
            None => {
                let io = TokioIo::new(WriteStall::new(stream, idle_timeout));
                serve(io, service, (closing, began), idle_timeout).await
            }
            Some(acceptor) => {
                match tokio::time::timeout(TLS_HANDSHAKE, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        let io = TokioIo::new(WriteStall::new(stream, idle_timeout));
                        serve(io, service, (closing, began), idle_timeout).await
                    }
                    Ok(Err(e)) => return debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => return debug!(%peer, "TLS handshake timed out"),
                }
            }
        };
        if let Err(e) = result {
            debug!(%peer, error = %e, "http connection ended with an error");
        }
    })
    .await;
}

/// Serves HTTP/1.1 with keep-alive on one connection, plain or TLS, until `closing` asks it
/// to finish what it is answering; a connection that has not begun a request yet (it was
/// accepted, its first bytes are in) answers that one first (`began` holds a permit once a
/// request began). A request head, or the wait for the next request, may take
/// `idle_timeout`. An upgrade to a stream hands the socket over (`server::carry_stream`).
async fn serve<IO, S>(
    io: TokioIo<IO>,
    service: S,
    (closing, began): (CancellationToken, Arc<tokio::sync::Notify>),
    idle_timeout: Duration,
) -> hyper::Result<()>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = crate::reply::ResponseBody>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder.keep_alive(true).timer(TokioTimer::new()).header_read_timeout(idle_timeout);
    builder.max_buf_size(MAX_BUFFER);
    let connection = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => return result,
        () = closing.cancelled() => {}
    }
    tokio::select! {
        result = connection.as_mut() => return result,
        () = began.notified() => {}
    }
    connection.as_mut().graceful_shutdown();
    connection.await
}
