//! The client's address behind trusted proxies (`trusted_proxies`): a request from one of them
//! is taken to come from the address it forwarded (`X-Forwarded-For`, the rightmost address
//! that is not itself a trusted proxy; else `X-Real-IP`), for the wrong-token slow-down and the
//! logs. A request from anywhere else is from its peer, whatever headers it carries.

use std::net::IpAddr;
use std::str::FromStr;

use http::HeaderMap;
use serde::Deserialize;

use crate::Error;

/// An address block, `10.0.0.0/8`, `::1/128`, or one address (`127.0.0.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl FromStr for Cidr {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        let bad = || {
            let why = format!("{text:?} is not an address or a CIDR block (10.0.0.0/8, ::1/128)");
            Error::Config(common::Error::ConfigInvalid(why))
        };
        let (addr, bits) = match text.split_once('/') {
            Some((addr, bits)) => (addr, Some(bits)),
            None => (text, None),
        };
        let net: IpAddr = addr.trim().parse().map_err(|_| bad())?;
        let width = if net.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            Some(bits) => bits.trim().parse::<u8>().ok().filter(|b| *b <= width).ok_or_else(bad)?,
            None => width,
        };
        Ok(Cidr { net, bits })
    }
}

impl TryFrom<String> for Cidr {
    type Error = Error;

    fn try_from(text: String) -> Result<Self, Error> {
        text.parse()
    }
}

impl Cidr {
    /// True when `ip` is in the block (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.bits)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.bits)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The address a request is from: `peer`, or behind a trusted proxy the one it forwarded.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|block| block.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let forwarded: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse().ok())
        .collect();
    if let Some(client) = forwarded.iter().rev().find(|ip| !is_trusted(**ip)) {
        return *client;
    }
    let real = headers.get("x-real-ip").and_then(|v| v.to_str().ok()?.trim().parse().ok());
    real.or_else(|| forwarded.first().copied()).unwrap_or(peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().expect("a header value"));
        }
        map
    }

    #[test]
    fn blocks_parse_and_contain() {
        let block: Cidr = "10.1.0.0/16".parse().expect("cidr");
        assert!(block.contains(ip("10.1.200.3")) && !block.contains(ip("10.2.0.1")));
        assert!("127.0.0.1".parse::<Cidr>().expect("one").contains(ip("::ffff:127.0.0.1")));
        assert!("::/0".parse::<Cidr>().expect("all v6").contains(ip("2001:db8::1")));
        assert!("0.0.0.0/0".parse::<Cidr>().expect("all v4").contains(ip("8.8.8.8")));
        for bad in ["10.0.0.0/33", "nginx", "10.0.0/8", "::1/129", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_trusted_peer_names_the_client() {
        let trusted = ["127.0.0.1".parse().expect("cidr"), "10.0.0.0/8".parse().expect("cidr")];
        let forwarded = headers(&[("x-forwarded-for", "203.0.113.9, 10.0.0.5")]);
        // nginx on loopback forwarded for a client behind another trusted proxy.
        assert_eq!(client_ip(ip("127.0.0.1"), &forwarded, &trusted), ip("203.0.113.9"));
        // Anyone else's headers are ignored.
        assert_eq!(client_ip(ip("198.51.100.7"), &forwarded, &trusted), ip("198.51.100.7"));
        // A client's own spoofed entry on the left does not win over what nginx appended.
        let spoofed = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9")]);
        assert_eq!(client_ip(ip("127.0.0.1"), &spoofed, &trusted), ip("203.0.113.9"));
        let real = headers(&[("x-real-ip", "203.0.113.10")]);
        assert_eq!(client_ip(ip("127.0.0.1"), &real, &trusted), ip("203.0.113.10"));
        let garbage = headers(&[("x-forwarded-for", "not-an-address")]);
        assert_eq!(client_ip(ip("127.0.0.1"), &garbage, &trusted), ip("127.0.0.1"));
        assert_eq!(client_ip(ip("127.0.0.1"), &forwarded, &[]), ip("127.0.0.1"));
    }
}
