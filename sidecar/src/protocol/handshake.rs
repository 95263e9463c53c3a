//! The connection phase: the scramble of the upstream's greeting (HandshakeV10) and the
//! client's HandshakeResponse41.

use bytes::Buf;
use common::mysql::capability as cap;
use common::mysql::greeting::Greeting;
use common::mysql::handshake_response::HandshakeResponse;

use super::auth::Scramble;
use crate::Error;

/// The 20-byte scramble of a HandshakeV10 payload (the upstream's greeting).
pub fn greeting_scramble(g: &[u8]) -> Option<Scramble> {
    let scramble = Greeting::parse(g)?.scramble;
    Some(Scramble(scramble.get(..20)?.try_into().ok()?))
}

/// The capabilities a server greeting (protocol 10) offers.
pub fn greeting_capabilities(g: &[u8]) -> Option<u32> {
    Greeting::parse(g).map(|greeting| greeting.capabilities(g))
}

/// The parts of a HandshakeResponse41 the sidecar uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// Client capabilities (already intersected with the server's by the caller).
    pub capabilities: u32,
    /// MariaDB's extended capabilities (0 when the client is not MariaDB-aware).
    pub mariadb_capabilities: u32,
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

/// Parses a HandshakeResponse41 (or recognises an SSLRequest) with `common::mysql`'s reader.
pub fn parse_client_hello(payload: &[u8]) -> Result<ClientHello, Error> {
    let bad = |what: &'static str| Error::ClientProtocol(what);
    let response = HandshakeResponse::parse(payload).ok_or(bad("handshake response too short"))?;
    if response.capabilities & cap::PROTOCOL_41 == 0 {
        return Err(bad("client does not speak protocol 4.1"));
    }
    if let Some(field) = response.malformed {
        return Err(bad(field.describe()));
    }
    let text = |field: &[u8]| String::from_utf8_lossy(field).into_owned();
    Ok(ClientHello {
        capabilities: response.capabilities,
        mariadb_capabilities: response.mariadb_capabilities(),
        max_packet: response.max_packet,
        collation: response.collation,
        user: response.user.map(text).unwrap_or_default(),
        auth_response: response.auth_response.unwrap_or_default().to_vec(),
        database: response.database.map(text).filter(|d| !d.is_empty()),
        plugin: response.plugin.map(text),
        wants_tls: response.ssl_request,
    })
}

/// A NUL-terminated string (lossy UTF-8), consumed with its NUL.
pub fn take_cstr(p: &mut &[u8]) -> Option<String> {
    let end = p.iter().position(|&b| b == 0)?;
    let s = String::from_utf8_lossy(&p[..end]).into_owned();
    p.advance(end + 1);
    Some(s)
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
    fn finds_the_greetings_scramble() {
        let mut g = vec![10];
        g.extend_from_slice(b"10.11.6-MariaDB\0");
        g.extend_from_slice(&7u32.to_le_bytes());
        g.extend_from_slice(b"abcdefgh\0");
        g.extend_from_slice(&[0xff, 0xf7, 45, 2, 0, 0xff, 0x81, 21]);
        g.extend_from_slice(&[0; 10]);
        g.extend_from_slice(b"ijklmnopqrst\0mysql_native_password\0");
        assert_eq!(greeting_scramble(&g).map(|s| s.0), Some(*b"abcdefghijklmnopqrst"));
        assert!(greeting_scramble(&g[..30]).is_none());
        assert_eq!(greeting_capabilities(&g), Some(0x81ff_f7ff));
    }
}
