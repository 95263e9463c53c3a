//! Bearer-token check for every request, in constant time per candidate token.

use common::config::Secret;
use http::HeaderMap;
use http::header::AUTHORIZATION;

/// Accepted tokens.
#[derive(Debug, Clone)]
pub struct Tokens(Vec<Secret>);

impl Tokens {
    /// Accepts any of `tokens`.
    pub fn new(tokens: Vec<Secret>) -> Self {
        Self(tokens)
    }

    /// True when the request carries `Authorization: Bearer <one of the tokens>`.
    pub fn authorize(&self, headers: &HeaderMap) -> bool {
        let Some(presented) = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        // Compare against every token without stopping early, so timing says nothing.
        self.0.iter().fold(false, |found, t| {
            constant_time_eq(presented.as_bytes(), t.expose().as_bytes()) | found
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

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

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
        assert!(tokens.authorize(&headers("Bearer old-token-1")));
        assert!(tokens.authorize(&headers("Bearer new-token-2")));
        assert!(!tokens.authorize(&headers("Bearer new-token-3")));
        assert!(!tokens.authorize(&headers("bearer new-token-2")));
        assert!(!tokens.authorize(&headers("new-token-2")));
        assert!(!tokens.authorize(&HeaderMap::new()));
    }
}
