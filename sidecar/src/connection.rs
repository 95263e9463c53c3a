//! One client connection: greeting, login against `users`, opening the upstream session on the
//! transport, then the command loop. Phases are methods of [`ClientConnection`].

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use common::mysql::{capability as cap, command, error_code, status};
use common::wire::{OkInfo, encode_long_data};
use tracing::{debug, info, warn};

use crate::Error;
use crate::change_user::parse_change_user;
use crate::infile::InfileTarget;
use crate::kill;
use crate::login::{Answer, Authenticator};
use crate::protocol::{
    CACHING_SHA2_PASSWORD, Greeting, NATIVE_PASSWORD, PacketIo, Scramble, encode_err, encode_ok,
    encode_result_end, parse_client_hello,
};
use crate::relay::{ClientStyle, relay_answer};
use crate::server::Shared;
use crate::statements::StatementState;
use crate::tunnel::{Riders, TunnelConn};

/// Capabilities the sidecar offers.
pub const SERVER_CAPABILITIES: u32 = cap::LONG_PASSWORD
    | cap::FOUND_ROWS
    | cap::LONG_FLAG
    | cap::CONNECT_WITH_DB
    | cap::ODBC
    | cap::IGNORE_SPACE
    | cap::LOCAL_FILES
    | cap::PROTOCOL_41
    | cap::INTERACTIVE
    | cap::TRANSACTIONS
    | cap::SECURE_CONNECTION
    | cap::MULTI_STATEMENTS
    | cap::MULTI_RESULTS
    | cap::PS_MULTI_RESULTS
    | cap::PLUGIN_AUTH
    | cap::CONNECT_ATTRS
    | cap::PLUGIN_AUTH_LENENC_DATA
    | cap::DEPRECATE_EOF;

/// utf8mb4_general_ci, announced in the greeting.
const GREETING_COLLATION: u8 = 45;

/// Largest packet accepted before login completes (a handshake response is a few hundred bytes).
const MAX_LOGIN_PACKET: usize = 64 * 1024;

/// A logged-in client and its tunnel session.
struct Session {
    id: String,
    collation: u8,
    upstream_connection_id: u32,
    capabilities: u32,
    status: u16,
    /// CLIENT_MULTI_STATEMENTS, as negotiated and then set by COM_SET_OPTION.
    multi_statements: bool,
}

/// A client connection from accept to hang-up.
pub struct ClientConnection {
    io: PacketIo,
    statements: StatementState,
    tunnel: TunnelConn,
    shared: Arc<Shared>,
    connection_id: u32,
    host: String,
    bucket: usize,
}

impl ClientConnection {
    /// Wraps an accepted socket.
    pub fn new(io: PacketIo, shared: Arc<Shared>, connection_id: u32) -> Self {
        let host = io.peer().map_or_else(|| "localhost".into(), |p| p.ip().to_string());
        let bucket = connection_id as usize % crate::server::AFFINITY_BUCKETS;
        let tunnel = shared.tunnel.connection(shared.affinity(bucket));
        Self {
            io,
            statements: StatementState::default(),
            tunnel,
            shared,
            connection_id,
            host,
            bucket,
        }
    }

    /// Serves the connection until the client quits or the connection fails.
    pub async fn run(mut self) {
        let max_packet = self.shared.config.max_packet;
        self.io.set_max_packet(MAX_LOGIN_PACKET);
        let login = tokio::time::timeout(self.shared.config.handshake_timeout, self.login()).await;
        let mut session = match login {
            Ok(Ok(session)) => session,
            Ok(Err(e)) => return self.fail(e).await,
            Err(_) => return self.fail(Error::ClientProtocol("login not completed in time")).await,
        };
        info!(session = %session.id, "client logged in");
        self.io.set_max_packet(max_packet);
        let gone = self.shared.live.register(&session.id, self.bucket);
        self.shared.connection_ids.insert(self.connection_id, session.upstream_connection_id);
        let result = tokio::select! {
            result = self.serve(&mut session) => result,
            // Closing the socket is all a client needs to see its session is lost.
            _ = gone.cancelled() => return,
        };
        self.shared.live.unregister(&session.id);
        self.shared.connection_ids.remove(self.connection_id);
        match result {
            Ok(()) => debug!(session = %session.id, "client quit"),
            Err(e) => {
                warn!(session = %session.id, error = %e, "client connection ended");
                self.send_error(&e).await;
            }
        }
        // The client is done: hang up first, then release the session without making it wait.
        self.io.shutdown().await;
        self.tunnel.close_session(&session.id).await;
    }

    /// Greeting, login check and upstream session.
    async fn login(&mut self) -> Result<Session, Error> {
        let scramble = Scramble::random()?;
        let greeting = Greeting {
            server_version: self.shared.greeting_version().await,
            connection_id: self.connection_id,
            scramble,
            capabilities: SERVER_CAPABILITIES
                | if self.shared.client_tls.is_some() { cap::SSL } else { 0 },
            collation: GREETING_COLLATION,
            status: status::AUTOCOMMIT,
            plugin: if self.shared.config.passthrough() {
                CACHING_SHA2_PASSWORD
            } else {
                NATIVE_PASSWORD
            },
        };
        self.io.queue_packet(&greeting.encode());
        self.io.flush().await?;
        let packet = self.io.read_expected("client hung up during login").await?;
        let mut hello = parse_client_hello(&packet)?;
        if hello.wants_tls {
            let acceptor = self.shared.client_tls.clone().ok_or(Error::TlsUnsupported)?;
            self.io.upgrade_tls(&acceptor).await?;
            let packet = self.io.read_expected("client hung up after TLS").await?;
            hello = parse_client_hello(&packet)?;
        }
        let capabilities = hello.capabilities & SERVER_CAPABILITIES;
        let first = Answer { plugin: hello.plugin.as_deref(), response: &hello.auth_response };
        let identity =
            self.authenticator(scramble, capabilities).run(&hello.user, Some(first)).await?;
        let open = identity.open_session(
            &self.shared,
            hello.database.clone(),
            capabilities,
            hello.collation,
        );
        let opened = self.tunnel.open_session(&open).await?;
        self.shared.remember_version(&open.upstream, &opened.server_version);
        let ok_status = opened.status | status::AUTOCOMMIT;
        self.write_ok(ok_status).await?;
        Ok(Session {
            id: opened.session_id,
            collation: hello.collation,
            upstream_connection_id: opened.connection_id,
            capabilities,
            status: ok_status,
            multi_statements: capabilities & cap::MULTI_STATEMENTS != 0,
        })
    }

    /// The command loop.
    async fn serve(&mut self, session: &mut Session) -> Result<(), Error> {
        let mut status = session.status;
        loop {
            self.io.reset_seq();
            let Some(packet) = self.io.read_packet().await? else { return Ok(()) };
            let Some(&cmd) = packet.first() else {
                return Err(Error::ClientProtocol("empty command packet"));
            };
            match cmd {
                command::QUIT => return Ok(()),
                command::CHANGE_USER => {
                    status = self.change_user(session, &packet[1..], status).await?
                }
                command::QUERY if kill::parse_kill(&packet[1..]).is_some() => {
                    let kill = kill::parse_kill(&packet[1..]);
                    status = self.kill(session, kill, status).await?;
                }
                command::PROCESS_KILL => {
                    let kill = kill::process_kill(&packet[1..]);
                    status = self.kill(session, kill, status).await?;
                }
                command::QUERY
                | command::INIT_DB
                | command::PING
                | command::FIELD_LIST
                | command::RESET_CONNECTION
                | command::STATISTICS
                | command::REFRESH
                | command::SHUTDOWN
                | command::PROCESS_INFO
                | command::STMT_PREPARE
                | command::STMT_EXECUTE => {
                    status = self.forward(session, packet, cmd, status).await?;
                }
                command::STMT_CLOSE => self.statements.close(&packet),
                command::STMT_SEND_LONG_DATA => self.statements.long_data(&packet),
                command::SET_OPTION => {
                    status = self.set_option(session, &packet[1..], status).await?
                }
                command::STMT_RESET => {
                    self.statements.reset(&packet);
                    self.write_ok(status).await?;
                }
                other => {
                    let msg = format!(
                        "Unknown command (0x{other:02x}) is not supported by this sqltunnel sidecar"
                    );
                    self.write_error(
                        error_code::UNKNOWN_COMMAND,
                        error_code::STATE_COMM,
                        msg.as_bytes(),
                    )
                    .await?;
                }
            }
        }
    }

    /// Sends one command over the tunnel and relays the answer.
    async fn forward(
        &mut self,
        session: &Session,
        packet: Bytes,
        cmd: u8,
        status: u16,
    ) -> Result<u16, Error> {
        let style = ClientStyle {
            deprecate_eof: session.capabilities & cap::DEPRECATE_EOF != 0,
            field_list: cmd == command::FIELD_LIST,
            statistics: cmd == command::STATISTICS,
        };
        let closes = self.statements.take_closes();
        let long_data = if cmd == command::STMT_EXECUTE {
            self.statements.take_long_data(&packet)
        } else {
            None
        };
        let body = match &long_data {
            None => packet,
            Some(params) => {
                let mut body = BytesMut::new();
                encode_long_data(&mut body, params.iter().map(|(p, d)| (*p, d.as_slice())));
                body.extend_from_slice(&packet);
                body.freeze()
            }
        };
        let riders = Riders {
            closes: &closes,
            long_data: long_data.is_some(),
            single_statement: cmd == command::QUERY && !session.multi_statements,
        };
        let mut frames = match self.tunnel.command(&session.id, &body, &riders).await {
            Ok(frames) => frames,
            Err(e) => return self.answer_error(e, status).await,
        };
        let infile = InfileTarget {
            tunnel: &self.shared.tunnel,
            affinity: self.shared.affinity(self.bucket),
            session: &session.id,
        };
        relay_answer(&mut self.io, &mut frames, style, status, infile).await
    }

    /// COM_CHANGE_USER: re-authenticates (auth switch with a fresh scramble, then as at login)
    /// and replaces the tunnel session with one for the new login; a refused login keeps the
    /// current session, as a server does.
    async fn change_user(
        &mut self,
        session: &mut Session,
        payload: &[u8],
        status: u16,
    ) -> Result<u16, Error> {
        let request = parse_change_user(payload, session.capabilities)?;
        let scramble = Scramble::random()?;
        let identity =
            match self.authenticator(scramble, session.capabilities).run(&request.user, None).await
            {
                Ok(identity) => identity,
                Err(e) => return self.answer_error(e, status).await,
            };
        let collation = request.collation.unwrap_or(session.collation);
        let open = identity.open_session(
            &self.shared,
            request.database.clone(),
            session.capabilities,
            collation,
        );
        let opened = match self.tunnel.open_session(&open).await {
            Ok(opened) => opened,
            Err(e) => return self.answer_error(e, status).await,
        };
        self.tunnel.close_session(&session.id).await;
        self.shared.live.rename(&session.id, &opened.session_id);
        self.shared.connection_ids.insert(self.connection_id, opened.connection_id);
        self.statements = StatementState::default();
        session.id = opened.session_id;
        session.upstream_connection_id = opened.connection_id;
        session.collation = open.collation;
        let ok_status = opened.status | status::AUTOCOMMIT;
        self.write_ok(ok_status).await?;
        Ok(ok_status)
    }

    /// COM_SET_OPTION: multi-statements on (0) or off (1), enforced on the following queries;
    /// answered with EOF as a server does.
    async fn set_option(
        &mut self,
        session: &mut Session,
        args: &[u8],
        status: u16,
    ) -> Result<u16, Error> {
        match args {
            [0 | 1, 0] => {
                session.multi_statements = args[0] == 0;
                let mut buf = BytesMut::new();
                let deprecate_eof = session.capabilities & cap::DEPRECATE_EOF != 0;
                encode_result_end(&mut buf, status, 0, deprecate_eof);
                self.io.queue_packet(&buf);
                self.io.flush().await?;
            }
            _ => {
                let msg = b"Unknown command";
                self.write_error(error_code::UNKNOWN_COMMAND, error_code::STATE_COMM, msg).await?;
            }
        }
        Ok(status)
    }

    /// Runs a `KILL` with the client's connection id translated to the upstream's.
    async fn kill(
        &mut self,
        session: &Session,
        kill: Option<kill::Kill>,
        status: u16,
    ) -> Result<u16, Error> {
        let Some(kill) = kill else {
            return Err(Error::ClientProtocol("malformed COM_PROCESS_KILL"));
        };
        let Some(upstream_id) = self.shared.connection_ids.upstream(kill.id) else {
            let msg = format!("Unknown thread id: {}", kill.id);
            self.write_error(error_code::UNKNOWN_THREAD, error_code::STATE_GENERAL, msg.as_bytes())
                .await?;
            return Ok(status);
        };
        let mut packet = vec![command::QUERY];
        packet.extend_from_slice(&kill.upstream_sql(upstream_id));
        self.forward(session, Bytes::from(packet), command::QUERY, status).await
    }

    /// An authentication exchange with this client answering `scramble`.
    fn authenticator(&mut self, scramble: Scramble, capabilities: u32) -> Authenticator<'_> {
        Authenticator {
            io: &mut self.io,
            shared: &self.shared,
            host: &self.host,
            scramble,
            can_switch: capabilities & cap::PLUGIN_AUTH != 0,
        }
    }

    /// Sends a plain OK packet with `status`.
    async fn write_ok(&mut self, status: u16) -> Result<(), Error> {
        let mut buf = BytesMut::new();
        encode_ok(&mut buf, &OkInfo { status, ..OkInfo::default() });
        self.io.queue_packet(&buf);
        self.io.flush().await
    }

    async fn write_error(&mut self, code: u16, state: &[u8; 5], msg: &[u8]) -> Result<(), Error> {
        let mut buf = BytesMut::new();
        encode_err(&mut buf, code, state, msg);
        self.io.queue_packet(&buf);
        self.io.flush().await
    }

    /// A command's error: one the connection survives is sent to the client (and the session
    /// goes on with `status`); a fatal one ends the connection.
    async fn answer_error(&mut self, e: Error, status: u16) -> Result<u16, Error> {
        if e.is_fatal() {
            return Err(e);
        }
        let (code, state, msg) = e.to_mysql();
        self.write_error(code, &state, msg.as_bytes()).await?;
        Ok(status)
    }

    /// Sends the client the error that ends its connection, if the socket still works.
    async fn send_error(&mut self, e: &Error) {
        let (code, state, msg) = e.to_mysql();
        if !matches!(e, Error::Io(_)) {
            drop(self.write_error(code, &state, msg.as_bytes()).await);
        }
    }

    async fn fail(mut self, e: Error) {
        match &e {
            Error::AccessDenied { .. } | Error::CannotPassThrough { .. } | Error::Upstream(_) => {
                info!(peer = %self.host, error = %e, "login refused")
            }
            _ => warn!(peer = %self.host, error = %e, "login failed"),
        }
        self.send_error(&e).await;
    }
}
