//! One keep-alive HTTP/1.1 connection to the transport (or an OpenID Provider), owned by one
//! client connection, so a command costs one write and one read on an open socket and no task
//! hop. Upgraded, it becomes a stream ([`super::StreamConn`]).

use std::{io, time::Duration};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::stream::MaybeTls;
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use super::body::{BodyDecoder, Decoded};
pub use super::head::ResponseHead;
use super::silence::Silence;

/// The socket: plain TCP for `http://`, TLS for `https://`.
pub(super) type Stream = MaybeTls<TcpStream, tokio_rustls::client::TlsStream<TcpStream>>;

/// Most response headers accepted.
const MAX_HEADERS: usize = 32;
/// Largest response head accepted.
const MAX_HEAD: usize = common::wire::MAX_HEAD_BYTES;
/// The silence limit until the transport has told its heartbeat interval: three times its
/// default.
pub const DEFAULT_SILENCE_LIMIT: Duration = Duration::from_secs(30);

/// A client HTTP/1.1 connection.
#[derive(Debug)]
pub struct HttpConn {
    pub(super) stream: Stream,
    pub(super) buf: BytesMut,
    pub(super) body: BodyDecoder,
    pub(super) keep_alive: bool,
    /// The silence limit, and its timer.
    pub(super) silence: Silence,
    /// The thread that made it: its socket's readiness is seen there (its shard).
    pub home: std::thread::ThreadId,
}

impl HttpConn {
    /// Connects to `host:port` (through `proxy`, if given) with TCP_NODELAY, then TLS when
    /// `tls` is given.
    pub async fn connect(
        host: &str,
        port: u16,
        timeout: Duration,
        tls: Option<&TlsConnector>,
        proxy: Option<&super::Proxy>,
    ) -> io::Result<Self> {
        let connect = async {
            let tcp = Self::open_tcp(host, port, proxy).await?;
            Self::over(tcp, host, tls).await
        };
        tokio::time::timeout(timeout, connect).await.map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no connection within {}s", timeout.as_secs()),
            )
        })?
    }

    /// The TCP leg alone: to `host:port`, or through `proxy` with CONNECT; TCP_NODELAY set.
    pub async fn open_tcp(
        host: &str,
        port: u16,
        proxy: Option<&super::Proxy>,
    ) -> io::Result<TcpStream> {
        let tcp = match proxy {
            Some(proxy) => proxy.connect(host, port).await?,
            None => TcpStream::connect((host, port)).await?,
        };
        tcp.set_nodelay(true)?;
        Ok(tcp)
    }

    /// An HTTP connection over `tcp`: TLS with `host` as the server name when `tls` is given.
    pub async fn over(tcp: TcpStream, host: &str, tls: Option<&TlsConnector>) -> io::Result<Self> {
        let stream = match tls {
            None => MaybeTls::Plain(tcp),
            Some(connector) => {
                let name = ServerName::try_from(host.to_owned())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                MaybeTls::Tls(Box::new(connector.connect(name, tcp).await?))
            }
        };
        Ok(Self {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
            body: BodyDecoder::empty(),
            keep_alive: false,
            silence: Silence::new(DEFAULT_SILENCE_LIMIT),
            home: std::thread::current().id(),
        })
    }

    /// Sets the longest silence tolerated from the transport.
    pub fn set_silence_limit(&mut self, limit: Duration) {
        self.silence.set_limit(limit);
    }

    /// True when the previous answer was read to its end and the connection may be reused.
    pub fn reusable(&self) -> bool {
        self.keep_alive && self.body.is_done() && self.buf.is_empty()
    }

    /// Sends a request (head and body in one write when small) and reads the response head.
    /// `Err` with kind `ConnectionAborted` means nothing at all came back: the caller may retry
    /// on a fresh connection when this one was reused.
    pub async fn request(&mut self, head: &[u8], body: &[u8]) -> io::Result<Box<ResponseHead>> {
        self.keep_alive = false;
        self.body = BodyDecoder::empty();
        let stream = &mut self.stream;
        let write = async {
            if body.len() <= 64 * 1024 {
                let mut both = Vec::with_capacity(head.len() + body.len());
                both.extend_from_slice(head);
                both.extend_from_slice(body);
                stream.write_all(&both).await?;
            } else {
                stream.write_all(head).await?;
                stream.write_all(body).await?;
            }
            // Over HTTPS the last records may still sit in rustls: a flush sends them.
            stream.flush().await
        };
        match self.silence.within(std::pin::pin!(write)).await {
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(e),
            sent => sent.map_err(|e| io::Error::new(io::ErrorKind::ConnectionAborted, e))?,
        }
        self.read_head().await
    }

    async fn read_head(&mut self) -> io::Result<Box<ResponseHead>> {
        let mut first = true;
        loop {
            if let Some((head, body, keep_alive)) = Self::parse_head(&mut self.buf)? {
                self.body = body;
                self.keep_alive = keep_alive;
                return Ok(head);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "response head too large"));
            }
            let read = std::pin::pin!(self.stream.read_buf(&mut self.buf));
            let n = self.silence.within(read).await?;
            if n == 0 {
                let kind = if first && self.buf.is_empty() {
                    io::ErrorKind::ConnectionAborted
                } else {
                    io::ErrorKind::UnexpectedEof
                };
                return Err(io::Error::new(kind, "the connection closed before an answer"));
            }
            first = false;
        }
    }

    /// A response head at the start of `buf`, taken from it, with the decoder of its body
    /// and whether the connection stays open after it; `None` while it is incomplete.
    pub(super) fn parse_head(
        buf: &mut BytesMut,
    ) -> io::Result<Option<(Box<ResponseHead>, BodyDecoder, bool)>> {
        {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut headers);
            let parsed = response.parse(buf).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("not an HTTP response ({e})"))
            })?;
            if let httparse::Status::Complete(len) = parsed {
                let status = response.code.unwrap_or(0);
                let reason = response.reason.unwrap_or("");
                let headers = response
                    .headers
                    .iter()
                    .filter_map(|h| std::str::from_utf8(h.value).ok().map(|value| (h.name, value)));
                let head = ResponseHead::from_headers(status, reason, headers);
                let close = header(response.headers, "connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close"));
                let chunked = header(response.headers, "transfer-encoding")
                    .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
                let length =
                    header(response.headers, "content-length").map(|v| v.trim().parse::<u64>());
                let body = match (status, chunked, length) {
                    (100..=199 | 204 | 304, _, _) => BodyDecoder::empty(),
                    (_, true, _) => BodyDecoder::chunked(),
                    (_, false, Some(Ok(n))) => BodyDecoder::length(n),
                    (_, false, Some(Err(_))) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "bad Content-Length",
                        ));
                    }
                    (_, false, None) => BodyDecoder::until_close(),
                };
                let keep_alive = !close && response.version == Some(1) && !body.ends_with_close();
                drop(buf.split_to(len));
                return Ok(Some((head, body, keep_alive)));
            }
        }
        Ok(None)
    }
}

impl super::AnswerBody for HttpConn {
    async fn body_chunk(&mut self) -> io::Result<Option<Bytes>> {
        loop {
            match self.body.decode(&mut self.buf)? {
                Decoded::Data(data) => return Ok(Some(data)),
                Decoded::Done => return Ok(None),
                Decoded::NeedMore => {
                    self.buf.reserve(16 * 1024);
                    let read = std::pin::pin!(self.stream.read_buf(&mut self.buf));
                    if self.silence.within(read).await? == 0 {
                        self.body.at_eof()?;
                        return Ok(None);
                    }
                }
            }
        }
    }
}

fn header<'a>(headers: &'a [httparse::Header<'_>], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .and_then(|h| std::str::from_utf8(h.value).ok())
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
