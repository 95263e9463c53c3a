//! A `users` entry's login, checked by the sidecar: the client proves the entry's password
//! with `mysql_native_password` against the scramble it was greeted with (after an auth switch
//! when it answered with another plugin). Every other login is the upstream's to decide.

use crate::Error;
use crate::config::UserConfig;
use crate::protocol::{
    NATIVE_PASSWORD, PacketIo, Scramble, auth_switch_request, native_password_matches,
};

/// The client's answer to the scramble so far: the plugin it used and its response.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// Plugin named by the client (`None`: the client predates pluggable auth).
    pub plugin: Option<&'a str>,
    /// Its auth response.
    pub response: &'a [u8],
}

/// One check of a `users` entry on a client connection (login or COM_CHANGE_USER).
#[derive(Debug)]
pub struct Authenticator<'a> {
    /// The client.
    pub io: &'a mut PacketIo,
    /// Client host, for access-denied messages.
    pub host: &'a str,
    /// The challenge the client answers.
    pub scramble: Scramble,
    /// The client supports AuthSwitchRequest (CLIENT_PLUGIN_AUTH).
    pub can_switch: bool,
}

impl Authenticator<'_> {
    /// Proves `user` against `entry` (`None`: no such entry, refused as a server refuses an
    /// unknown user): from `first` when it is a native-password answer, else after an auth
    /// switch.
    pub async fn check<'e>(
        mut self,
        user: &str,
        entry: Option<&'e UserConfig>,
        first: Option<Answer<'_>>,
    ) -> Result<&'e UserConfig, Error> {
        let response = match first {
            Some(a) if a.plugin.is_none_or(|p| p == NATIVE_PASSWORD) => a.response.to_vec(),
            _ if self.can_switch => self.switch().await?,
            _ => Vec::new(),
        };
        match entry {
            Some(entry)
                if native_password_matches(entry.password.expose(), &self.scramble, &response) =>
            {
                Ok(entry)
            }
            _ => Err(Error::AccessDenied {
                user: user.to_owned(),
                host: self.host.to_owned(),
                using_password: !response.is_empty(),
            }),
        }
    }

    /// Asks the client to answer the scramble with `mysql_native_password`.
    async fn switch(&mut self) -> Result<Vec<u8>, Error> {
        self.io.queue_packet(&auth_switch_request(NATIVE_PASSWORD, &self.scramble));
        self.io.flush().await?;
        let packet = self.io.read_expected("client hung up during authentication").await?;
        Ok(packet.to_vec())
    }
}
