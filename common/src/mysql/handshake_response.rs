//! HandshakeResponse41 as a client sends it (sans-IO): the one reader of its fields, for the
//! sidecar's login checks and the transport's relay and audit log. The fields are borrowed
//! from the payload; reading stops at the first malformed one, and says which it was.

use super::capability as cap;
use super::packets::lenenc_int;

/// Length of the fixed part of a HandshakeResponse41 (also the whole SSLRequest).
pub const FIXED_LEN: usize = 32;
/// Offset of MariaDB's extended capabilities in the fixed part (the end of its filler).
pub const MARIADB_CAPABILITIES_AT: usize = 28;

/// The fields of a HandshakeResponse41 (or of an SSLRequest, which is its fixed part alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeResponse<'a> {
    /// Capability flags, as the client sent them.
    pub capabilities: u32,
    /// Largest packet the client accepts.
    pub max_packet: u32,
    /// Requested collation id.
    pub collation: u8,
    /// The last four bytes of the filler, whatever the capabilities say they mean.
    pub filler_tail: u32,
    /// True for an SSLRequest: the client asks for TLS before it sends its login.
    pub ssl_request: bool,
    /// Login name (`None` in an SSLRequest, or when it is not terminated).
    pub user: Option<&'a [u8]>,
    /// Auth plugin response (`None` in an SSLRequest, or when it or a field before is malformed).
    pub auth_response: Option<&'a [u8]>,
    /// Initial database, possibly empty, when the client sent one.
    pub database: Option<&'a [u8]>,
    /// Auth plugin the client used for its auth response, when it named one.
    pub plugin: Option<&'a [u8]>,
    /// The first field that could not be read; the fields after it are `None`.
    pub malformed: Option<BadField>,
}

/// The field at which reading a handshake response stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadField {
    /// The user name has no terminating NUL.
    UserNotTerminated,
    /// The length-encoded length of the auth response is not one.
    AuthLength,
    /// The auth response is shorter than its length says.
    AuthTruncated,
    /// The NUL-terminated auth response (before CLIENT_SECURE_CONNECTION) has no NUL.
    AuthNotTerminated,
    /// The database name has no terminating NUL.
    DatabaseNotTerminated,
    /// The plugin name has no terminating NUL.
    PluginNotTerminated,
}

impl BadField {
    /// What is wrong, in a few words (for the error a client is told).
    pub fn describe(self) -> &'static str {
        match self {
            BadField::UserNotTerminated => "user name not terminated",
            BadField::AuthLength => "bad auth data length",
            BadField::AuthTruncated => "auth data truncated",
            BadField::AuthNotTerminated => "auth data not terminated",
            BadField::DatabaseNotTerminated => "database not terminated",
            BadField::PluginNotTerminated => "plugin name not terminated",
        }
    }
}

impl<'a> HandshakeResponse<'a> {
    /// Reads a handshake response; `None` only when it is shorter than its fixed part. The
    /// capabilities are not checked: a caller that needs protocol 4.1 looks for it.
    pub fn parse(payload: &'a [u8]) -> Option<Self> {
        let (fixed, mut rest) = payload.split_first_chunk::<FIXED_LEN>()?;
        let u32_at = |at: usize| {
            u32::from_le_bytes([fixed[at], fixed[at + 1], fixed[at + 2], fixed[at + 3]])
        };
        let mut response = Self {
            capabilities: u32_at(0),
            max_packet: u32_at(4),
            collation: fixed[8],
            filler_tail: u32_at(MARIADB_CAPABILITIES_AT),
            ssl_request: u32_at(0) & cap::SSL != 0 && rest.is_empty(),
            user: None,
            auth_response: None,
            database: None,
            plugin: None,
            malformed: None,
        };
        if !response.ssl_request {
            response.malformed = response.read_fields(&mut rest).err();
        }
        Some(response)
    }

    /// MariaDB's extended capabilities: the filler's tail when the client clears
    /// CLIENT_LONG_PASSWORD (MariaDB's "not MySQL"), else 0.
    pub fn mariadb_capabilities(&self) -> u32 {
        if self.capabilities & cap::LONG_PASSWORD == 0 { self.filler_tail } else { 0 }
    }

    fn read_fields(&mut self, rest: &mut &'a [u8]) -> Result<(), BadField> {
        let caps = self.capabilities;
        self.user = Some(take_cstr(rest).ok_or(BadField::UserNotTerminated)?);
        self.auth_response = Some(if caps & cap::PLUGIN_AUTH_LENENC_DATA != 0 {
            let (len, width) = lenenc_int(rest).ok_or(BadField::AuthLength)?;
            let len = usize::try_from(len).map_err(|_| BadField::AuthLength)?;
            *rest = &rest[width..];
            take_bytes(rest, len).ok_or(BadField::AuthTruncated)?
        } else if caps & cap::SECURE_CONNECTION != 0 {
            let len = rest.first().map_or(0, |&n| usize::from(n));
            *rest = rest.get(1..).unwrap_or_default();
            take_bytes(rest, len).ok_or(BadField::AuthTruncated)?
        } else {
            take_cstr(rest).ok_or(BadField::AuthNotTerminated)?
        });
        if caps & cap::CONNECT_WITH_DB != 0 && !rest.is_empty() {
            self.database = Some(take_cstr(rest).ok_or(BadField::DatabaseNotTerminated)?);
        }
        if caps & cap::PLUGIN_AUTH != 0 && !rest.is_empty() {
            self.plugin = Some(take_cstr(rest).ok_or(BadField::PluginNotTerminated)?);
        }
        Ok(())
    }
}

/// A NUL-terminated field, consumed with its NUL.
fn take_cstr<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let end = rest.iter().position(|&b| b == 0)?;
    let field = &rest[..end];
    *rest = &rest[end + 1..];
    Some(field)
}

/// `len` bytes, consumed.
fn take_bytes<'a>(rest: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    let field = rest.get(..len)?;
    *rest = &rest[len..];
    Some(field)
}

#[cfg(test)]
#[path = "handshake_response_tests.rs"]
mod tests;
