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

    /// The index of the token the request carries as `Authorization: Bearer <token>`, if it
    /// is one of ours.
    pub fn authorize(&self, headers: &HeaderMap) -> Option<usize> {
        let presented = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))?;
        // Compare against every token without stopping early, so timing says nothing.
        self.0.iter().enumerate().fold(None, |found, (i, t)| {
            if constant_time_eq(presented.as_bytes(), t.expose().as_bytes()) {
                Some(i)
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
        assert_eq!(tokens.authorize(&headers("Bearer old-token-1")), Some(0));
        assert_eq!(tokens.authorize(&headers("Bearer new-token-2")), Some(1));
        assert_eq!(tokens.authorize(&headers("Bearer new-token-3")), None);
        assert_eq!(tokens.authorize(&headers("bearer new-token-2")), None);
        assert_eq!(tokens.authorize(&headers("new-token-2")), None);
        assert_eq!(tokens.authorize(&HeaderMap::new()), None);
    }
}
