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
use crate::{DATABASE, PASSWORD, TOKEN, Tunnel, USER, mysql_port, opts, sidecar_yaml};

/// A transport process on a free port, with `extra` YAML after the tests' usual config.
pub async fn transport_with(tag: &str, extra: &str) -> (Proc, u16) {
    let port = free_port();
    let yaml =
        crate::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    let transport = Proc::start("transport", &format!("{yaml}{extra}"), tag);
    wait_port(port).await;
    (transport, port)
}

/// A legitimate user: a real sidecar (in this process) in front of the transport at `port`.
pub struct Legit {
    sidecar: SocketAddr,
    shutdown: CancellationToken,
}

impl Legit {
    /// Starts the sidecar.
    pub async fn start(port: u16) -> Legit {
        let shutdown = CancellationToken::new();
        let yaml = sidecar_yaml(&format!("http://127.0.0.1:{port}/"), TOKEN);
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
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    s.write_all(&[head.as_bytes(), body].concat()).await.expect("send");
    let mut answer = Vec::new();
    drop(s.read_to_end(&mut answer).await);
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(answer.len(), |i| i + 4);
    (status, answer[split..].to_vec())
}

/// A session opened and logged in by the transport itself (a `users`-style login), as a
/// custom client of the API would: its id.
pub async fn logged_in_session(port: u16) -> String {
    let (status, id, _) = crate::http::call(port, TOKEN, "POST", "/v1/relay", "{}").await;
    assert_eq!(status, 201, "a session opens");
    // PROTOCOL_41 and friends, with LOCAL_FILES so the server may ask for a file.
    let flags: u32 = 0x000a_a28d;
    let login = format!(
        "{{\"user\":\"{USER}\",\"password\":\"{PASSWORD}\",\"database\":\"{DATABASE}\",\"client_flags\":{flags},\"collation\":45}}"
    );
    let (status, _, answer) =
        crate::http::call(port, TOKEN, "POST", &format!("/v1/sessions/{id}/login"), &login).await;
    assert_eq!(status, 200, "the session logs in: {answer}");
    id
}
