//! A relayed client connection: greeted with the upstream's own greeting, logged in by the
//! upstream itself, then every command passed on as the client's packets and every answer
//! written back as the upstream's. One value moving through its phases: `run` → `log_in` →
//! `serve`; each request is one turn, and the `Turn` frame that ends it says who speaks next.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use common::mysql::{capability as cap, command, error_code};
use common::wire::{Frame, LoginAs, OpenRelay, TurnEnd};
use tracing::{debug, info, warn};

use crate::Error;
use crate::change_user::parse_change_user;
use crate::login::{Answer, Authenticator, Identity};
use crate::protocol::{
    ClientHello, PacketIo, Scramble, encode_err_before_greeting, parse_client_hello,
};
use crate::server::{AFFINITY_BUCKETS, Shared};
use crate::tunnel::{FrameStream, RelayStep, TunnelConn};

/// Largest packet accepted before login completes.
const MAX_LOGIN_PACKET: usize = 64 * 1024;
/// A LOAD DATA LOCAL file is uploaded in pieces of about this size.
const FILE_PIECE: usize = 512 * 1024;
/// Length of an SSLRequest (the fixed part of a handshake response).
const SSL_REQUEST_LEN: usize = 32;

/// A client connection whose conversation the transport relays.
pub struct RelayedConnection {
    io: PacketIo,
    tunnel: TunnelConn,
    shared: Arc<Shared>,
    bucket: usize,
    /// The client's capabilities, MariaDB's extended ones and collation, from its login.
    client: (u32, u32, u8),
    /// The session being logged in, closed if the login does not complete.
    opening: Option<String>,
    /// The client has been sent a greeting.
    greeted: bool,
}

/// How a relayed exchange ended for the client connection.
enum Next {
    /// The client sends its next command.
    Command,
    /// The upstream hung up: so does the sidecar.
    Closed,
}

impl RelayedConnection {
    /// Wraps an accepted socket.
    pub fn new(io: PacketIo, shared: Arc<Shared>, bucket: usize) -> Self {
        let tunnel = shared.tunnel.connection(shared.affinity(bucket));
        Self { io, tunnel, shared, bucket, client: (0, 0, 0), opening: None, greeted: false }
    }

    /// Serves the connection until the client or the upstream hangs up.
    pub async fn run(mut self) {
        let max_packet = self.shared.config.max_packet;
        self.io.set_max_packet(MAX_LOGIN_PACKET);
        let timeout = self.shared.config.handshake_timeout;
        let session = match tokio::time::timeout(timeout, self.log_in()).await {
            Ok(Ok(Some(session))) => session,
            Ok(Ok(None)) => return self.io.shutdown().await,
            Ok(Err(e)) => return self.fail(&e).await,
            Err(_) => {
                return self.fail(&Error::ClientProtocol("login not completed in time")).await;
            }
        };
        info!(session = %session, "client logged in (relayed)");
        self.io.set_max_packet(max_packet);
        let gone = self.shared.live.register(&session, self.bucket);
        let result = tokio::select! {
            result = self.serve(&session) => result,
            _ = gone.cancelled() => return self.io.shutdown().await,
        };
        self.shared.live.unregister(&session);
        match result {
            Ok(()) => debug!(session = %session, "client quit"),
            Err(e) => {
                warn!(session = %session, error = %e, "client connection ended");
                self.send_error(&e).await;
            }
        }
        self.io.shutdown().await;
        self.tunnel.close_session(&session).await;
    }

    /// Greets with the upstream's greeting and relays the login until the upstream decides.
    /// Returns the session id, or `None` when the upstream refused (its ERR was relayed).
    async fn log_in(&mut self) -> Result<Option<String>, Error> {
        let config = &self.shared.config;
        let upstream = if config.passthrough() {
            config.passthrough_upstream()
        } else {
            config.default_upstream()
        };
        let open = OpenRelay {
            upstream: upstream.to_owned(),
            client_tls: self.shared.client_tls.is_some(),
        };
        let prepared = self.shared.greetings.take();
        let next_bucket = (self.bucket + 1) % AFFINITY_BUCKETS;
        self.shared.greetings.prepare_next(
            self.shared.tunnel.clone(),
            open.clone(),
            self.shared.affinity(next_bucket).to_owned(),
            next_bucket,
        );
        let (mut session, greeting) = match prepared {
            Some(prepared) => {
                // Its requests go where it was opened (a hashing proxy keeps it on one transport).
                self.bucket = prepared.bucket;
                self.tunnel = self.shared.tunnel.connection(self.shared.affinity(prepared.bucket));
                for payload in &prepared.greeting {
                    self.io.queue_packet(payload);
                }
                self.io.flush().await?;
                self.greeted = true;
                (prepared.session, prepared.greeting)
            }
            None => {
                let (session, _, mut frames) = self.tunnel.open_relay(&open).await?;
                let (end, greeting) = write_login_packets(&mut self.io, &mut frames).await?;
                self.greeted = true;
                if end != TurnEnd::AwaitAuth || session.is_empty() {
                    return Ok(None);
                }
                (session, greeting)
            }
        };
        self.opening = Some(session.clone());
        let mut packet = self.io.read_expected("client hung up during login").await?;
        if packet.len() == SSL_REQUEST_LEN && client_flags(&packet) & cap::SSL != 0 {
            let acceptor = self.shared.client_tls.clone().ok_or(Error::TlsUnsupported)?;
            self.io.upgrade_tls(&acceptor).await?;
            packet = self.io.read_expected("client hung up after TLS").await?;
        }
        let hello = parse_client_hello(&packet)?;
        self.client = (hello.capabilities, mariadb_flags(&hello, &packet), hello.collation);
        if self.shared.config.user(&hello.user).is_some() || !self.shared.config.passthrough() {
            let login = self.check_listed(&hello, &packet, greeting.first()).await?;
            if !open.upstream.is_empty() && login.1 != open.upstream {
                // The entry maps to another upstream: its session is opened there.
                self.tunnel.close_session(&session).await;
                let other = OpenRelay { upstream: login.1.clone(), client_tls: open.client_tls };
                let (id, _, mut frames) = self.tunnel.open_relay(&other).await?;
                while frames.next().await?.is_some() {}
                session = id;
                self.opening = Some(session.clone());
            }
            let mut frames = self.tunnel.relay(&session, RelayStep::LoginAs(&login.0)).await?;
            return match write_login_packets(&mut self.io, &mut frames).await?.0 {
                TurnEnd::Done => Ok(Some(session)),
                _ => Ok(None),
            };
        }
        loop {
            let mut frames = self.tunnel.relay(&session, RelayStep::Login(&packet)).await?;
            match write_login_packets(&mut self.io, &mut frames).await?.0 {
                TurnEnd::Done => return Ok(Some(session)),
                TurnEnd::AwaitAuth => {
                    packet = self.io.read_expected("client hung up during authentication").await?
                }
                TurnEnd::Closed | TurnEnd::AwaitFile => return Ok(None),
            }
        }
    }

    /// Checks a `users` entry's password against the greeting's scramble (switching the client
    /// to `mysql_native_password` if it answered with another plugin). Returns the upstream
    /// login it maps to and the upstream's name.
    async fn check_listed(
        &mut self,
        hello: &ClientHello,
        packet: &[u8],
        greeting: Option<&Bytes>,
    ) -> Result<(LoginAs, String), Error> {
        let scramble = greeting
            .and_then(|g| greeting_scramble(g))
            .ok_or(Error::StreamBroken("the upstream's greeting has no scramble".into()))?;
        let host = self.io.peer().map_or_else(|| "localhost".into(), |p| p.ip().to_string());
        let first = Answer { plugin: hello.plugin.as_deref(), response: &hello.auth_response };
        let authenticator = Authenticator {
            io: &mut self.io,
            shared: &self.shared,
            host: &host,
            scramble,
            can_switch: hello.capabilities & cap::PLUGIN_AUTH != 0,
        };
        let Identity::Listed(entry) = authenticator.run(&hello.user, Some(first)).await? else {
            return Err(Error::ClientProtocol("a listed login did not use its entry"));
        };
        let mariadb_flags = mariadb_flags(hello, packet);
        let login = LoginAs {
            user: entry.upstream_user().to_owned(),
            password: entry.upstream_password().expose().to_owned(),
            database: hello.database.clone(),
            client_flags: hello.capabilities,
            mariadb_flags,
            collation: hello.collation,
        };
        Ok((login, entry.upstream.clone()))
    }

    /// True when a COM_CHANGE_USER (payload after the command byte) names a `users` entry, or
    /// every login must be one: the sidecar then checks it itself.
    fn listed(&self, payload: &[u8]) -> Result<bool, Error> {
        let request = parse_change_user(payload, self.client.0)?;
        let config = &self.shared.config;
        Ok(config.user(&request.user).is_some() || !config.passthrough())
    }

    /// COM_CHANGE_USER to a `users` entry: proven with an auth switch and a fresh scramble,
    /// then the transport changes the upstream connection to the entry's credentials.
    async fn change_user_as(&mut self, session: &str, payload: &[u8]) -> Result<(), Error> {
        let request = parse_change_user(payload, self.client.0)?;
        let host = self.io.peer().map_or_else(|| "localhost".into(), |p| p.ip().to_string());
        let authenticator = Authenticator {
            io: &mut self.io,
            shared: &self.shared,
            host: &host,
            scramble: Scramble::random()?,
            can_switch: self.client.0 & cap::PLUGIN_AUTH != 0,
        };
        let entry = match authenticator.run(&request.user, None).await {
            Ok(Identity::Listed(entry)) => entry,
            Ok(Identity::Passthrough { .. }) => {
                return Err(Error::ClientProtocol("a listed login did not use its entry"));
            }
            Err(e) if !e.is_fatal() => {
                let (code, state, msg) = e.to_mysql();
                return self.write_error(code, &state, msg.as_bytes()).await;
            }
            Err(e) => return Err(e),
        };
        let login = LoginAs {
            user: entry.upstream_user().to_owned(),
            password: entry.upstream_password().expose().to_owned(),
            database: request.database,
            client_flags: self.client.0,
            mariadb_flags: self.client.1,
            collation: request.collation.unwrap_or(self.client.2),
        };
        let mut frames = self.tunnel.relay(session, RelayStep::LoginAs(&login)).await?;
        write_login_packets(&mut self.io, &mut frames).await.map(drop)
    }

    /// The command loop: each command is one relayed turn (or a few, for a file or an auth
    /// exchange).
    async fn serve(&mut self, session: &str) -> Result<(), Error> {
        let mut riding = BytesMut::new();
        loop {
            self.io.reset_seq();
            let Some(packet) = self.io.read_raw().await? else { return Ok(()) };
            let Some(&cmd) = packet.get(4) else {
                return Err(Error::ClientProtocol("empty command packet"));
            };
            match cmd {
                command::QUIT => return Ok(()),
                command::CHANGE_USER if self.listed(&packet[5..])? => {
                    self.change_user_as(session, &packet[5..]).await?;
                    continue;
                }
                // No answer: they ride on the next command's request.
                command::STMT_CLOSE | command::STMT_SEND_LONG_DATA => {
                    riding.extend_from_slice(&packet);
                    continue;
                }
                command::BINLOG_DUMP
                | command::BINLOG_DUMP_GTID
                | command::TABLE_DUMP
                | command::REGISTER_SLAVE => {
                    self.refuse(cmd).await?;
                    continue;
                }
                _ => {}
            }
            let body = if riding.is_empty() {
                packet
            } else {
                riding.extend_from_slice(&packet);
                riding.split().freeze()
            };
            match self.exchange(session, RelayStep::Command(&body)).await {
                Ok(Next::Command) => {}
                Ok(Next::Closed) => return Ok(()),
                Err(e) if !e.is_fatal() => {
                    let (code, state, msg) = e.to_mysql();
                    self.write_error(code, &state, msg.as_bytes()).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends `step` and relays answers until the client's next command is due.
    async fn exchange(&mut self, session: &str, step: RelayStep<'_>) -> Result<Next, Error> {
        let mut end = {
            let mut frames = self.tunnel.relay(session, step).await?;
            write_answer(&mut self.io, &mut frames).await?
        };
        loop {
            self.io.flush().await?;
            end = match end {
                TurnEnd::Done => return Ok(Next::Command),
                TurnEnd::Closed => return Ok(Next::Closed),
                TurnEnd::AwaitAuth => {
                    let packet =
                        self.io.read_expected("client hung up during authentication").await?;
                    let mut frames = self.tunnel.relay(session, RelayStep::Login(&packet)).await?;
                    write_answer(&mut self.io, &mut frames).await?
                }
                TurnEnd::AwaitFile => self.send_file(session).await?,
            };
        }
    }

    /// Reads the file the client sends after a LOAD DATA LOCAL request and uploads it in
    /// pieces; returns how the answer that follows it ended.
    async fn send_file(&mut self, session: &str) -> Result<TurnEnd, Error> {
        let mut piece = BytesMut::new();
        loop {
            let packet = self.io.read_raw().await?.ok_or(Error::ClientProtocol(
                "client hung up while sending a LOAD DATA LOCAL file",
            ))?;
            let last = packet.len() == 4;
            piece.extend_from_slice(&packet);
            if last {
                let step = RelayStep::File { packets: &piece, last: true };
                let mut frames = self.tunnel.relay(session, step).await?;
                return write_answer(&mut self.io, &mut frames).await;
            }
            if piece.len() >= FILE_PIECE {
                let step = RelayStep::File { packets: &piece, last: false };
                while self.tunnel.relay(session, step).await?.next().await?.is_some() {}
                piece.clear();
            }
        }
    }

    /// A command the tunnel does not carry (a replication stream): the server's own error for
    /// a command it does not know.
    async fn refuse(&mut self, cmd: u8) -> Result<(), Error> {
        debug!(command = cmd, "command not relayed");
        self.write_error(error_code::UNKNOWN_COMMAND, error_code::STATE_COMM, b"Unknown command")
            .await
    }

    async fn write_error(&mut self, code: u16, state: &[u8; 5], msg: &[u8]) -> Result<(), Error> {
        let mut buf = BytesMut::new();
        crate::protocol::encode_err(&mut buf, code, state, msg);
        self.io.queue_packet(&buf);
        self.io.flush().await
    }

    /// Sends the client the error that ends its connection, if the socket still works.
    async fn send_error(&mut self, e: &Error) {
        if !matches!(e, Error::Io(_)) {
            let (code, state, msg) = e.to_mysql();
            drop(self.write_error(code, &state, msg.as_bytes()).await);
        }
    }

    async fn fail(mut self, e: &Error) {
        match e {
            Error::AccessDenied { .. } | Error::Upstream(_) => info!(error = %e, "login refused"),
            _ => warn!(error = %e, "login failed"),
        }
        if !self.greeted {
            // No greeting went out: the error takes its place, as a server's refusal does.
            let (code, _, msg) = e.to_mysql();
            let mut buf = BytesMut::new();
            encode_err_before_greeting(&mut buf, code, msg.as_bytes());
            self.io.queue_packet(&buf);
            drop(self.io.flush().await);
        } else {
            self.send_error(e).await;
        }
        self.io.shutdown().await;
    }
}

/// Writes a relayed answer's packets as they are; returns how the turn ended.
async fn write_answer(io: &mut PacketIo, frames: &mut FrameStream<'_>) -> Result<TurnEnd, Error> {
    while let Some(frame) = frames.next().await? {
        match frame {
            Frame::Packets(packets) => io.write_raw(&packets).await?,
            Frame::Heartbeat => {}
            Frame::Turn(end) => return finish(frames, end).await,
            _ => return Err(Error::StreamBroken("a library frame in a relayed answer".into())),
        }
    }
    Err(Error::StreamBroken("the transport's answer ended early".into()))
}

/// Writes login packets with the client leg's own sequence ids (TLS may be on one leg only,
/// and an SSLRequest takes a sequence id); returns how the turn ended and the payloads.
async fn write_login_packets(
    io: &mut PacketIo,
    frames: &mut FrameStream<'_>,
) -> Result<(TurnEnd, Vec<Bytes>), Error> {
    let mut written = Vec::new();
    while let Some(frame) = frames.next().await? {
        match frame {
            Frame::Packets(packets) => {
                for payload in payloads(&packets)? {
                    io.queue_packet(&payload);
                    written.push(payload);
                }
            }
            Frame::Heartbeat => {}
            Frame::Turn(end) => {
                io.flush().await?;
                return Ok((finish(frames, end).await?, written));
            }
            _ => return Err(Error::StreamBroken("a library frame in a relayed login".into())),
        }
    }
    Err(Error::StreamBroken("the transport's answer ended early".into()))
}

/// The end of a turn must be the end of the body.
async fn finish(frames: &mut FrameStream<'_>, end: TurnEnd) -> Result<TurnEnd, Error> {
    match frames.next().await? {
        None => Ok(end),
        Some(_) => Err(Error::StreamBroken("frames after the end of a turn".into())),
    }
}

/// The payloads of whole packets (login packets are small: never 16 MiB continuations).
pub(crate) fn payloads(mut packets: &[u8]) -> Result<Vec<Bytes>, Error> {
    let mut out = Vec::new();
    while !packets.is_empty() {
        let len = packets
            .get(..3)
            .map(|h| usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16)
            .ok_or(Error::StreamBroken("a cut login packet".into()))?;
        let payload =
            packets.get(4..4 + len).ok_or(Error::StreamBroken("a cut login packet".into()))?;
        out.push(Bytes::copy_from_slice(payload));
        packets = &packets[4 + len..];
    }
    Ok(out)
}

/// MariaDB's extended capabilities in a handshake response (when it clears CLIENT_MYSQL).
fn mariadb_flags(hello: &ClientHello, packet: &[u8]) -> u32 {
    match packet.get(28..32) {
        Some(b) if hello.capabilities & cap::LONG_PASSWORD == 0 => {
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        }
        _ => 0,
    }
}

/// The 20-byte scramble of a HandshakeV10 payload.
fn greeting_scramble(g: &[u8]) -> Option<Scramble> {
    let nul = 1 + g.get(1..)?.iter().position(|&b| b == 0)?;
    let part1 = g.get(nul + 5..nul + 13)?;
    let part2 = g.get(nul + 32..nul + 44)?;
    let mut scramble = [0u8; 20];
    scramble[..8].copy_from_slice(part1);
    scramble[8..].copy_from_slice(part2);
    Some(Scramble(scramble))
}

/// The capability flags at the start of a handshake response or SSLRequest.
fn client_flags(p: &[u8]) -> u32 {
    p.get(..4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}
