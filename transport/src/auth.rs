//! Bearer-token check for every request, in constant time per candidate token.

use std::hash::{DefaultHasher, Hash, Hasher};

use common::config::Secret;
use http::HeaderMap;
use http::header::AUTHORIZATION;

/// Which token a request carried: the same for the same secret across configuration
/// reloads, so sessions stay with their token when others are added or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenId(u64);

impl TokenId {
    fn of(secret: &Secret) -> Self {
        let mut hasher = DefaultHasher::new();
        secret.expose().hash(&mut hasher);
        Self(hasher.finish())
    }
}

/// Accepted tokens.
#[derive(Debug, Clone)]
pub struct Tokens(Vec<(Secret, TokenId)>);

impl Tokens {
    /// Accepts any of `tokens`.
    pub fn new(tokens: Vec<Secret>) -> Self {
        Self(
            tokens
                .into_iter()
                .map(|t| {
                    let id = TokenId::of(&t);
                    (t, id)
                })
                .collect(),
        )
    }

    /// The position (1-based) of the token `id` in the configuration, for the audit log: it
    /// names a token without showing anything of it.
    pub fn position(&self, id: TokenId) -> Option<usize> {
        self.0.iter().position(|(_, t)| *t == id).map(|i| i + 1)
    }

    /// Which of our tokens the request carries as `Authorization: Bearer <token>`, if any.
    pub fn authorize(&self, headers: &HeaderMap) -> Option<TokenId> {
        let presented = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))?;
        // Compare against every token without stopping early, so timing says nothing.
        self.0.iter().fold(None, |found, (t, id)| {
            if constant_time_eq(presented.as_bytes(), t.expose().as_bytes()) {
                Some(*id)
            } else {
                found
            }
        })
    }
}

/// Equality whose running time depends only on the lengths, not on where bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A new token: 32 bytes from the operating system's CSPRNG, as 64 hex digits.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `transport gen-token`: prints [`new_token`].
pub fn print_new_token() -> std::process::ExitCode {
    match new_token() {
        Ok(token) => {
            println!("{token}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("transport gen-token: no randomness from the operating system: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn new_tokens_are_long_hex_and_distinct() {
        let (a, b) = (new_token().expect("a token"), new_token().expect("another"));
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(AUTHORIZATION, v);
        }
        h
    }

    #[test]
    fn accepts_any_configured_token_only() {
        let tokens = Tokens::new(vec![Secret::new("old-token-1"), Secret::new("new-token-2")]);
        let (old, new) =
            (TokenId::of(&Secret::new("old-token-1")), TokenId::of(&Secret::new("new-token-2")));
        assert_ne!(old, new);
        assert_eq!(tokens.authorize(&headers("Bearer old-token-1")), Some(old));
        assert_eq!(tokens.authorize(&headers("Bearer new-token-2")), Some(new));
        assert_eq!(tokens.authorize(&headers("Bearer new-token-3")), None);
        assert_eq!(tokens.authorize(&headers("bearer new-token-2")), None);
        assert_eq!(tokens.authorize(&headers("new-token-2")), None);
        assert_eq!(tokens.authorize(&HeaderMap::new()), None);
    }
}
