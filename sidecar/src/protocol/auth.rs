//! Authentication plugins on the server side: `mysql_native_password` (verified against a
//! configured password), and the packets of `caching_sha2_password` full authentication and
//! `mysql_clear_password`, which hand the sidecar the password itself.

use bytes::{BufMut, BytesMut};
use sha1::{Digest, Sha1};

use crate::Error;

/// The plugin the sidecar verifies local logins with.
pub const NATIVE_PASSWORD: &str = "mysql_native_password";
/// MySQL 8's default plugin; its full authentication reveals the password to the server.
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
/// The password in clear (only over TLS or loopback).
pub const CLEAR_PASSWORD: &str = "mysql_clear_password";

/// `caching_sha2_password` status byte: the fast path failed, send the password.
pub const PERFORM_FULL_AUTHENTICATION: u8 = 0x04;
/// `caching_sha2_password` client byte: send me your RSA public key.
pub const REQUEST_PUBLIC_KEY: u8 = 0x02;

/// 20 bytes of challenge, printable and never NUL (clients treat the scramble as a C string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scramble(pub [u8; 20]);

impl Scramble {
    /// A fresh scramble from the OS's CSPRNG.
    pub fn random() -> Result<Self, Error> {
        let mut bytes = [0u8; 20];
        getrandom::fill(&mut bytes).map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
        for b in &mut bytes {
            *b = 33 + *b % 94;
        }
        Ok(Self(bytes))
    }
}

/// True when `response` is what a client knowing `password` answers to `scramble`:
/// `SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password)))`. Constant time in the content.
pub fn native_password_matches(password: &str, scramble: &Scramble, response: &[u8]) -> bool {
    if password.is_empty() {
        return response.is_empty();
    }
    if response.len() != 20 {
        return false;
    }
    let stage1 = Sha1::digest(password.as_bytes());
    let stage2 = Sha1::digest(stage1);
    let mut hasher = Sha1::new();
    hasher.update(scramble.0);
    hasher.update(stage2);
    let mask = hasher.finalize();
    let diff = stage1
        .iter()
        .zip(mask.iter())
        .zip(response)
        .fold(0u8, |acc, ((s, m), r)| acc | (s ^ m ^ r));
    diff == 0
}

/// AuthSwitchRequest asking the client to answer `scramble` with `plugin`.
pub fn auth_switch_request(plugin: &str, scramble: &Scramble) -> BytesMut {
    let mut p = BytesMut::with_capacity(64);
    p.put_u8(0xfe);
    p.put_slice(plugin.as_bytes());
    p.put_u8(0);
    p.put_slice(&scramble.0);
    p.put_u8(0);
    p
}

/// AuthMoreData: plugin-specific bytes during authentication.
pub fn auth_more_data(data: &[u8]) -> BytesMut {
    let mut p = BytesMut::with_capacity(1 + data.len());
    p.put_u8(0x01);
    p.put_slice(data);
    p
}

/// A password sent in clear: the bytes before the terminating NUL.
pub fn clear_password(response: &[u8]) -> Vec<u8> {
    let end = response.iter().position(|&b| b == 0).unwrap_or(response.len());
    response[..end].to_vec()
}

/// Undoes the XOR with the scramble that `caching_sha2_password` applies before RSA encryption.
pub fn unmask_password(masked: &[u8], scramble: &Scramble) -> Vec<u8> {
    let plain: Vec<u8> =
        masked.iter().zip(scramble.0.iter().cycle()).map(|(byte, key)| byte ^ key).collect();
    clear_password(&plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client computes (written independently of the check above).
    fn client_token(password: &str, scramble: &[u8; 20]) -> Vec<u8> {
        let h1 = Sha1::digest(password.as_bytes());
        let h2 = Sha1::digest(h1);
        let h3 = Sha1::digest([scramble.as_slice(), h2.as_slice()].concat());
        h1.iter().zip(h3.iter()).map(|(a, b)| a ^ b).collect()
    }

    #[test]
    fn accepts_the_right_password_only() {
        let s = Scramble::random().expect("rng");
        assert!(native_password_matches("app-pw", &s, &client_token("app-pw", &s.0)));
        assert!(!native_password_matches("app-pw", &s, &client_token("app-pX", &s.0)));
        assert!(!native_password_matches("app-pw", &s, b""));
        assert!(native_password_matches("", &s, b""));
        assert!(!native_password_matches("", &s, &client_token("x", &s.0)));
    }

    #[test]
    fn masked_passwords_unmask() {
        let s = Scramble(*b"abcdefghijklmnopqrst");
        let secret = b"a password longer than the twenty byte scramble\0";
        let masked: Vec<u8> = secret.iter().enumerate().map(|(i, b)| b ^ s.0[i % 20]).collect();
        assert_eq!(unmask_password(&masked, &s), &secret[..secret.len() - 1]);
        assert_eq!(clear_password(b"pw\0"), b"pw");
        assert_eq!(clear_password(b"pw"), b"pw");
    }

    #[test]
    fn scrambles_are_printable_and_fresh() {
        let a = Scramble::random().expect("rng");
        let b = Scramble::random().expect("rng");
        assert_ne!(a, b);
        assert!(a.0.iter().all(|&c| (33..127).contains(&c)));
    }
}
