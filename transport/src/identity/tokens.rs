//! Static tokens: the plain `tokens` list (anonymous identities that reach every upstream) and
//! named identities. Only SHA-256 hashes are kept; a presented token is hashed and compared
//! with every entry in constant time.

use std::sync::Arc;

use common::config::Secret;

use super::config::{IdentityConfig, invalid, sha256, to_hex};
use super::{Access, Caller, IdentityId, Origin};
use crate::Error;

/// The identities with a static token.
#[derive(Debug)]
pub struct StaticTokens(Vec<([u8; 32], Arc<Caller>)>);

impl StaticTokens {
    /// The anonymous `tokens` and the named `identities` (their secrets resolved).
    /// Two entries with the same token are refused: which one a request is would be a guess.
    pub fn new(tokens: &[Secret], identities: &[IdentityConfig]) -> Result<Self, Error> {
        let anonymous = tokens.iter().enumerate().map(|(i, token)| {
            let hash = sha256(token.expose().as_bytes());
            let caller = Caller {
                // The hash names the token without being it; two lists with the same token
                // give the same identity, so a reload keeps its sessions.
                id: IdentityId(format!("token:{}", to_hex(&hash[..16])).into()),
                name: format!("token#{}", i + 1).into(),
                label: "token".into(),
                access: Access::All,
                origin: Origin::Token,
            };
            (hash, Arc::new(caller))
        });
        let named = identities.iter().filter_map(|identity| {
            let name: Arc<str> = identity.name.as_str().into();
            let caller = Caller {
                id: IdentityId::named(&name),
                label: name.clone(),
                name,
                access: Access::from_names(&identity.upstreams),
                origin: Origin::Named,
            };
            Some((identity.token_hash()?, Arc::new(caller)))
        });
        let all: Vec<([u8; 32], Arc<Caller>)> = anonymous.chain(named).collect();
        for (i, (hash, caller)) in all.iter().enumerate() {
            if let Some((_, first)) = all[..i].iter().find(|(h, _)| h == hash) {
                return Err(invalid(format!(
                    "{} and {} have the same token",
                    first.name, caller.name
                )));
            }
        }
        Ok(Self(all))
    }

    /// The identity whose token `presented` is.
    pub fn find(&self, presented: &str) -> Option<Arc<Caller>> {
        let hash = sha256(presented.as_bytes());
        // Compare with every entry without stopping early, so timing says nothing.
        self.0.iter().fold(None, |found, (h, caller)| {
            if constant_time_eq(&hash, h) { Some(caller.clone()) } else { found }
        })
    }

    /// The identity `id`, as configured now.
    pub fn by_id(&self, id: &IdentityId) -> Option<&Caller> {
        self.0.iter().map(|(_, c)| &**c).find(|c| c.id == *id)
    }

    /// How many there are.
    pub fn count(&self) -> usize {
        self.0.len()
    }
}

/// Equality whose running time does not depend on where the bytes differ (only on their
/// lengths).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_plain_and_named_tokens_by_hash_only() {
        let alice = IdentityConfig {
            name: "alice".into(),
            token_sha256: Some(to_hex(&sha256(b"alice-token-1"))),
            upstreams: vec!["main".into()],
            ..IdentityConfig::default()
        };
        let tokens = StaticTokens::new(&[Secret::new("old-token-1")], std::slice::from_ref(&alice))
            .expect("ok");
        let plain = tokens.find("old-token-1").expect("the plain token");
        assert_eq!((&*plain.name, plain.access.clone()), ("token#1", Access::All));
        let named = tokens.find("alice-token-1").expect("alice");
        assert_eq!(&*named.name, "alice");
        assert!(named.access.allows("main") && !named.access.allows("reporting"));
        assert!(tokens.find("alice-token-2").is_none());
        assert!(tokens.find("").is_none());
        assert_eq!(tokens.by_id(&named.id).map(|c| &*c.name), Some("alice"));
        // The same token in a new list is the same identity.
        let again = StaticTokens::new(&[Secret::new("x-token-0"), Secret::new("old-token-1")], &[])
            .expect("ok");
        assert_eq!(again.find("old-token-1").map(|c| c.id.clone()), Some(plain.id.clone()));
        let twice = StaticTokens::new(&[Secret::new("alice-token-1")], &[alice]);
        assert!(twice.is_err_and(|e| e.to_string().contains("token#1 and alice")));
    }
}
