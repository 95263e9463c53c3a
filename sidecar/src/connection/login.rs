//! The login phase: the greeting (one prepared ahead, or the upstream's asked for now), TLS on
//! the client leg if it asks, then the login relayed to the upstream, which decides, or, for a
//! `users` entry, checked here and logged in upstream by the transport.

use bytes::Bytes;
use common::mysql::capability as cap;
use common::mysql::handshake_response::HandshakeResponse;
use common::wire::{LoginAs, OpenRelay, TurnEnd};
use tokio::time::Instant;

use super::answers::{refuse_cleartext_payload, write_login_packets};
use super::users::{Answer, Authenticator};
use super::{ClientInfo, Connection};
use crate::Error;
use crate::greetings::Prepared;
use crate::protocol::{ClientHello, greeting_capabilities, greeting_scramble, parse_client_hello};
use crate::tunnel::RelayStep;

impl Connection {
    /// Greets, then relays the login until the upstream decides. Returns the session id, or
    /// `None` when the upstream refused (its ERR was relayed).
    /// The client's own steps must be done by `deadline`.
    pub(super) async fn log_in(&mut self, deadline: Instant) -> Result<Option<String>, Error> {
        let Some((mut session, greeting)) = self.greet().await? else { return Ok(None) };
        self.opening = Some(session.clone());
        let mut packet = by(deadline, self.io.read_expected("client hung up during login")).await?;
        if HandshakeResponse::parse(&packet).is_some_and(|r| r.ssl_request) {
            let acceptor = self.shared.client_tls.clone().ok_or(Error::TlsUnsupported)?;
            by(deadline, self.io.upgrade_tls(&acceptor)).await?;
            packet = by(deadline, self.io.read_expected("client hung up after TLS")).await?;
        }
        let hello = parse_client_hello(&packet)?;
        // The client answered the greeting's scramble: the greeting is given back only if the
        // answer proves wrong (a `users` entry's check), so no answer that passes is replayable.
        let answered = self.unanswered.take();
        // A client that frames what follows in a way it was not offered (mysql-connector-python
        // sets CLIENT_COMPRESS whatever the greeting says) would wait for good: it is told now.
        let offered = greeting.first().and_then(|g| greeting_capabilities(g)).unwrap_or(0);
        if hello.capabilities & cap::CHANGES_THE_WIRE & !offered != 0 {
            return Err(Error::ClientProtocol(
                "the client asked for protocol compression, which this server did not offer: connect without it",
            ));
        }
        self.user = Some(hello.user.clone());
        self.client = ClientInfo {
            capabilities: hello.capabilities,
            mariadb: hello.mariadb_capabilities,
            collation: hello.collation,
        };
        let config = &self.shared.config;
        if config.user(&hello.user).is_some() || !config.passthrough() {
            let checked = by(deadline, self.check_listed(&hello, greeting.first())).await;
            if let Err(Error::AccessDenied { .. }) = checked {
                self.unanswered = answered;
            }
            let (login, upstream) = checked?;
            self.prepare_next_greeting();
            let opened = self.shared.open_relay().upstream;
            if !opened.is_empty() && upstream != opened {
                // The entry maps to another upstream: its session is opened there.
                self.tunnel.close_session(&session).await;
                let other = OpenRelay { upstream, ..self.shared.open_relay() };
                let (id, _, mut frames) = self.tunnel.open_relay(&other).await?;
                while frames.next().await?.is_some() {}
                session = id;
                self.opening = Some(session.clone());
            }
            let mut frames = self.tunnel.relay(&session, RelayStep::LoginAs(&login)).await?;
            return match write_login_packets(
                &mut self.io,
                &mut frames,
                self.shared.config.auth.cleartext_passwords,
            )
            .await?
            .0
            {
                TurnEnd::Done => Ok(Some(session)),
                _ => Ok(None),
            };
        }
        self.prepare_next_greeting();
        loop {
            let mut frames = self.tunnel.relay(&session, RelayStep::Login(packet.clone())).await?;
            match write_login_packets(
                &mut self.io,
                &mut frames,
                self.shared.config.auth.cleartext_passwords,
            )
            .await?
            .0
            {
                TurnEnd::Done => return Ok(Some(session)),
                TurnEnd::AwaitAuth => {
                    let next = self.io.read_expected("client hung up during authentication");
                    packet = by(deadline, next).await?;
                }
                TurnEnd::Closed | TurnEnd::AwaitFile => return Ok(None),
            }
        }
    }

    /// A login goes upstream on this connection's greeting: the next client's is prepared now
    /// (never for a connection that leaves, or is refused by a `users` entry, before: it gives
    /// its greeting back).
    fn prepare_next_greeting(&self) {
        self.shared.prepare_next_greeting(self.bucket);
    }

    /// Sends the greeting of a new relayed session: one prepared ahead if there is one (then
    /// the login is this connection's only round trip to the transport), else asked for now,
    /// on an idle connection to the transport if there is one (its affinity taken).
    /// It stays [`Connection::unanswered`] until the client answers it. `None` when the
    /// upstream refused at once.
    async fn greet(&mut self) -> Result<Option<(String, Vec<Bytes>)>, Error> {
        let prepared = self.shared.greetings.take_or_wait().await;
        if let Some(mut prepared) = prepared {
            // Its requests go where it was opened (a hashing proxy keeps it on one transport),
            // on the connection it was opened on.
            self.bucket = prepared.bucket;
            self.tunnel = prepared.connection(&self.shared.tunnel);
            for payload in &prepared.greeting {
                refuse_cleartext_payload(payload, self.shared.config.auth.cleartext_passwords)?;
                self.io.queue_packet(payload);
            }
            let greeted = (prepared.session.clone(), prepared.greeting.clone());
            self.unanswered = Some(prepared);
            self.io.flush().await?;
            self.greeted = true;
            return Ok(Some(greeted));
        }
        self.tunnel = self.shared.tunnel.connection_reusing(self.shared.affinity(self.bucket));
        if let Some(bucket) = self.shared.bucket_of(self.tunnel.affinity()) {
            self.bucket = bucket;
        }
        let (session, timeout, mut frames) =
            self.tunnel.open_relay(&self.shared.open_relay()).await?;
        let (end, greeting) = write_login_packets(
            &mut self.io,
            &mut frames,
            self.shared.config.auth.cleartext_passwords,
        )
        .await?;
        self.greeted = true;
        if end != TurnEnd::AwaitAuth || session.is_empty() {
            return Ok(None);
        }
        let affinity = (self.bucket, self.shared.affinity(self.bucket).to_owned());
        let (id, payloads) = (session.clone(), greeting.clone());
        let authorization = self.tunnel.authorization();
        self.unanswered = Some(Prepared::new(id, payloads, affinity, authorization, timeout));
        Ok(Some((session, greeting)))
    }

    /// Checks a `users` entry's password against the greeting's scramble. Returns the upstream
    /// login it maps to and the upstream's name.
    async fn check_listed(
        &mut self,
        hello: &ClientHello,
        greeting: Option<&Bytes>,
    ) -> Result<(LoginAs, String), Error> {
        let no_scramble = crate::error::Broken::Greeting("the upstream's greeting has no scramble");
        let scramble = greeting.and_then(|g| greeting_scramble(g)).ok_or(no_scramble)?;
        let host = self.io.peer().map_or_else(|| "localhost".into(), |p| p.ip().to_string());
        let first = Answer { plugin: hello.plugin.as_deref(), response: &hello.auth_response };
        let entry = self.shared.config.user(&hello.user);
        let authenticator = Authenticator {
            io: &mut self.io,
            host: &host,
            scramble,
            can_switch: hello.capabilities & cap::PLUGIN_AUTH != 0,
        };
        let entry = authenticator.check(&hello.user, entry, Some(first)).await?;
        let login = LoginAs {
            user: entry.upstream_user().to_owned(),
            password: entry.upstream_password().expose().to_owned(),
            database: hello.database.clone(),
            client_flags: self.client.capabilities,
            mariadb_flags: self.client.mariadb,
            collation: self.client.collation,
        };
        Ok((login, entry.upstream.clone()))
    }
}

/// Runs one of the client's login steps, which must be done by `deadline`.
async fn by<T, E: Into<Error>>(
    deadline: Instant,
    step: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, Error> {
    match tokio::time::timeout_at(deadline, step).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(Error::ClientProtocol("login not completed in time")),
    }
}
