//! The server's greeting (HandshakeV10), sans-IO: the one parser of it on both sides (the
//! transport rewrites its capabilities for the client leg; the sidecar reads the scramble
//! and what was offered; `sidecar check` names the version).

use std::ops::Range;

/// Where the fields of a greeting lie, and the ones read from it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Greeting {
    /// Offset of the lower two capability bytes.
    caps_low: usize,
    /// Offset of the upper two capability bytes.
    caps_high: usize,
    /// Offset of MariaDB's extended capabilities (four bytes).
    caps_mariadb: usize,
    /// The server version, as sent (MariaDB's starts with `5.5.5-` for old clients).
    pub version: String,
    /// The connection id.
    pub connection_id: u32,
    /// The scramble (both parts, without the trailing NUL).
    pub scramble: Vec<u8>,
    /// The auth plugin the server named.
    pub plugin: Vec<u8>,
}

impl Greeting {
    /// Finds the fields of a HandshakeV10 payload; `None` if it is not one.
    pub fn parse(p: &[u8]) -> Option<Self> {
        if *p.first()? != 10 {
            return None;
        }
        let version_end = 1 + p[1..].iter().position(|&b| b == 0)?;
        let id_at = version_end + 1;
        let id = p.get(id_at..id_at + 4)?;
        let caps_low = id_at + 4 + 8 + 1;
        let caps_high = caps_low + 2 + 1 + 2;
        let caps_mariadb = caps_high + 2 + 1 + 6;
        let part1 = p.get(id_at + 4..id_at + 12)?;
        let auth_len = usize::from(*p.get(caps_high + 2)?);
        let part2_at = caps_mariadb + 4;
        let part2_len = auth_len.saturating_sub(8).max(13);
        let part2 = p.get(part2_at..part2_at + part2_len)?;
        let part2 = part2.strip_suffix(&[0]).unwrap_or(part2);
        let rest = &p[part2_at + part2_len..];
        let plugin = rest.split(|&b| b == 0).next().unwrap_or_default();
        Some(Self {
            caps_low,
            caps_high,
            caps_mariadb,
            version: String::from_utf8_lossy(&p[1..version_end]).into_owned(),
            connection_id: u32::from_le_bytes([id[0], id[1], id[2], id[3]]),
            scramble: [part1, part2].concat(),
            plugin: plugin.to_vec(),
        })
    }

    /// The capability flags in `p` (the payload it was parsed from).
    pub fn capabilities(&self, p: &[u8]) -> u32 {
        let low = u16::from_le_bytes([p[self.caps_low], p[self.caps_low + 1]]);
        let high = u16::from_le_bytes([p[self.caps_high], p[self.caps_high + 1]]);
        u32::from(high) << 16 | u32::from(low)
    }

    /// Writes `caps` as the capability flags of `p`.
    pub fn set_capabilities(&self, p: &mut [u8], caps: u32) {
        p[self.caps_low..self.caps_low + 2].copy_from_slice(&(caps as u16).to_le_bytes());
        p[self.caps_high..self.caps_high + 2].copy_from_slice(&((caps >> 16) as u16).to_le_bytes());
    }

    /// Where MariaDB's extended capabilities lie in the payload.
    pub fn mariadb_capabilities(&self) -> Range<usize> {
        self.caps_mariadb..self.caps_mariadb + 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MySQL 8 greeting (connection id 9, caching_sha2_password), byte by byte.
    fn mysql_greeting() -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"8.0.36\0");
        p.extend_from_slice(&9u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh\0");
        p.extend_from_slice(&0xffffu16.to_le_bytes());
        p.push(255);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&0xdfffu16.to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(b"ijklmnopqrst\0caching_sha2_password\0");
        p
    }

    #[test]
    fn every_field_is_found_whatever_is_cut() {
        let p = mysql_greeting();
        let g = Greeting::parse(&p).unwrap_or_else(|| panic!("a greeting"));
        assert_eq!(g.version, "8.0.36");
        assert_eq!(g.connection_id, 9);
        assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
        assert_eq!(g.plugin, b"caching_sha2_password");
        assert_eq!(g.capabilities(&p), 0xdfff_ffff);
        let mut q = p.clone();
        g.set_capabilities(&mut q, 0x0000_0200);
        assert_eq!(g.capabilities(&q), 0x0000_0200);
        for cut in 0..40 {
            assert!(Greeting::parse(&p[..cut]).is_none(), "cut at {cut}");
        }
    }
}
