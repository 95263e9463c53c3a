//! The connection phase: the server greeting (HandshakeV10) and the client's
//! HandshakeResponse41.

use bytes::{Buf, BufMut, BytesMut};
use common::mysql::capability as cap;

use super::auth::Scramble;
use crate::Error;

/// What the sidecar announces in its greeting.
#[derive(Debug, Clone)]
pub struct Greeting {
    /// Server version string (the upstream's).
    pub server_version: String,
    /// Connection id shown to the client.
    pub connection_id: u32,
    /// Challenge for the password check.
    pub scramble: Scramble,
    /// Capabilities offered.
    pub capabilities: u32,
    /// Default collation id.
    pub collation: u8,
    /// Status flags.
    pub status: u16,
    /// Auth plugin the scramble is meant for.
    pub plugin: &'static str,
}

impl Greeting {
    /// Encodes the HandshakeV10 payload.
    pub fn encode(&self) -> BytesMut {
        let mut p = BytesMut::with_capacity(128);
        p.put_u8(10);
        p.put_slice(self.server_version.as_bytes());
        p.put_u8(0);
        p.put_u32_le(self.connection_id);
        p.put_slice(&self.scramble.0[..8]);
        p.put_u8(0);
        p.put_u16_le(self.capabilities as u16);
        p.put_u8(self.collation);
        p.put_u16_le(self.status);
        p.put_u16_le((self.capabilities >> 16) as u16);
        p.put_u8(21);
        p.put_bytes(0, 10);
        p.put_slice(&self.scramble.0[8..]);
        p.put_u8(0);
        p.put_slice(self.plugin.as_bytes());
        p.put_u8(0);
        p
    }
}

/// The parts of a HandshakeResponse41 the sidecar uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// Client capabilities (already intersected with the server's by the caller).
    pub capabilities: u32,
    /// Largest packet the client accepts.
    pub max_packet: u32,
    /// Requested collation id.
    pub collation: u8,
    /// Login name.
    pub user: String,
    /// Auth plugin response (scrambled password).
    pub auth_response: Vec<u8>,
    /// Initial database, if any.
    pub database: Option<String>,
    /// Auth plugin the client used for `auth_response`.
    pub plugin: Option<String>,
    /// True when this is an SSLRequest (the client wants TLS before sending its login).
    pub wants_tls: bool,
}

/// Parses a HandshakeResponse41 (or recognises an SSLRequest).
pub fn parse_client_hello(payload: &[u8]) -> Result<ClientHello, Error> {
    let bad = |what: &'static str| Error::ClientProtocol(what);
    let mut p = payload;
    if p.remaining() < 32 {
        return Err(bad("handshake response too short"));
    }
    let capabilities = p.get_u32_le();
    if capabilities & cap::PROTOCOL_41 == 0 {
        return Err(bad("client does not speak protocol 4.1"));
    }
    let max_packet = p.get_u32_le();
    let collation = p.get_u8();
    p.advance(23);
    let wants_tls = capabilities & cap::SSL != 0 && p.is_empty();
    let mut hello = ClientHello {
        capabilities,
        max_packet,
        collation,
        user: String::new(),
        auth_response: Vec::new(),
        database: None,
        plugin: None,
        wants_tls,
    };
    if wants_tls {
        return Ok(hello);
    }
    hello.user = take_cstr(&mut p).ok_or(bad("user name not terminated"))?;
    hello.auth_response = if capabilities & cap::PLUGIN_AUTH_LENENC_DATA != 0 {
        let len = take_lenenc(&mut p).ok_or(bad("bad auth data length"))?;
        take_bytes(&mut p, len).ok_or(bad("auth data truncated"))?
    } else if capabilities & cap::SECURE_CONNECTION != 0 {
        let len = if p.has_remaining() { usize::from(p.get_u8()) } else { 0 };
        take_bytes(&mut p, len).ok_or(bad("auth data truncated"))?
    } else {
        take_cstr(&mut p).ok_or(bad("auth data not terminated"))?.into_bytes()
    };
    if capabilities & cap::CONNECT_WITH_DB != 0 && p.has_remaining() {
        hello.database = Some(take_cstr(&mut p).ok_or(bad("database not terminated"))?)
            .filter(|d| !d.is_empty());
    }
    if capabilities & cap::PLUGIN_AUTH != 0 && p.has_remaining() {
        hello.plugin = Some(take_cstr(&mut p).ok_or(bad("plugin name not terminated"))?);
    }
    Ok(hello)
}

/// A NUL-terminated string (lossy UTF-8), consumed with its NUL.
pub fn take_cstr(p: &mut &[u8]) -> Option<String> {
    let end = p.iter().position(|&b| b == 0)?;
    let s = String::from_utf8_lossy(&p[..end]).into_owned();
    p.advance(end + 1);
    Some(s)
}

fn take_bytes(p: &mut &[u8], len: usize) -> Option<Vec<u8>> {
    if p.remaining() < len {
        return None;
    }
    let v = p[..len].to_vec();
    p.advance(len);
    Some(v)
}

fn take_lenenc(p: &mut &[u8]) -> Option<usize> {
    let first = *p.first()?;
    p.advance(1);
    let n = match first {
        0..=250 => u64::from(first),
        0xfc if p.remaining() >= 2 => u64::from(p.get_u16_le()),
        0xfd if p.remaining() >= 3 => p.get_uint_le(3),
        0xfe if p.remaining() >= 8 => p.get_u64_le(),
        _ => return None,
    };
    usize::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello_bytes(caps: u32, tail: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&caps.to_le_bytes());
        v.extend_from_slice(&(16u32 << 20).to_le_bytes());
        v.push(45);
        v.extend_from_slice(&[0; 23]);
        v.extend_from_slice(tail);
        v
    }

    #[test]
    fn parses_a_full_response() {
        let caps = cap::PROTOCOL_41
            | cap::SECURE_CONNECTION
            | cap::PLUGIN_AUTH
            | cap::CONNECT_WITH_DB
            | cap::PLUGIN_AUTH_LENENC_DATA;
        let mut tail = b"app\0".to_vec();
        tail.push(20);
        tail.extend_from_slice(&[1; 20]);
        tail.extend_from_slice(b"shop\0caching_sha2_password\0");
        let h = parse_client_hello(&hello_bytes(caps, &tail)).expect("parses");
        assert_eq!(h.user, "app");
        assert_eq!(h.auth_response, vec![1; 20]);
        assert_eq!(h.database.as_deref(), Some("shop"));
        assert_eq!(h.plugin.as_deref(), Some("caching_sha2_password"));
        assert_eq!(h.collation, 45);
        assert!(!h.wants_tls);
    }

    #[test]
    fn recognises_ssl_request_and_refuses_garbage() {
        let h = parse_client_hello(&hello_bytes(cap::PROTOCOL_41 | cap::SSL, b"")).expect("parses");
        assert!(h.wants_tls);
        assert!(parse_client_hello(b"\x16\x03\x01 random junk").is_err());
        assert!(parse_client_hello(&hello_bytes(0, b"app\0")).is_err());
        let caps = cap::PROTOCOL_41 | cap::PLUGIN_AUTH_LENENC_DATA;
        assert!(parse_client_hello(&hello_bytes(caps, b"app\0\xfc\xff\xff")).is_err());
        assert!(parse_client_hello(&hello_bytes(caps, b"no-terminator")).is_err());
    }

    #[test]
    fn greeting_layout() {
        let g = Greeting {
            server_version: "10.11.6-MariaDB".into(),
            connection_id: 7,
            scramble: Scramble([b'a'; 20]),
            capabilities: cap::PROTOCOL_41 | cap::PLUGIN_AUTH,
            collation: 45,
            status: 2,
            plugin: crate::protocol::NATIVE_PASSWORD,
        };
        let p = g.encode();
        assert_eq!(p[0], 10);
        assert!(p.ends_with(b"mysql_native_password\0"));
        assert_eq!(p.len(), 1 + 16 + 4 + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10 + 13 + 22);
    }
}
