//! The identity a stream holds: its upgrade was authenticated once, and each of its steps runs
//! as that caller while the token still holds. A reload of the identities, a token past its
//! `exp`, or new keys of the issuer make the next step check the token again: a token taken
//! away or expired ends the stream with `401`, and the sidecar opens a new one.

use std::sync::{Arc, Weak};

use super::{Caller, Identities, Origin, Refusal, bearer};

/// A stream's caller and the token its upgrade presented (never logged).
#[derive(Clone)]
pub struct HeldCaller {
    caller: Arc<Caller>,
    token: Box<str>,
    /// The identities that accepted it (weakly: a reload frees them).
    by: Weak<Identities>,
    /// For an OIDC token: until when (Unix seconds) and under which keys it holds.
    oidc: Option<(u64, u64)>,
}

impl std::fmt::Debug for HeldCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldCaller").field("caller", &self.caller.name).finish_non_exhaustive()
    }
}

impl HeldCaller {
    /// The caller `identities` found for `authorization` (an upgrade's).
    pub fn new(
        identities: &Arc<Identities>,
        authorization: Option<&[u8]>,
        caller: Arc<Caller>,
    ) -> Self {
        let token: Box<str> = bearer(authorization).unwrap_or_default().into();
        Self::holding_token(identities, token, caller)
    }

    /// The caller `identities` found for `token`.
    fn holding_token(identities: &Arc<Identities>, token: Box<str>, caller: Arc<Caller>) -> Self {
        let oidc = match caller.origin {
            // A token not remembered is checked again at the first step.
            Origin::Oidc { .. } => Some(identities.oidc_holds(&token).unwrap_or((0, 0))),
            Origin::Token | Origin::Named => None,
        };
        Self { caller, token, by: Arc::downgrade(identities), oidc }
    }

    /// Who the stream was opened by, for people (log lines).
    pub fn name(&self) -> &str {
        &self.caller.name
    }

    /// The held caller, while its token holds under the identities `now` (they are those
    /// that accepted it, and an OIDC token is neither past its `exp` nor verified under keys
    /// since replaced).
    pub fn holding(&self, now: &Arc<Identities>) -> Option<Arc<Caller>> {
        let same = std::ptr::eq(self.by.as_ptr(), Arc::as_ptr(now));
        let holds = self.oidc.is_none_or(|(until, generation)| {
            // The issuer's keys are fetched again when old, as a verification would.
            now.refresh_keys_if_old();
            unix_now() <= until && generation == now.oidc_generation()
        });
        (same && holds).then(|| self.caller.clone())
    }

    /// The caller of the next step under the identities `now`: the held one while its token
    /// holds, else the token checked again (it must still be the same identity's).
    pub async fn current(&mut self, now: &Arc<Identities>) -> Result<Arc<Caller>, Refusal> {
        if let Some(caller) = self.holding(now) {
            return Ok(caller);
        }
        let caller = now.find(&self.token).await?;
        if caller.id != self.caller.id {
            return Err(Refusal::Unknown);
        }
        let token = std::mem::take(&mut self.token);
        *self = Self::holding_token(now, token, caller);
        Ok(self.caller.clone())
    }
}

/// Seconds since the Unix epoch.
fn unix_now() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::config::Secret;
    use futures_util::FutureExt;

    fn identities(tokens: &[&str]) -> Arc<Identities> {
        let tokens: Vec<Secret> = tokens.iter().map(|t| Secret::new(*t)).collect();
        Arc::new(Identities::new(&tokens, &[], None, None).expect("identities"))
    }

    fn now<T>(f: impl std::future::Future<Output = T>) -> T {
        f.now_or_never().expect("no wait for static tokens")
    }

    #[test]
    fn a_held_token_holds_until_a_reload_takes_it_away() {
        let (one, two) = ("token-one-aaaaaaaaaaaaaaaa", "token-two-bbbbbbbbbbbbbbbb");
        let first = identities(&[one, two]);
        let authorization = format!("Bearer {one}");
        let caller = now(first.authorize(Some(authorization.as_bytes()))).expect("a caller");
        let mut held = HeldCaller::new(&first, Some(authorization.as_bytes()), caller.clone());
        assert_eq!(held.holding(&first).expect("held").id, caller.id);
        // A reload that keeps the token: checked again once, then held.
        let kept = identities(&[one]);
        assert!(held.holding(&kept).is_none(), "checked again after a reload");
        assert_eq!(now(held.current(&kept)).expect("still valid").id, caller.id);
        assert!(held.holding(&kept).is_some());
        // A reload that takes it away: refused from the next step on.
        let gone = identities(&[two]);
        assert_eq!(now(held.current(&gone)).expect_err("taken away"), Refusal::Unknown);
        assert!(format!("{held:?}").find(one).is_none(), "the token is never printed");
    }

    #[test]
    fn an_oidc_token_is_held_until_its_exp_and_while_the_keys_stay() {
        let ids = identities(&["token-one-aaaaaaaaaaaaaaaa"]);
        let caller = now(ids.authorize(Some(b"Bearer token-one-aaaaaaaaaaaaaaaa"))).expect("one");
        let held = |oidc| HeldCaller {
            caller: caller.clone(),
            token: "a.jwt.token".into(),
            by: Arc::downgrade(&ids),
            oidc: Some(oidc),
        };
        // Without an issuer the keys' generation is 0.
        let soon = unix_now() + 60;
        assert!(held((soon, 0)).holding(&ids).is_some(), "before its exp, under the same keys");
        assert!(held((unix_now() - 1, 0)).holding(&ids).is_none(), "past its exp (and leeway)");
        assert!(held((soon, 1)).holding(&ids).is_none(), "verified under keys since replaced");
    }
}
