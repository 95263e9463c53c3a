//! A relayed upstream connection: the socket (plain or TLS), what has been read from it, and
//! where its conversation stands (logging in, waiting for the client, or ready).

use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::stream::MaybeTls;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::WaitForCancellationFutureOwned;

use common::mysql::packet;
use common::rare::RareWait;
use common::wire::LoginAs;

use super::credentials;
use super::framing::{Framing, Shape};
use super::handshake::{
    ClientCaps, ClientLeg, Greeting, greeting_for_client, response_for_upstream,
};
pub use super::link_state::{LinkState, Phase};
use crate::Error;
use crate::config::UpstreamConfig;
use common::mysql::handshake_response::FIXED_LEN;
use common::mysql::packets::PacketHead;

/// The upstream socket.
pub type UpstreamStream = MaybeTls<TcpStream, TlsStream<TcpStream>>;

/// Largest greeting accepted (they are about 100 bytes).
const MAX_GREETING: usize = 4096;
/// caching_sha2_password's "send the password" (AuthMoreData).
const PERFORM_FULL_AUTH: u8 = 0x04;
/// Read buffer size: answers are passed on in pieces of at most about this much.
pub const READ_CHUNK: usize = 64 * 1024;

/// TLS settings of the upstream leg.
#[derive(Clone)]
pub struct UpstreamTlsLink {
    /// The connector.
    pub connector: TlsConnector,
    /// The name the certificate must carry.
    pub name: ServerName<'static>,
}

impl std::fmt::Debug for UpstreamTlsLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTlsLink").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A link taken apart ([`RelayLink::into_state`]): its socket, its state, its upstream's TLS.
pub type TakenApart = (std::net::TcpStream, LinkState, Option<UpstreamTlsLink>);

/// One relayed upstream connection.
#[derive(Debug)]
pub struct RelayLink {
    /// The socket.
    pub stream: UpstreamStream,
    /// Bytes read and not yet passed on.
    pub rbuf: BytesMut,
    /// Where the conversation stands.
    pub phase: Phase,
    /// The shape of answers, from the client's capabilities.
    pub shape: Shape,
    /// A turn left for the client to answer (its file, an auth packet), to resume after.
    pub pending: Option<Framing>,
    /// Sequence id of the last packet read during login (the next one written follows it).
    pub last_seq: u8,
    /// The connection id from the greeting.
    pub connection_id: u32,
    /// The label of the session that holds it (`common::wire::session_label`), for the lines
    /// logged about it (empty until the session is registered).
    pub session: Box<str>,
    /// The greeting's scramble and plugin (for the transport's own logins).
    greeting: Option<Greeting>,
    tls: Option<UpstreamTlsLink>,
    /// The timer of a turn's heartbeats, kept from turn to turn, none makes one; due at
    /// `heartbeat_due` or before (a turn that puts the heartbeat off moves only that: once
    /// due, the timer is put off to it).
    pub heartbeat: Pin<Box<Sleep>>,
    /// When the next heartbeat is due, if the upstream stays silent until then.
    pub heartbeat_due: tokio::time::Instant,
    /// The wait for the session's cut, made by its first turn and kept from turn to turn, and
    /// polled again only when woken (one made each turn cost about 500 instructions, and the
    /// token's locks at each poll about 400, callgrind).
    pub cut_wait: Option<RareWait<WaitForCancellationFutureOwned>>,
    /// The thread (shard) whose runtime the socket and the heartbeat's timer are registered
    /// with.
    shard: std::thread::ThreadId,
}

impl RelayLink {
    /// Moves the socket (plain TCP) and the heartbeat's timer to the runtime of the thread
    /// a turn runs on, when it is another shard than the last turn's: the socket's readiness
    /// is then seen on the thread that waits for it, with no wake-up across threads.
    pub fn follow_thread(&mut self) {
        let here = std::thread::current().id();
        if self.shard == here {
            return;
        }
        self.shard = here;
        self.heartbeat = Box::pin(tokio::time::sleep_until(self.heartbeat_due));
        if let MaybeTls::Plain(_) = self.stream {
            let MaybeTls::Plain(tcp) = std::mem::replace(&mut self.stream, MaybeTls::Gone) else {
                return;
            };
            // (On failure the link stays `Gone`: the turn's read fails, and the session ends.)
            if let Ok(tcp) = tcp.into_std().and_then(TcpStream::from_std) {
                self.stream = MaybeTls::Plain(tcp);
            }
        }
    }

    /// The link taken apart to move to another process: its plain TCP socket, the rest, and
    /// its upstream's TLS settings (kept here, for a link put back). A link whose TLS began
    /// (at login) cannot move (its keys live in this process' TLS state) and comes back
    /// whole; one to a TLS upstream that has not logged in yet can.
    pub fn into_state(mut self) -> Result<TakenApart, Box<Self>> {
        if !matches!(self.stream, MaybeTls::Plain(_)) {
            return Err(Box::new(self));
        }
        let MaybeTls::Plain(tcp) = std::mem::replace(&mut self.stream, MaybeTls::Gone) else {
            return Err(Box::new(self));
        };
        // (On failure the link is `Gone`: the caller ends its session.)
        let Ok(tcp) = tcp.into_std() else { return Err(Box::new(self)) };
        let state = LinkState {
            unread: self.rbuf.to_vec(),
            phase: self.phase,
            shape: self.shape,
            pending: self.pending,
            last_seq: self.last_seq,
            connection_id: self.connection_id,
            greeting: self.greeting,
        };
        Ok((tcp, state, self.tls))
    }

    /// A link moved from another process: its socket, its state, and the TLS settings of its
    /// upstream (for a login still to come).
    pub fn from_state(
        tcp: std::net::TcpStream,
        state: LinkState,
        tls: Option<UpstreamTlsLink>,
    ) -> std::io::Result<Self> {
        tcp.set_nonblocking(true)?;
        let mut link = Self::new(MaybeTls::Plain(TcpStream::from_std(tcp)?), tls, state.greeting);
        link.rbuf.extend_from_slice(&state.unread);
        (link.phase, link.shape, link.pending) = (state.phase, state.shape, state.pending);
        (link.last_seq, link.connection_id) = (state.last_seq, state.connection_id);
        Ok(link)
    }

    /// Has `waker` woken once the socket has something to read (the server spoke, or hung
    /// up); true when it has already. (Of a TLS link, the socket under it: what the server
    /// sends between turns is news either way.)
    pub fn wake_when_readable(&self, waker: &Waker) -> bool {
        let tcp = match &self.stream {
            MaybeTls::Plain(tcp) => tcp,
            MaybeTls::Tls(tls) => tls.get_ref().0,
            MaybeTls::Gone => return true,
        };
        tcp.poll_read_ready(&mut Context::from_waker(waker)).is_ready()
    }

    /// Connects to `upstream` and reads its greeting, within `timeout`. Returns the link and the
    /// greeting packet (header included), rewritten for the client leg.
    pub async fn dial(
        upstream: &UpstreamConfig,
        tls: Option<UpstreamTlsLink>,
        leg: ClientLeg,
        timeout: Duration,
    ) -> Result<(Self, Bytes), Error> {
        let unreachable =
            |reason: String| Error::UpstreamUnreachable { name: upstream.name.clone(), reason };
        let dial = async {
            let tcp = TcpStream::connect(&upstream.address).await?;
            tcp.set_nodelay(true)?;
            let mut stream = MaybeTls::Plain(tcp);
            let mut head = [0u8; PacketHead::LEN];
            stream.read_exact(&mut head).await?;
            let len = PacketHead::parse(&head).map_or(0, |h| h.len);
            if len > MAX_GREETING {
                return Err(std::io::Error::other("greeting too long"));
            }
            let mut packet = BytesMut::with_capacity(PacketHead::LEN + len);
            packet.put_slice(&head);
            packet.resize(PacketHead::LEN + len, 0);
            stream.read_exact(&mut packet[PacketHead::LEN..]).await?;
            Ok((stream, packet))
        };
        let (stream, mut packet) = match tokio::time::timeout(timeout, dial).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => return Err(unreachable(e.to_string())),
            Err(_) => {
                return Err(unreachable(format!("no greeting within {}s", timeout.as_secs())));
            }
        };
        let payload = &mut packet[PacketHead::LEN..];
        if payload.first() == Some(&common::mysql::packet::ERR) {
            // The server refuses before any login (too many connections, host blocked): the
            // client sees its error as the greeting, as it would directly.
            let link = Self::new(stream, tls, None);
            return Ok((link, packet.freeze()));
        }
        let greeting =
            Greeting::parse(payload).ok_or_else(|| unreachable("not a MySQL greeting".into()))?;
        greeting_for_client(&greeting, payload, leg);
        Ok((Self::new(stream, tls, Some(greeting)), packet.freeze()))
    }

    fn new(
        stream: UpstreamStream,
        tls: Option<UpstreamTlsLink>,
        greeting: Option<Greeting>,
    ) -> Self {
        Self {
            connection_id: greeting.as_ref().map_or(0, |g| g.connection_id),
            session: Box::default(),
            greeting,
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            phase: Phase::Greeted,
            shape: Shape::default(),
            pending: None,
            last_seq: 0,
            tls,
            // Set by each turn before it waits; until then far off.
            heartbeat: Box::pin(tokio::time::sleep(Duration::from_secs(3600))),
            heartbeat_due: tokio::time::Instant::now() + Duration::from_secs(3600),
            cut_wait: None,
            shard: std::thread::current().id(),
        }
    }

    /// Logs in as `login` itself (a `users` entry, checked by the sidecar) and returns the
    /// server's final packet, OK or ERR, header included.
    pub async fn login_as(&mut self, login: &LoginAs) -> Result<Bytes, LinkError> {
        let greeting = self.greeting.as_ref().ok_or(LinkError::BadLogin("no greeting"))?;
        let response = credentials::handshake_response(login, &greeting.scramble, &greeting.plugin);
        self.send_handshake_response(BytesMut::from(&response[..])).await?;
        self.authenticate(&login.password).await
    }

    /// Switches a logged-in connection to `login` (COM_CHANGE_USER, the transport answering
    /// every auth step); returns the server's final OK or ERR packet.
    pub async fn change_user_as(&mut self, login: &LoginAs) -> Result<Bytes, LinkError> {
        let greeting = self.greeting.as_ref().ok_or(LinkError::BadLogin("no greeting"))?;
        let request = credentials::change_user(login, &greeting.scramble, &greeting.plugin);
        self.write_packet(&request, 0).await?;
        self.authenticate(&login.password).await
    }

    /// Answers the server's auth steps with `password` until its OK or ERR.
    async fn authenticate(&mut self, password: &str) -> Result<Bytes, LinkError> {
        loop {
            let packet = self.read_packet().await?;
            let seq = packet[3];
            let payload = &packet[PacketHead::LEN..];
            let answer = match (payload.first().copied(), payload.get(1).copied()) {
                (Some(packet::OK | packet::ERR), _) => return Ok(packet),
                (Some(packet::AUTH_MORE_DATA), Some(packet::FAST_AUTH_OK)) => continue,
                (Some(packet::AUTH_MORE_DATA), Some(PERFORM_FULL_AUTH)) if self.is_tls() => {
                    [password.as_bytes(), &[0]].concat()
                }
                (Some(packet::EOF), _) => {
                    credentials::switch_answer(payload, password, self.is_tls())
                        .map_err(|refused| LinkError::BadLogin(refused.message()))?
                }
                _ => {
                    return Err(LinkError::BadLogin(
                        "the upstream asks for full authentication, which needs TLS to the upstream",
                    ));
                }
            };
            self.write_packet(&answer, seq.wrapping_add(1)).await?;
        }
    }

    /// Runs one statement whose answer is a single OK or ERR packet (`KILL QUERY`) on a
    /// logged-in link of the transport's own; returns that packet, header included.
    pub async fn run_simple(&mut self, sql: &str) -> Result<Bytes, LinkError> {
        let payload = [&[common::mysql::command::QUERY], sql.as_bytes()].concat();
        self.write_packet(&payload, 0).await?;
        Ok(self.read_packet().await?)
    }

    /// Reads one whole packet (header included) of a login: small, never continued.
    async fn read_packet(&mut self) -> std::io::Result<Bytes> {
        loop {
            if let Some(head) = PacketHead::parse(&self.rbuf)
                && self.rbuf.len() >= PacketHead::LEN + head.len
            {
                return Ok(self.rbuf.split_to(PacketHead::LEN + head.len).freeze());
            }
            if self.rbuf.len() > MAX_GREETING * 4 {
                return Err(std::io::Error::other("login packet too long"));
            }
            if self.stream.read_buf(&mut self.rbuf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    fn is_tls(&self) -> bool {
        matches!(self.stream, MaybeTls::Tls(_))
    }

    /// Sends the client's handshake response (`payload`), over TLS when the upstream leg uses
    /// it. Returns the client's capabilities.
    pub async fn send_handshake_response(
        &mut self,
        mut payload: BytesMut,
    ) -> Result<ClientCaps, LinkError> {
        let caps = response_for_upstream(&mut payload, self.tls.is_some())
            .ok_or(LinkError::BadLogin("not a protocol 4.1 handshake response"))?;
        self.shape = Shape {
            deprecate_eof: caps.flags & common::mysql::capability::DEPRECATE_EOF != 0,
            progress: caps.mariadb & common::mysql::capability::mariadb::PROGRESS != 0,
        };
        let mut seq = 1;
        if let Some(tls) = self.tls.clone() {
            self.write_packet(&payload[..FIXED_LEN], seq).await?;
            seq += 1;
            let MaybeTls::Plain(tcp) = std::mem::replace(&mut self.stream, MaybeTls::Gone) else {
                return Err(LinkError::BadLogin("TLS started twice"));
            };
            let stream = tls.connector.connect(tls.name.clone(), tcp).await?;
            self.stream = MaybeTls::Tls(Box::new(stream));
        }
        self.write_packet(&payload, seq).await?;
        self.phase = Phase::LoggingIn;
        Ok(caps)
    }

    /// Says goodbye (COM_QUIT) and closes, without waiting long for a frozen server. A link
    /// waiting for the client (a file, an auth step) is only closed: a packet then would be
    /// taken as part of what the server waits for.
    pub async fn quit(mut self) {
        if self.pending.is_some() {
            return;
        }
        let quit = async {
            self.write_packet(&[common::mysql::command::QUIT], 0).await?;
            self.stream.shutdown().await
        };
        drop(tokio::time::timeout(Duration::from_secs(1), quit).await);
    }
}

/// Why a relayed request could not be passed upstream.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The client's login packet is not one the relay can pass.
    #[error("{0}")]
    BadLogin(&'static str),
    /// The upstream socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
