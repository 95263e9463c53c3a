//! The sidecar's RSA key pair for `caching_sha2_password`: generated at start or loaded from a
//! PKCS#8 PEM file, its public half handed to clients that ask, its private half used only to
//! decrypt passwords and never printed.

use std::path::Path;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeySize, OAEP_SHA1_MGF1SHA1, OaepPrivateDecryptingKey, PrivateDecryptingKey};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;

use crate::Error;
use crate::protocol::{Scramble, unmask_password};

/// The key pair. `Debug` shows the public key's fingerprint only.
pub struct RsaKey {
    private: OaepPrivateDecryptingKey,
    public_pem: String,
    fingerprint: String,
}

impl std::fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RsaKey").field("fingerprint", &self.fingerprint).finish_non_exhaustive()
    }
}

impl RsaKey {
    /// A fresh 2048-bit key pair.
    pub fn generate() -> Result<Self, Error> {
        let key = PrivateDecryptingKey::generate(KeySize::Rsa2048)
            .map_err(|_| key_error("cannot generate an RSA key pair".into()))?;
        Self::from_private(key)
    }

    /// Loads a PKCS#8 PEM private key (`openssl genpkey -algorithm RSA`).
    pub fn load(path: &Path) -> Result<Self, Error> {
        let shown = path.display();
        let der = PrivateKeyDer::from_pem_file(path)
            .map_err(|e| key_error(format!("cannot read RSA key {shown}: {e}")))?;
        let PrivateKeyDer::Pkcs8(pkcs8) = der else {
            return Err(key_error(format!(
                "RSA key {shown} is not PKCS#8 (`BEGIN PRIVATE KEY`); convert it with `openssl pkcs8 -topk8 -nocrypt -in old.pem -out new.pem`"
            )));
        };
        let key = PrivateDecryptingKey::from_pkcs8(pkcs8.secret_pkcs8_der())
            .map_err(|e| key_error(format!("RSA key {shown} is not usable: {e}")))?;
        Self::from_private(key)
    }

    fn from_private(key: PrivateDecryptingKey) -> Result<Self, Error> {
        let public_der = key
            .public_key()
            .as_der()
            .map_err(|_| key_error("cannot encode the RSA public key".into()))?;
        let public_der = public_der.as_ref();
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, public_der);
        let fingerprint = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let private = OaepPrivateDecryptingKey::new(key)
            .map_err(|_| key_error("the RSA key cannot be used for OAEP".into()))?;
        Ok(Self { private, public_pem: pem("PUBLIC KEY", public_der), fingerprint })
    }

    /// The public key as clients expect it (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo).
    pub fn public_pem(&self) -> &str {
        &self.public_pem
    }

    /// SHA-256 of the public key's DER, hex: safe to log, lets users check a pinned key.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Length of a ciphertext made with this key.
    pub fn ciphertext_len(&self) -> usize {
        self.private.key_size_bytes()
    }

    /// Decrypts a `caching_sha2_password` ciphertext: RSA-OAEP (SHA-1) of the NUL-terminated
    /// password XORed with the scramble. `None` when it does not decrypt.
    pub fn decrypt_password(&self, ciphertext: &[u8], scramble: &Scramble) -> Option<Vec<u8>> {
        let mut plain = vec![0u8; self.private.min_output_size()];
        let masked =
            self.private.decrypt(&OAEP_SHA1_MGF1SHA1, ciphertext, &mut plain, None).ok()?;
        Some(unmask_password(masked, scramble))
    }
}

fn key_error(message: String) -> Error {
    Error::Config(common::Error::ConfigInvalid(message))
}

/// PEM armour around `der`, 64 base64 characters a line.
fn pem(label: &str, der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = Vec::with_capacity(der.len().div_ceil(3) * 4);
    for chunk in der.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            let c =
                if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] } else { b'=' };
            b64.push(c);
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::rsa::{OaepPublicEncryptingKey, PublicEncryptingKey};

    use super::*;

    #[test]
    fn pem_base64_matches_known_vectors() {
        assert!(pem("X", b"foobar").contains("\nZm9vYmFy\n"));
        assert!(pem("X", b"fooba").contains("\nZm9vYmE=\n"));
        assert!(pem("X", b"foob").contains("\nZm9vYg==\n"));
        let long = pem("PUBLIC KEY", &[0u8; 100]);
        assert!(long.lines().all(|l| l.len() <= 64));
        assert!(long.starts_with("-----BEGIN PUBLIC KEY-----\n"));
    }

    /// Encrypts like a client: the public key parsed back from the PEM we hand out.
    #[test]
    fn a_client_encrypted_password_decrypts() {
        let key = RsaKey::generate().expect("key");
        let body: String = key.public_pem().lines().filter(|l| !l.starts_with("-----")).collect();
        let der = decode_base64(&body);
        let public = PublicEncryptingKey::from_der(&der).expect("SubjectPublicKeyInfo");
        let public = OaepPublicEncryptingKey::new(public).expect("oaep");
        let scramble = Scramble(*b"01234567890123456789");
        let masked: Vec<u8> =
            b"s3cret\0".iter().zip(scramble.0.iter().cycle()).map(|(a, b)| a ^ b).collect();
        let mut ciphertext = vec![0u8; public.ciphertext_size()];
        let ciphertext =
            public.encrypt(&OAEP_SHA1_MGF1SHA1, &masked, &mut ciphertext, None).expect("encrypts");
        assert_eq!(ciphertext.len(), key.ciphertext_len());
        assert_eq!(key.decrypt_password(ciphertext, &scramble).as_deref(), Some(&b"s3cret"[..]));
        assert_eq!(key.decrypt_password(&ciphertext[1..], &scramble), None);
        assert!(!format!("{key:?}").contains("PRIVATE"));
    }

    fn decode_base64(s: &str) -> Vec<u8> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let digits: Vec<u8> = s.bytes().filter(|&c| c != b'=').map(value).collect();
        digits
            .chunks(4)
            .flat_map(|q| {
                let n =
                    q.iter().enumerate().fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
                let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
                bytes.into_iter().take(q.len() - 1)
            })
            .collect()
    }
}
