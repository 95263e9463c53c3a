//! The last static token a connection presented, and whose it was: a connection (a kept-alive
//! HTTP one or a stream) sends the same token request after request, and is not hashed again
//! each time. Forgotten when the identities are reloaded.

use std::sync::{Arc, Mutex, Weak};

use super::tokens::constant_time_eq;
use super::{Caller, Identities, Origin};

/// One connection's last accepted static token.
#[derive(Debug, Default)]
pub struct LastCaller(Mutex<Option<Kept>>);

#[derive(Debug)]
struct Kept {
    /// The identities that accepted it (held weakly: a reload frees them, and the address
    /// then never matches another's).
    by: Weak<Identities>,
    token: Box<[u8]>,
    caller: Arc<Caller>,
}

impl LastCaller {
    /// The caller of `presented`, if it is the token last accepted by these `identities`.
    pub fn recall(&self, identities: &Arc<Identities>, presented: &str) -> Option<Arc<Caller>> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let kept = kept.as_ref()?;
        // In constant time: another request on the same connection, through a proxy, may be
        // another person's.
        let same = std::ptr::eq(kept.by.as_ptr(), Arc::as_ptr(identities))
            && constant_time_eq(&kept.token, presented.as_bytes());
        same.then(|| kept.caller.clone())
    }

    /// Remembers `caller` as the identity of `presented`: static tokens only (a JWT expires,
    /// and its own cache knows when).
    pub fn keep(&self, identities: &Arc<Identities>, presented: &str, caller: &Arc<Caller>) {
        if !matches!(caller.origin, Origin::Token | Origin::Named) {
            return;
        }
        let kept = Kept {
            by: Arc::downgrade(identities),
            token: presented.as_bytes().into(),
            caller: caller.clone(),
        };
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::config::Secret;

    fn identities(tokens: &[&str]) -> Arc<Identities> {
        let tokens: Vec<Secret> = tokens.iter().map(|t| Secret::new(*t)).collect();
        Arc::new(Identities::new(&tokens, &[], None, None).expect("identities"))
    }

    #[test]
    fn a_token_is_recalled_only_as_presented_and_by_the_same_identities() {
        let now = identities(&["token-one-aaaaaaaaaaaaaaaa", "token-two-bbbbbbbbbbbbbbbb"]);
        let last = LastCaller::default();
        let caller = now.tokens.find("token-one-aaaaaaaaaaaaaaaa").expect("a caller");
        assert!(last.recall(&now, "token-one-aaaaaaaaaaaaaaaa").is_none(), "nothing kept yet");
        last.keep(&now, "token-one-aaaaaaaaaaaaaaaa", &caller);
        let recalled = last.recall(&now, "token-one-aaaaaaaaaaaaaaaa").expect("recalled");
        assert_eq!(recalled.id, caller.id);
        assert!(last.recall(&now, "token-two-bbbbbbbbbbbbbbbb").is_none(), "another token");
        assert!(last.recall(&now, "token-one-aaaaaaaaaaaaaaab").is_none(), "one byte off");
        assert!(last.recall(&now, "token-one").is_none(), "a prefix");
        // A reload: the same token is checked again against what is configured now.
        let reloaded = identities(&["token-two-bbbbbbbbbbbbbbbb"]);
        assert!(last.recall(&reloaded, "token-one-aaaaaaaaaaaaaaaa").is_none(), "reloaded");
        drop(now);
        assert!(last.recall(&reloaded, "token-one-aaaaaaaaaaaaaaaa").is_none(), "freed");
    }
}
