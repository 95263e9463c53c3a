//! The login packets the relay touches (sans-IO): the upstream's greeting, passed to the client
//! with only what belongs to one leg changed (TLS, compression, capabilities the tunnel does
//! not honour), and the client's handshake response, passed upstream likewise.

use common::mysql::capability::{self as cap, mariadb};
pub use common::mysql::greeting::Greeting;
use common::mysql::handshake_response::{FIXED_LEN, HandshakeResponse, MARIADB_CAPABILITIES_AT};

/// MariaDB capabilities the relay does not offer: metadata caching changes the shape of an
/// execute's answer, and COM_MULTI is obsolete.
const MARIADB_NOT_RELAYED: u32 = mariadb::CACHE_METADATA | mariadb::COM_MULTI;

/// Rewrites the greeting `p` (parsed as `g`) for the client leg: TLS as the sidecar offers it,
/// zlib compression when the server offers it and the sidecar speaks it (never zstd's), no
/// MariaDB capability the relay does not honour.
pub fn greeting_for_client(g: &Greeting, p: &mut [u8], leg: ClientLeg) {
    let offered = g.capabilities(p);
    let mut caps = offered & !(cap::COMPRESS | cap::SSL | cap::ZSTD_COMPRESSION_ALGORITHM);
    if leg.tls {
        caps |= cap::SSL;
    }
    if leg.compression {
        caps |= offered & cap::COMPRESS;
    }
    g.set_capabilities(p, caps);
    if caps & cap::LONG_PASSWORD == 0 {
        clear_mariadb_caps(&mut p[g.mariadb_capabilities()]);
    }
}

/// What the sidecar's leg to the client offers besides what the server does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientLeg {
    /// The sidecar offers TLS to its client.
    pub tls: bool,
    /// The sidecar speaks the compressed protocol with its client.
    pub compression: bool,
}

/// The client capabilities that shape answers, read from a handshake response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCaps {
    /// Capability flags.
    pub flags: u32,
    /// MariaDB's extended capabilities (0 when the client is not MariaDB-aware).
    pub mariadb: u32,
}

/// Rewrites a client's HandshakeResponse41 for the upstream leg: TLS as the upstream link
/// uses it, no compression. Returns the client's capabilities; `None` if the packet is not a
/// 4.1 handshake response.
pub fn response_for_upstream(p: &mut [u8], upstream_tls: bool) -> Option<ClientCaps> {
    let client = HandshakeResponse::parse(p)?;
    let flags = client.capabilities;
    if flags & cap::PROTOCOL_41 == 0 {
        return None;
    }
    let mut upstream = flags & !(cap::COMPRESS | cap::SSL);
    if upstream_tls {
        upstream |= cap::SSL;
    }
    // Zero (and left as it is) when the client is not MariaDB-aware.
    let mariadb = client.mariadb_capabilities() & !MARIADB_NOT_RELAYED;
    p[..4].copy_from_slice(&upstream.to_le_bytes());
    if flags & cap::LONG_PASSWORD == 0 {
        p[MARIADB_CAPABILITIES_AT..FIXED_LEN].copy_from_slice(&mariadb.to_le_bytes());
    }
    Some(ClientCaps { flags: upstream, mariadb })
}

/// The user name and initial database a HandshakeResponse41 names (for the audit log), as far
/// as they could be read.
pub fn login_names(p: &[u8]) -> (Option<String>, Option<String>) {
    let Some(response) = HandshakeResponse::parse(p) else { return (None, None) };
    let text = |field: &[u8]| String::from_utf8_lossy(field).into_owned();
    (response.user.map(text), response.database.map(text))
}

fn clear_mariadb_caps(field: &mut [u8]) {
    let caps = u32::from_le_bytes([field[0], field[1], field[2], field[3]]) & !MARIADB_NOT_RELAYED;
    field.copy_from_slice(&caps.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MariaDB 10.11 greeting, as captured (connection id 7, mysql_native_password).
    fn mariadb_greeting() -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"5.5.5-10.11.6-MariaDB-0+deb12u1\0");
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh\0");
        p.extend_from_slice(&0xfffeu16.to_le_bytes()); // no LONG_PASSWORD: MariaDB
        p.push(45);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&0x81bfu16.to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 6]);
        p.extend_from_slice(&(0x1d_u32).to_le_bytes());
        p.extend_from_slice(b"ijklmnopqrst\0mysql_native_password\0");
        p
    }

    #[test]
    fn greeting_loses_what_belongs_to_one_leg() {
        let mut p = mariadb_greeting();
        let g = Greeting::parse(&p).unwrap_or_else(|| panic!("greeting"));
        assert_eq!(g.connection_id, 7);
        assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
        assert_eq!(g.plugin, b"mysql_native_password");
        assert_ne!(g.capabilities(&p) & cap::COMPRESS, 0);
        assert_ne!(g.capabilities(&p) & cap::SSL, 0);
        let before = p.clone();
        greeting_for_client(&g, &mut p, ClientLeg::default());
        let caps = g.capabilities(&p);
        assert_eq!(caps & (cap::COMPRESS | cap::SSL), 0);
        assert_eq!(caps | cap::COMPRESS | cap::SSL, g.capabilities(&before));
        assert_eq!(&p[g.mariadb_capabilities()], &0x0d_u32.to_le_bytes());
        greeting_for_client(&g, &mut p, ClientLeg { tls: true, compression: false });
        assert_ne!(g.capabilities(&p) & cap::SSL, 0);
        let changed: Vec<usize> = (0..p.len()).filter(|&i| p[i] != before[i]).collect();
        assert!(
            changed.iter().all(|&i| i < g.mariadb_capabilities().end),
            "only capability bytes change"
        );
    }

    #[test]
    fn refuses_what_is_not_a_greeting() {
        assert!(Greeting::parse(&[0xff, 0x15, 0x04]).is_none());
        assert!(Greeting::parse(b"\x0a5.5\0\x01\x00").is_none());
    }

    #[test]
    fn response_gets_the_upstream_legs_tls() {
        let mut p = vec![0u8; 40];
        let flags = cap::PROTOCOL_41 | cap::SSL | cap::COMPRESS | cap::DEPRECATE_EOF;
        p[..4].copy_from_slice(&flags.to_le_bytes());
        p[28..32].copy_from_slice(&(mariadb::PROGRESS | mariadb::CACHE_METADATA).to_le_bytes());
        let caps = response_for_upstream(&mut p, false).unwrap_or_else(|| panic!("4.1"));
        assert_eq!(caps.flags, cap::PROTOCOL_41 | cap::DEPRECATE_EOF);
        assert_eq!(caps.mariadb, mariadb::PROGRESS);
        assert_eq!(&p[..4], &caps.flags.to_le_bytes());
        let caps = response_for_upstream(&mut p, true).unwrap_or_else(|| panic!("4.1"));
        assert_ne!(caps.flags & cap::SSL, 0);
        assert!(response_for_upstream(&mut [0u8; 8], false).is_none());
        assert!(response_for_upstream(&mut [0u8; 32], false).is_none(), "protocol 3.20");
    }
}
