//! Who a client is: a `users` entry proved with `mysql_native_password`, or (passthrough) the
//! client's own database credentials, which it hands over through `caching_sha2_password` full
//! authentication (clear inside TLS, RSA-encrypted otherwise) or `mysql_clear_password`.

use common::config::Secret;
use common::wire::OpenSession;
use tracing::debug;

use crate::Error;
use crate::config::UserConfig;
use crate::protocol::{
    CACHING_SHA2_PASSWORD, CLEAR_PASSWORD, NATIVE_PASSWORD, PERFORM_FULL_AUTHENTICATION, PacketIo,
    REQUEST_PUBLIC_KEY, Scramble, auth_more_data, auth_switch_request, clear_password,
    native_password_matches,
};
use crate::server::Shared;

/// A proven login.
#[derive(Debug, Clone)]
pub enum Identity {
    /// A `users` entry: its upstream credentials are used.
    Listed(UserConfig),
    /// Any other user: the upstream checks the client's own name and password.
    Passthrough {
        /// Login name.
        user: String,
        /// The password the client handed over (kept only until the session is open).
        password: Secret,
    },
}

impl Identity {
    /// The request that opens this login's upstream session.
    pub fn open_session(
        &self,
        shared: &Shared,
        database: Option<String>,
        client_flags: u32,
        collation: u8,
    ) -> OpenSession {
        let (upstream, user, password) = match self {
            Identity::Listed(entry) => {
                (entry.upstream.as_str(), entry.upstream_user(), entry.upstream_password())
            }
            Identity::Passthrough { user, password } => {
                (shared.config.passthrough_upstream(), user.as_str(), password)
            }
        };
        OpenSession {
            upstream: upstream.to_owned(),
            user: user.to_owned(),
            password: password.expose().to_owned(),
            database,
            client_flags,
            collation,
        }
    }
}

/// The client's answer to the scramble so far: the plugin it used and its response.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// Plugin named by the client (`None`: the client predates pluggable auth).
    pub plugin: Option<&'a str>,
    /// Its auth response.
    pub response: &'a [u8],
}

/// One authentication exchange on a client connection (login or COM_CHANGE_USER).
#[derive(Debug)]
pub struct Authenticator<'a> {
    /// The client.
    pub io: &'a mut PacketIo,
    /// Config and RSA key.
    pub shared: &'a Shared,
    /// Client host, for access-denied messages.
    pub host: &'a str,
    /// The challenge the client answers.
    pub scramble: Scramble,
    /// The client supports AuthSwitchRequest (CLIENT_PLUGIN_AUTH).
    pub can_switch: bool,
}

impl Authenticator<'_> {
    /// Proves `user`: from `first` when it is an answer the sidecar can use, else after an
    /// auth switch to the plugin needed.
    pub async fn run(mut self, user: &str, first: Option<Answer<'_>>) -> Result<Identity, Error> {
        let config = &self.shared.config;
        if let Some(entry) = config.user(user) {
            let response = match first {
                Some(a) if a.plugin.is_none_or(|p| p == NATIVE_PASSWORD) => a.response.to_vec(),
                _ => self.switch(user, NATIVE_PASSWORD).await?,
            };
            if native_password_matches(entry.password.expose(), &self.scramble, &response) {
                return Ok(Identity::Listed(entry.clone()));
            }
            return Err(self.denied(user, !response.is_empty()));
        }
        if !config.passthrough() {
            let sent_password = first.is_some_and(|a| !a.response.is_empty());
            return Err(self.denied(user, sent_password));
        }
        let password = match first {
            Some(a) if a.plugin == Some(CLEAR_PASSWORD) && self.clear_password_allowed() => {
                clear_password(a.response)
            }
            Some(a) if a.plugin == Some(CACHING_SHA2_PASSWORD) => {
                self.caching_sha2(user, a.response).await?
            }
            _ => {
                let response = self.switch(user, CACHING_SHA2_PASSWORD).await?;
                self.caching_sha2(user, &response).await?
            }
        };
        let password = String::from_utf8(password)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Ok(Identity::Passthrough { user: user.to_owned(), password: Secret::new(password) })
    }

    /// `caching_sha2_password` after the client's scramble answer: the sidecar has no cache, so
    /// it asks for full authentication and receives the password.
    async fn caching_sha2(&mut self, user: &str, scrambled: &[u8]) -> Result<Vec<u8>, Error> {
        if scrambled.is_empty() {
            return Ok(Vec::new()); // an empty password: nothing to hand over
        }
        self.io.queue_packet(&auth_more_data(&[PERFORM_FULL_AUTHENTICATION]));
        let mut reply = self.exchange().await?;
        if self.io.is_tls() {
            return Ok(clear_password(&reply));
        }
        let Some(rsa) = self.shared.rsa_key.clone() else {
            return Err(Error::ClientProtocol("passthrough without an RSA key"));
        };
        if reply[..] == [REQUEST_PUBLIC_KEY] {
            debug!("client asked for the RSA public key");
            self.io.queue_packet(&auth_more_data(rsa.public_pem().as_bytes()));
            reply = self.exchange().await?;
        }
        if reply.len() != rsa.ciphertext_len() {
            return Err(Error::CannotPassThrough {
                user: user.to_owned(),
                reason: "the client sent its password neither over TLS nor RSA-encrypted; enable \
                         TLS on the client (client_tls in the sidecar) or let it fetch the public \
                         key (e.g. allowPublicKeyRetrieval=true, --get-server-public-key)"
                    .into(),
            });
        }
        // A private-key operation takes about a millisecond: off the thread serving clients,
        // so a burst of logins does not stall other sessions' commands.
        let (key, scramble) = (rsa.clone(), self.scramble);
        let password = tokio::task::spawn_blocking(move || key.decrypt_password(&reply, &scramble))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
        password.ok_or_else(|| Error::CannotPassThrough {
            user: user.to_owned(),
            reason: format!(
                "the password does not decrypt with the sidecar's RSA key (fingerprint {}); a \
                 client-side key file must hold this sidecar's public key",
                rsa.fingerprint()
            ),
        })
    }

    /// Asks the client to answer the scramble with `plugin`.
    async fn switch(&mut self, user: &str, plugin: &'static str) -> Result<Vec<u8>, Error> {
        if !self.can_switch {
            return Err(Error::CannotPassThrough {
                user: user.to_owned(),
                reason: format!(
                    "this client cannot switch to {plugin}; give it a `users` entry in the \
                     sidecar's config"
                ),
            });
        }
        self.io.queue_packet(&auth_switch_request(plugin, &self.scramble));
        self.exchange().await.map_err(|e| match e {
            Error::ClientProtocol(_) if plugin == CACHING_SHA2_PASSWORD => Error::ClientProtocol(
                "client hung up when asked for caching_sha2_password (it may lack the plugin: \
                 give it a `users` entry in the sidecar's config)",
            ),
            other => other,
        })
    }

    /// Sends what is queued and reads the client's next auth packet.
    async fn exchange(&mut self) -> Result<Vec<u8>, Error> {
        self.io.flush().await?;
        let packet = self.io.read_expected("client hung up during authentication").await?;
        Ok(packet.to_vec())
    }

    /// Clear passwords only when configured, and only over TLS or from this machine.
    fn clear_password_allowed(&self) -> bool {
        let local = self.io.peer().is_some_and(|p| p.ip().is_loopback());
        self.shared.config.auth.clear_password && (self.io.is_tls() || local)
    }

    fn denied(&self, user: &str, using_password: bool) -> Error {
        Error::AccessDenied { user: user.to_owned(), host: self.host.to_owned(), using_password }
    }
}
