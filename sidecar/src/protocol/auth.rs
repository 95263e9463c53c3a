//! `mysql_native_password` on the server side, for `users` entries: fresh scrambles, the
//! check of a client's answer against a configured password, and the auth switch request.

use bytes::{BufMut, BytesMut};
use sha1::{Digest, Sha1};

use crate::Error;

/// The plugin the sidecar verifies local logins with.
pub const NATIVE_PASSWORD: &str = "mysql_native_password";

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
    fn scrambles_are_printable_and_fresh() {
        let a = Scramble::random().expect("rng");
        let b = Scramble::random().expect("rng");
        assert_ne!(a, b);
        assert!(a.0.iter().all(|&c| (33..127).contains(&c)));
    }
}
