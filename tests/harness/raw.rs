//! A minimal raw MySQL client (native password login, packets in and out) for commands no
//! driver exposes, such as COM_FIELD_LIST, and for sending malformed or pipelined input; in
//! the compressed protocol, for seeing how an answer is framed.

use common::mysql::packets::ok_status;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "raw_compressed.rs"]
mod compressed;
pub use compressed::{CompressedClient, Framed, com_query};

/// SERVER_MORE_RESULTS_EXISTS.
const MORE_RESULTS: u16 = 0x0008;

/// A greeting's payload after its server version (from the connection id on).
fn after_version(greeting: &[u8]) -> &[u8] {
    let nul = greeting[1..].iter().position(|&b| b == 0).expect("version") + 1;
    &greeting[nul + 1..]
}

/// The `mysql_native_password` answer to `scramble`.
fn native_token(password: &str, scramble: &[u8]) -> Vec<u8> {
    let h1 = Sha1::digest(password.as_bytes());
    let h2 = Sha1::digest(h1);
    let h3 = Sha1::digest([scramble, h2.as_slice()].concat());
    h1.iter().zip(h3.iter()).map(|(a, b)| a ^ b).collect()
}

/// How a connection ended, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Nothing happened.
    StillOpen,
    /// An orderly close (FIN).
    Closed,
    /// A reset (RST).
    Reset,
    /// Another socket error.
    Failed,
    /// Bytes arrived instead.
    SentSomething,
}

/// A logged-in raw connection.
pub struct RawClient {
    stream: TcpStream,
    seq: u8,
    connection_id: u32,
}

/// CLIENT_PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | CONNECT_WITH_DB | LONG_PASSWORD |
/// TRANSACTIONS | MULTI_STATEMENTS | MULTI_RESULTS — no DEPRECATE_EOF.
pub const CAPS: u32 = 0x0000_0200
    | 0x0000_8000
    | 0x0008_0000
    | 0x0000_0008
    | 0x0000_0001
    | 0x0000_2000
    | 0x0001_0000
    | 0x0002_0000;

impl RawClient {
    /// Connects and reads the greeting: returns the client, the 20-byte scramble and the
    /// greeting's auth plugin.
    pub async fn greet(port: u16) -> (RawClient, Vec<u8>, String) {
        let (c, greeting) = RawClient::connect(port).await;
        let p = after_version(&greeting);
        let mut scramble = p[4..12].to_vec();
        scramble.extend_from_slice(&p[31..43]);
        let plugin = String::from_utf8_lossy(&p[44..]).trim_end_matches('\0').to_owned();
        (c, scramble, plugin)
    }

    /// Connects and reads the greeting's payload (its connection id is kept).
    async fn connect(port: u16) -> (RawClient, Vec<u8>) {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let mut c = RawClient { stream, seq: 0, connection_id: 0 };
        let greeting = c.read().await;
        let p = after_version(&greeting);
        c.connection_id = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
        (c, greeting)
    }

    /// A HandshakeResponse41 with capabilities `caps` (protocol 4.1 and secure connection are
    /// always set).
    pub fn hello(caps: u32, user: &str, auth: &[u8], db: &str, plugin: &str) -> Vec<u8> {
        let caps = caps | 0x0000_0200 | 0x0000_8000 | if db.is_empty() { 0 } else { 0x0000_0008 };
        let mut hello = Vec::new();
        hello.extend_from_slice(&caps.to_le_bytes());
        hello.extend_from_slice(&(1u32 << 24).to_le_bytes());
        hello.push(45);
        hello.extend_from_slice(&[0; 23]);
        hello.extend_from_slice(user.as_bytes());
        hello.push(0);
        hello.push(auth.len() as u8);
        hello.extend_from_slice(auth);
        if !db.is_empty() {
            hello.extend_from_slice(db.as_bytes());
            hello.push(0);
        }
        if caps & 0x0008_0000 != 0 {
            hello.extend_from_slice(plugin.as_bytes());
            hello.push(0);
        }
        hello
    }

    /// Connects and logs in with `mysql_native_password`.
    pub async fn login(port: u16, user: &str, password: &str, db: &str) -> RawClient {
        RawClient::login_with_caps(port, user, password, db, CAPS).await
    }

    /// Connects and logs in with `mysql_native_password` and capabilities `caps`.
    pub async fn login_with_caps(
        port: u16,
        user: &str,
        password: &str,
        db: &str,
        caps: u32,
    ) -> RawClient {
        let (mut c, scramble, _) = RawClient::greet(port).await;
        let token = native_token(password, &scramble);
        c.write(&RawClient::hello(caps, user, &token, db, "mysql_native_password")).await;
        let ok = c.read().await;
        assert_eq!(ok[0], 0, "login OK, got {ok:?}");
        c
    }

    /// Connects and logs in with `mysql_native_password`, capabilities `caps` and MariaDB's
    /// extended capabilities `mariadb` (announced by clearing CLIENT_LONG_PASSWORD). Returns the
    /// client and the greeting's payload.
    pub async fn login_mariadb(
        port: u16,
        user: &str,
        password: &str,
        db: &str,
        caps: u32,
        mariadb: u32,
    ) -> (RawClient, Vec<u8>) {
        let (mut c, greeting) = RawClient::connect(port).await;
        let p = after_version(&greeting);
        let scramble = [&p[4..12], &p[31..43]].concat();
        let token = native_token(password, &scramble);
        let mut hello = RawClient::hello(caps & !1, user, &token, db, "mysql_native_password");
        hello[0] &= !1;
        hello[28..32].copy_from_slice(&mariadb.to_le_bytes());
        c.write(&hello).await;
        let ok = c.read().await;
        assert_eq!(ok[0], 0, "login OK, got {ok:?}");
        (c, greeting)
    }

    /// Sends a command and returns every byte that comes back until the line has been quiet
    /// for a while: a framing-free view of an answer, for byte-for-byte comparisons.
    pub async fn command_bytes(&mut self, payload: &[u8]) -> Vec<u8> {
        self.write_command(payload).await;
        self.read_until_quiet().await
    }

    /// Sends commands in one write, without waiting for any answer (a pipelining client), and
    /// returns every byte that comes back until the line has been quiet.
    pub async fn pipeline_bytes(&mut self, payloads: &[Vec<u8>]) -> Vec<u8> {
        self.write_pipeline(payloads).await;
        self.read_until_quiet().await
    }

    /// Writes commands (each a packet with sequence id 0) in one write, reading nothing.
    pub async fn write_pipeline(&mut self, payloads: &[Vec<u8>]) {
        let mut out = Vec::new();
        for payload in payloads {
            out.extend_from_slice(&(payload.len() as u32).to_le_bytes()[..3]);
            out.push(0);
            out.extend_from_slice(payload);
        }
        self.stream.write_all(&out).await.expect("write pipeline");
    }

    /// Every byte that arrives until the line has been quiet for 200 ms (the first may take
    /// up to 10 s); empty when the peer closed the connection first.
    pub async fn read_until_quiet(&mut self) -> Vec<u8> {
        use std::time::Duration;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536]; // on the heap: this future is held across awaits
        let mut wait = Duration::from_secs(10);
        while let Ok(Ok(n)) = tokio::time::timeout(wait, self.stream.read(&mut buf)).await {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            wait = Duration::from_millis(200);
        }
        out
    }

    /// How the connection ends within `wait`, the client having sent nothing.
    pub async fn ending_within(&mut self, wait: std::time::Duration) -> Ending {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(wait, self.stream.read(&mut byte)).await {
            Err(_) => Ending::StillOpen,
            Ok(Ok(0)) => Ending::Closed,
            Ok(Ok(_)) => Ending::SentSomething,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => Ending::Reset,
            Ok(Err(_)) => Ending::Failed,
        }
    }

    /// The connection id the server's greeting announced.
    pub fn greeting_connection_id(&self) -> u32 {
        self.connection_id
    }

    /// Starts a new command (sequence id 0) and writes its packet.
    pub async fn write_command(&mut self, payload: &[u8]) {
        self.seq = 0;
        self.write(payload).await;
    }

    /// Starts a command like [`RawClient::write_command`], but a connection the peer has
    /// already closed is not a failure: that is what the caller wants to see.
    pub async fn try_write_command(&mut self, payload: &[u8]) -> std::io::Result<()> {
        let mut p = (payload.len() as u32).to_le_bytes().to_vec();
        p[3] = 0;
        self.seq = 1;
        p.extend_from_slice(payload);
        self.stream.write_all(&p).await
    }

    /// Writes one packet with the current sequence id.
    pub async fn write(&mut self, payload: &[u8]) {
        let mut p = (payload.len() as u32).to_le_bytes();
        p[3] = self.seq;
        self.seq = self.seq.wrapping_add(1);
        self.stream.write_all(&p).await.expect("write header");
        self.stream.write_all(payload).await.expect("write payload");
    }

    /// Reads one packet.
    pub async fn read(&mut self) -> Vec<u8> {
        let mut h = [0u8; 4];
        self.stream.read_exact(&mut h).await.expect("read header");
        self.seq = h[3].wrapping_add(1);
        let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
        let mut p = vec![0; len];
        self.stream.read_exact(&mut p).await.expect("read payload");
        p
    }

    /// Sends a command and reads every packet of its answer, all result sets included (this
    /// client does not set CLIENT_DEPRECATE_EOF: result sets end with EOF packets).
    pub async fn command_all(&mut self, payload: &[u8]) -> Vec<Vec<u8>> {
        self.seq = 0;
        self.write(payload).await;
        let mut packets = Vec::new();
        loop {
            let first = self.read().await;
            let head = first.first().copied();
            packets.push(first.clone());
            let more = match head {
                Some(0xff) => false,
                Some(0x00) => ok_status(&first).is_some_and(|s| s & MORE_RESULTS != 0),
                _ => {
                    let columns = first[0] as usize;
                    for _ in 0..=columns {
                        packets.push(self.read().await); // definitions, then their EOF
                    }
                    loop {
                        let p = self.read().await;
                        let end = p.first() == Some(&0xfe) && p.len() < 9;
                        let err = p.first() == Some(&0xff);
                        packets.push(p.clone());
                        if err {
                            return packets;
                        }
                        if end {
                            break u16::from_le_bytes([p[3], p[4]]) & MORE_RESULTS != 0;
                        }
                    }
                }
            };
            if !more {
                return packets;
            }
        }
    }

    /// True when the server has closed the connection (reads end-of-stream within a second,
    /// without anything having been sent).
    pub async fn closed_by_server(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(1), self.stream.read(&mut byte))
                .await,
            Ok(Ok(0) | Err(_))
        )
    }

    /// Sends a command and reads its answer: an OK or ERR, or packets up to an EOF.
    pub async fn command_until_eof(&mut self, payload: &[u8]) -> Vec<Vec<u8>> {
        self.seq = 0;
        self.write(payload).await;
        let mut packets = Vec::new();
        loop {
            let p = self.read().await;
            let first_ok = packets.is_empty() && p.first() == Some(&0x00);
            let last =
                first_ok || p.first() == Some(&0xff) || (p.first() == Some(&0xfe) && p.len() < 9);
            packets.push(p);
            if last {
                return packets;
            }
        }
    }
}
