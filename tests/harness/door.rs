//! What the door's attack tests share: a transport process with extra settings, a legitimate
//! client (a real sidecar and mysql_async) whose logins and queries are measured meanwhile, and
//! raw requests an attacker writes byte by byte.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::processes::{Proc, free_port, wait_port};
use crate::{Carrier, DATABASE, PASSWORD, TOKEN, Tunnel, USER, mysql_port, opts, sidecar_yaml};

/// A transport process on a free port, with `extra` YAML after the tests' usual config.
pub async fn transport_with(tag: &str, extra: &str) -> (Proc, u16) {
    let port = free_port();
    let yaml =
        crate::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    let transport = Proc::start("transport", &format!("{yaml}{extra}"), tag);
    wait_port(port).await;
    (transport, port)
}

/// The sidecar's config for the transport at `port`, with the test token.
fn yaml_for(port: u16) -> String {
    sidecar_yaml(&format!("http://127.0.0.1:{port}/"), TOKEN)
}

/// A legitimate user: a real sidecar (in this process) in front of the transport at `port`.
pub struct Legit {
    sidecar: SocketAddr,
    shutdown: CancellationToken,
}

impl Legit {
    /// Starts the sidecar.
    pub async fn start(port: u16) -> Legit {
        Self::start_with(yaml_for(port)).await
    }

    /// Starts the sidecar on `carrier` only (a promise of one carrier: no fallback unseen).
    pub async fn start_on(port: u16, carrier: Carrier) -> Legit {
        Self::start_with(carrier.sidecar(&yaml_for(port))).await
    }

    async fn start_with(yaml: String) -> Legit {
        let shutdown = CancellationToken::new();
        let sidecar = Tunnel::start_sidecar(&yaml, shutdown.clone()).await;
        Legit { sidecar, shutdown }
    }

    /// A new connection through the tunnel.
    pub async fn connect(&self) -> Result<Conn, mysql_async::Error> {
        Conn::new(opts(self.sidecar.port(), Some(DATABASE))).await
    }

    /// Logs in, runs `SELECT 1` and quits; how long that took, or what failed.
    pub async fn login_and_query(&self) -> Result<Duration, String> {
        let started = Instant::now();
        let work = async {
            let mut c = self.connect().await.map_err(|e| format!("login: {e}"))?;
            let one: Option<u8> =
                c.query_first("SELECT 1").await.map_err(|e| format!("query: {e}"))?;
            if one != Some(1) {
                return Err(format!("SELECT 1 answered {one:?}"));
            }
            c.disconnect().await.map_err(|e| format!("quit: {e}"))?;
            Ok(started.elapsed())
        };
        match tokio::time::timeout(Duration::from_secs(20), work).await {
            Ok(outcome) => outcome,
            Err(_) => Err("no answer in 20 s".into()),
        }
    }
}

impl Drop for Legit {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Reads an HTTP answer's head (up to its blank line) within `wait`; `None` when the
/// connection closed or nothing came.
pub async fn read_head(s: &mut tokio::net::TcpStream, wait: Duration) -> Option<String> {
    let mut head = Vec::new();
    let read = async {
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            head.push(byte[0]);
        }
        Some(())
    };
    tokio::time::timeout(wait, read).await.ok()??;
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// A POST of raw bytes with the tests' token and `headers`, on a new connection; the status
/// and the body.
pub async fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Vec<u8>) {
    post_as(port, TOKEN, path, headers, body).await
}

/// [`post`] with `token`.
pub async fn post_as(
    port: u16,
    token: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    s.write_all(&[head.as_bytes(), body].concat()).await.expect("send");
    let mut answer = Vec::new();
    drop(s.read_to_end(&mut answer).await);
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(answer.len(), |i| i + 4);
    let chunked = text[..split].to_ascii_lowercase().contains("transfer-encoding: chunked");
    let body = &answer[split..];
    (status, if chunked { dechunked(body) } else { body.to_vec() })
}

/// The bytes of a chunked body (as far as it is whole).
fn dechunked(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..line]).ok();
        let size = size.and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok());
        let start = line + 2;
        match size {
            Some(n) if n > 0 && body.len() >= start + n => {
                out.extend_from_slice(&body[start..start + n]);
                body = body[start + n..].strip_prefix(b"\r\n").unwrap_or_default();
            }
            _ => break,
        }
    }
    out
}

/// A session opened and logged in by the transport itself (a `users`-style login), as a
/// custom client of the API would: its id.
pub async fn logged_in_session(port: u16) -> String {
    logged_in_session_as(port, TOKEN).await
}

/// [`logged_in_session`] with `token`.
pub async fn logged_in_session_as(port: u16, token: &str) -> String {
    let (status, id, _) = crate::http::call(port, token, "POST", "/v1/relay", "{}").await;
    assert_eq!(status, 201, "a session opens");
    // PROTOCOL_41 and friends, with LOCAL_FILES so the server may ask for a file.
    let flags: u32 = 0x000a_a28d;
    let login = format!(
        "{{\"user\":\"{USER}\",\"password\":\"{PASSWORD}\",\"database\":\"{DATABASE}\",\"client_flags\":{flags},\"collation\":45}}"
    );
    let (status, _, answer) =
        crate::http::call(port, token, "POST", &format!("/v1/sessions/{id}/login"), &login).await;
    assert_eq!(status, 200, "the session logs in: {answer}");
    id
}

/// A hostile upstream: it greets naming `greeting_plugin`, answers a handshake response with an
/// auth switch to `switch_to` (with `nonce`), and records every byte a client sends it. Each
/// connection it accepts is counted.
pub struct HostileUpstream {
    /// Its port.
    pub port: u16,
    /// Every byte clients sent it.
    pub received: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    /// Connections it accepted.
    pub connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl HostileUpstream {
    /// Starts it on a free port.
    pub async fn start(
        greeting_plugin: &'static str,
        switch_to: &'static str,
        nonce: &'static [u8],
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (kept, counted) = (received.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let kept = kept.clone();
                tokio::spawn(async move {
                    drop(s.write_all(&packet(0, &greeting(greeting_plugin))).await);
                    let mut buf = vec![0u8; 4096];
                    let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await
                    else {
                        return;
                    };
                    kept.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(&buf[..n]);
                    let switch = [&[0xfe][..], switch_to.as_bytes(), &[0], nonce].concat();
                    drop(s.write_all(&packet(2, &switch)).await);
                    if let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await
                    {
                        kept.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(&buf[..n]);
                    }
                    let err = [&[0xff, 0x15, 0x04, b'#'][..], b"28000", b"Access denied"].concat();
                    drop(s.write_all(&packet(4, &err)).await);
                });
            }
        });
        HostileUpstream { port, received, connections }
    }

    /// True when `needle` is among the bytes clients sent.
    pub fn received_contains(&self, needle: &[u8]) -> bool {
        let received = self.received.lock().unwrap_or_else(|p| p.into_inner());
        received.windows(needle.len()).any(|w| w == needle)
    }
}

/// A HandshakeV10 naming `plugin`, with a fixed scramble, offering what a MariaDB offers a
/// client (local files and multiple results among it).
pub fn greeting(plugin: &str) -> Vec<u8> {
    let caps: u32 =
        0x0001 | 0x0004 | 0x0008 | 0x0080 | 0x0200 | 0x2000 | 0x8000 | 0x0003_0000 | 0x0008_0000;
    let mut p = vec![10];
    p.extend_from_slice(b"5.5.5-10.11.0-MariaDB-fake\0");
    p.extend_from_slice(&7u32.to_le_bytes());
    p.extend_from_slice(b"abcdefgh\0");
    p.extend_from_slice(&(caps as u16).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    p.push(21);
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(b"ijklmnopqrst\0");
    p.extend_from_slice(plugin.as_bytes());
    p.push(0);
    p
}

/// A MySQL packet with sequence id `seq`.
pub fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = (payload.len() as u32).to_le_bytes().to_vec();
    p[3] = seq;
    p.extend_from_slice(payload);
    p
}

/// A connection to the transport at `port` from 127.0.0.2, an attacker's address: not the
/// legitimate client's (127.0.0.1), as on a real network.
pub async fn attacker_connect(port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(([127, 0, 0, 2], 0).into())?;
    socket.connect(([127, 0, 0, 1], port).into()).await
}
