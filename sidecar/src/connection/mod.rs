//! One client connection, relayed: greeted with the upstream's own greeting, logged in by the
//! upstream (or, for a `users` entry, checked here and logged in by the transport), then every
//! command passed on as the client's packets and every answer written back as the upstream's.
//! One value moving through its phases: [`Connection::run`] → `open` → `log_in` (login.rs),
//! then `relay` → `serve` (commands.rs); `answers.rs` writes what the transport sends back.

mod answers;
mod commands;
mod file_request;
mod login;
mod users;

pub use commands::CUT_WAIT;
pub(crate) use commands::Served;

use std::sync::Arc;

use bytes::BytesMut;
use common::wire::{SessionEnd, session_label};
use tracing::{Instrument, debug, info, warn};

use crate::Error;
use crate::greetings::Prepared;
use crate::protocol::PacketIo;
use crate::shared::Shared;
use crate::tunnel::TunnelConn;
use common::mysql::{encode_err, encode_err_before_greeting};

/// Largest packet accepted before login completes.
const MAX_LOGIN_PACKET: usize = 64 * 1024;

/// What the client said of itself at login: capabilities, MariaDB's extended ones, collation.
#[derive(Debug, Clone, Copy, Default)]
struct ClientInfo {
    capabilities: u32,
    mariadb: u32,
    collation: u8,
}

/// A client connection from accept to hang-up.
pub struct Connection {
    io: PacketIo,
    tunnel: TunnelConn,
    shared: Arc<Shared>,
    bucket: usize,
    client: ClientInfo,
    /// The session being logged in, closed if the login does not complete.
    opening: Option<String>,
    /// Its greeting, until the client answers it (or once a `users` entry's check proved the
    /// answer wrong): given back for the next client if the login ends there (`greetings.rs`).
    unanswered: Option<Prepared>,
    /// The client has been sent a greeting.
    greeted: bool,
    /// The user name the client logs in with, once it said (for logs; never a password).
    user: Option<String>,
}

impl Connection {
    /// Wraps an accepted socket; its requests carry the affinity key of `bucket`.
    pub fn new(io: PacketIo, shared: Arc<Shared>, bucket: usize) -> Self {
        let tunnel = shared.tunnel.connection(shared.affinity(bucket));
        let client = ClientInfo::default();
        let (opening, unanswered) = (None, None);
        Self { io, tunnel, shared, bucket, client, opening, unanswered, greeted: false, user: None }
    }

    /// Serves the connection until the client or the upstream hangs up. Its login runs in
    /// `span` (the client's number and address, for the lines about a refused login); its
    /// commands only when debug lines are on: the lines at info and above about them name the
    /// session in their own fields, and entering and leaving the span at each poll cost about
    /// 570 instructions per command (callgrind), at the default level.
    pub async fn run(mut self, span: tracing::Span) {
        let Some(session) = self.open().instrument(span.clone()).await else { return };
        if tracing::enabled!(tracing::Level::DEBUG) {
            self.relay(session).instrument(span).await;
        } else {
            self.relay(session).await;
        }
    }

    /// Greets the client and logs it in: its session, or none once the login failed (and the
    /// client was told).
    async fn open(&mut self) -> Option<String> {
        let max_packet = self.shared.config.max_packet;
        self.io.set_max_packet(MAX_LOGIN_PACKET);
        // The handshake timeout bounds the client's steps; the transport's are bounded by its
        // silence limit, so a frozen transport is named as such, not blamed on the client.
        let deadline = tokio::time::Instant::now() + self.shared.config.handshake_timeout;
        let cut = self.shared.cut.clone();
        let login = tokio::select! {
            login = self.log_in(deadline) => login,
            () = cut.cancelled() => Err(Error::ShuttingDown),
        };
        if !matches!(login, Ok(Some(_))) {
            if let Some(greeting) = self.unanswered.take() {
                self.opening = None;
                self.leave_greeting(greeting).await;
            }
            if let Some(session) = self.opening.take() {
                self.tunnel.close_session(&session).await;
            }
        }
        let session = match login {
            Ok(Some(session)) => session,
            Ok(None) => {
                let user = self.user.as_deref().unwrap_or("");
                info!(user, "login refused by the upstream");
                self.io.shutdown().await;
                return None;
            }
            Err(e) => {
                self.fail(&e).await;
                return None;
            }
        };
        info!(session = %session_label(&session), "client logged in");
        if self.client.capabilities & common::mysql::capability::COMPRESS != 0 {
            // Offered (the login checked it) and asked for: from here on, both ways.
            self.io.start_compression();
        }
        self.io.set_max_packet(max_packet);
        Some(session)
    }

    /// Gives the greeting of a client that left before answering it, or whose answer a `users`
    /// entry refused, back for the next client (the upstream saw nothing of it, and no answer
    /// to it passed), or closes it when stale or shutting down.
    async fn leave_greeting(&mut self, greeting: Prepared) {
        let stale = if self.shared.draining.is_cancelled() {
            Some(greeting)
        } else {
            self.shared.greetings.give_back(greeting, &self.shared.tunnel)
        };
        if let Some(stale) = stale {
            self.tunnel.close_session(&stale.session).await;
        }
    }

    /// Relays the commands of the logged-in `session` until either side hangs up.
    async fn relay(mut self, session: String) {
        let gone = self.shared.live.register(&session, self.bucket, self.tunnel.authorization());
        let result = self.serve(&session, &gone).await;
        self.shared.live.unregister(&session);
        match result {
            // Closing the socket is all a client needs to see its session is lost.
            Ok(Served::Gone) if gone.was_reset() => return self.io.reset(),
            Ok(Served::Gone) => return self.io.shutdown().await,
            Ok(Served::Quit) => debug!(session = %session_label(&session), "client quit"),
            Ok(Served::HungUp) => {
                debug!(session = %session_label(&session), "client hung up without COM_QUIT");
                // The server sees an aborted client, as it would directly.
                self.io.shutdown().await;
                return self.tunnel.end_session(&session, SessionEnd::HangUp).await;
            }
            Err(e) => {
                warn!(session = %session_label(&session), error = %e, "client connection ended");
                self.shared.metrics.error(e.kind_label());
                self.send_error(&e).await;
                if matches!(e, Error::FileRequestRefused { .. }) {
                    // The server waits for a file: a COM_QUIT would be read as its contents.
                    // Dropped instead, as by a client that hung up.
                    self.io.shutdown().await;
                    return self.tunnel.end_session(&session, SessionEnd::HangUp).await;
                }
            }
        }
        // Hang up first, then release the session without making the client wait.
        self.io.shutdown().await;
        self.tunnel.close_session(&session).await;
    }

    /// Sends an error the connection survives.
    async fn write_error(&mut self, e: &Error) -> Result<(), Error> {
        let (code, state, msg) = e.to_mysql();
        let mut buf = BytesMut::new();
        encode_err(&mut buf, code, &state, msg.as_bytes());
        self.io.queue_packet(&buf);
        self.io.flush().await
    }

    /// Sends the client the error that ends its connection, if the socket still works and
    /// the error would not land inside a relayed packet (one a broken answer left
    /// half-queued is taken back first).
    async fn send_error(&mut self, e: &Error) {
        if !matches!(e, Error::Io(_)) && self.io.take_back_partial() {
            drop(self.write_error(e).await);
        }
    }

    /// Refuses a client before any greeting: the error takes the greeting's place.
    pub async fn refuse(io: &mut PacketIo, e: &Error) {
        let (code, _, msg) = e.to_mysql();
        let mut buf = BytesMut::new();
        encode_err_before_greeting(&mut buf, code, msg.as_bytes());
        io.queue_packet(&buf);
        drop(io.flush().await);
        io.shutdown().await;
    }

    async fn fail(&mut self, e: &Error) {
        match e {
            Error::AccessDenied { .. } => info!(error = %e, "login refused"),
            _ => warn!(error = %e, "login failed"),
        }
        if self.greeted {
            self.send_error(e).await;
            self.io.shutdown().await;
        } else {
            // No greeting went out: the error takes its place, as a server's refusal does.
            Self::refuse(&mut self.io, e).await;
        }
    }
}
