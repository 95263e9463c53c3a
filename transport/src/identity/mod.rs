//! Who a request comes from: a bearer token is matched to an identity (a plain token of
//! `tokens`, a named identity, or a JWT of the OpenID Connect issuer), which says who the
//! caller is and which upstreams it may reach. Sessions belong to identities, not to tokens'
//! bytes, so a refreshed token of the same person goes on using its sessions.

pub mod config;
mod held;
mod jwks;
mod oidc;
#[cfg(test)]
mod oidc_tests;
mod refusal;
mod remembered;
pub mod strength;
mod tokens;
pub mod tools;

use std::sync::Arc;

use common::config::Secret;

use crate::Error;

pub use self::config::{ALL_UPSTREAMS, IdentityConfig, OidcConfig};
pub use self::held::HeldCaller;
pub use self::refusal::Refusal;
pub use self::remembered::LastCaller;

/// Which identity a request is: equal for every token of the same person, and stable across
/// configuration reloads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct IdentityId(Arc<str>);

impl IdentityId {
    /// The id of the named identity `name` (an `identities` entry).
    pub fn named(name: &str) -> Self {
        Self(format!("name:{name}").into())
    }
}

/// The upstreams an identity may reach.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Access {
    /// Every configured upstream.
    All,
    /// These only.
    Only(Arc<[String]>),
}

impl Access {
    /// The access a list of upstream names grants (`"*"`: all).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a String>) -> Self {
        let mut list: Vec<String> = Vec::new();
        for name in names {
            if name == ALL_UPSTREAMS {
                return Access::All;
            }
            if !list.contains(name) {
                list.push(name.clone());
            }
        }
        Access::Only(list.into())
    }

    /// True when `upstream` may be reached.
    pub fn allows(&self, upstream: &str) -> bool {
        match self {
            Access::All => true,
            Access::Only(list) => list.iter().any(|u| u == upstream),
        }
    }
}

/// Where an identity comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Origin {
    /// A plain token of `tokens`: anonymous, every upstream.
    Token,
    /// An entry of `identities`.
    Named,
    /// A JWT of the OpenID Connect issuer, with the groups it named.
    Oidc {
        /// The issuer.
        issuer: Arc<str>,
        /// The person's groups, as the token listed them.
        groups: Arc<[String]>,
    },
}

/// Who a request comes from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Caller {
    /// Which identity.
    pub id: IdentityId,
    /// Its name for people: the audit log and log lines.
    pub name: Arc<str>,
    /// Its name for metrics, of bounded cardinality: names configured by name, otherwise the
    /// issuer or `token`.
    pub label: Arc<str>,
    /// What it may reach.
    pub access: Access,
    /// Where it comes from.
    pub origin: Origin,
}

/// Every identity the transport accepts now; replaced whole by a reload.
#[derive(Debug)]
pub struct Identities {
    tokens: tokens::StaticTokens,
    oidc: Option<oidc::Oidc>,
}

impl Identities {
    /// The identities a configuration names (its secrets resolved): plain `tokens`,
    /// `identities` and the `oidc` issuer.
    pub fn new(
        tokens: &[Secret],
        identities: &[IdentityConfig],
        oidc: Option<&OidcConfig>,
        previous: Option<&Identities>,
    ) -> Result<Self, Error> {
        // The issuer's keys fetched so far are kept when the reload left their source alone.
        let kept = previous.and_then(|p| p.oidc.as_ref());
        let oidc = oidc.map(|config| oidc::Oidc::new(config, kept)).transpose()?;
        Ok(Self { tokens: tokens::StaticTokens::new(tokens, identities)?, oidc })
    }

    /// Who an `Authorization` value (`Bearer …`) says the caller is, or why not.
    pub async fn authorize(&self, authorization: Option<&[u8]>) -> Result<Arc<Caller>, Refusal> {
        self.find(bearer(authorization)?).await
    }

    /// [`Self::authorize`] for a request of a connection whose last static token is in
    /// `last` (kept there when this one is accepted).
    pub async fn authorize_on(
        self: &Arc<Self>,
        authorization: Option<&[u8]>,
        last: &LastCaller,
    ) -> Result<Arc<Caller>, Refusal> {
        let presented = bearer(authorization)?;
        if let Some(caller) = last.recall(self, presented) {
            return Ok(caller);
        }
        let caller = self.find(presented).await?;
        last.keep(self, presented, &caller);
        Ok(caller)
    }

    /// The identity of a presented token, or why there is none.
    async fn find(&self, presented: &str) -> Result<Arc<Caller>, Refusal> {
        if let Some(caller) = self.tokens.find(presented) {
            return Ok(caller);
        }
        match &self.oidc {
            // Boxed: its wait for the issuer's keys would make every request's future large.
            Some(oidc) if oidc::looks_like_jwt(presented) => Box::pin(oidc.verify(presented)).await,
            _ => Err(Refusal::Unknown),
        }
    }

    /// Whether `caller` may still reach `upstream` under this configuration (after a reload):
    /// its identity still exists and still has that access.
    pub fn still_allows(&self, caller: &Caller, upstream: &str) -> bool {
        match &caller.origin {
            Origin::Token | Origin::Named => {
                self.tokens.by_id(&caller.id).is_some_and(|now| now.access.allows(upstream))
            }
            Origin::Oidc { issuer, groups } => self
                .oidc
                .as_ref()
                .filter(|oidc| oidc.issuer() == &**issuer && !oidc.is_revoked(&caller.name))
                .is_some_and(|oidc| oidc.access(groups).allows(upstream)),
        }
    }

    /// How long the caller of `presented`, an OIDC token verified by these identities, holds
    /// without being verified again: until (Unix seconds) and under which keys.
    fn oidc_holds(&self, presented: &str) -> Option<(u64, u64)> {
        self.oidc.as_ref()?.holds(presented)
    }

    /// Fetches the issuer's keys again in the background when they are old.
    fn refresh_keys_if_old(&self) {
        if let Some(oidc) = &self.oidc {
            oidc.refresh_keys_if_old();
        }
    }

    /// The generation of the issuer's keys now (0 without an issuer).
    fn oidc_generation(&self) -> u64 {
        self.oidc.as_ref().map_or(0, oidc::Oidc::generation)
    }

    /// How many identities are configured (an issuer counts one).
    pub fn count(&self) -> usize {
        self.tokens.count() + usize::from(self.oidc.is_some())
    }
}

/// The bearer token of an `Authorization` value (visible ASCII, as HTTP's `to_str` takes).
fn bearer(authorization: Option<&[u8]>) -> Result<&str, Refusal> {
    let value = authorization.filter(|v| v.iter().all(|b| b.is_ascii_graphic() || *b == b' '));
    match value.and_then(|v| v.strip_prefix(b"Bearer ")).map(std::str::from_utf8) {
        Some(Ok(token)) => Ok(token),
        _ => Err(Refusal::Missing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_lists_allow_only_what_they_name_and_a_star_all() {
        let names = ["main".to_owned(), "reporting".to_owned(), "main".to_owned()];
        let some = Access::from_names(&names);
        assert!(some.allows("main") && some.allows("reporting") && !some.allows("other"));
        assert_eq!(some, Access::Only(vec!["main".to_owned(), "reporting".to_owned()].into()));
        let all = Access::from_names(&["main".to_owned(), ALL_UPSTREAMS.to_owned()]);
        assert!(all.allows("anything"));
        assert!(!Access::from_names(&[]).allows("main"));
    }
}
