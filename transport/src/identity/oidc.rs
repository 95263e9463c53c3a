//! OpenID Connect bearer tokens: a JWT is checked by `jsonwebtoken` against the issuer's
//! published keys (signature, `iss`, `aud`, `exp`, `nbf` with the leeway), and its claims name
//! the person and their groups. A verified token is remembered until it expires, so a session's
//! commands are not each verified again.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, get_current_timestamp};
use serde_json::{Map, Value};

use super::config::{invalid, sha256};
use super::jwks::KeySet;
use super::{Access, Caller, IdentityId, OidcConfig, Origin, Refusal};
use crate::Error;

/// Most verified tokens remembered.
const MAX_VERIFIED: usize = 4096;
/// Most groups taken from one token.
const MAX_GROUPS: usize = 256;

/// Verified tokens by SHA-256: who each is, its `exp`, and the generation of the keys that
/// verified it (new keys, and a withdrawn key's tokens are checked again).
type Verified = HashMap<[u8; 32], (Arc<Caller>, u64, u64)>;

/// The OpenID Connect issuer the transport trusts.
#[derive(Debug)]
pub struct Oidc {
    config: OidcConfig,
    keys: Arc<KeySet>,
    algorithms: Vec<Algorithm>,
    /// SHA-256 of a verified token → who it is and its `exp`.
    verified: Mutex<Verified>,
}

/// True when `token` has the shape of a JWT (three dot-separated parts).
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

impl Oidc {
    /// The issuer of `config`; the keys of `kept` (the issuer before a reload) are kept when
    /// they come from the same URL.
    pub fn new(config: &OidcConfig, kept: Option<&Oidc>) -> Result<Self, Error> {
        let algorithms = config
            .algorithms
            .iter()
            .map(|a| Algorithm::from_str(a).map_err(|_| invalid(format!("oidc.algorithms: {a:?}"))))
            .collect::<Result<_, _>>()?;
        let same_source = |k: &&Oidc| {
            config.jwks_url.is_some()
                && (&k.config.jwks_url, &k.config.jwks_ca_file, k.config.jwks_min_interval)
                    == (&config.jwks_url, &config.jwks_ca_file, config.jwks_min_interval)
        };
        let keys = match kept.filter(same_source) {
            Some(kept) => kept.keys.clone(),
            None => Arc::new(KeySet::new(config)?),
        };
        Ok(Self { config: config.clone(), keys, algorithms, verified: Mutex::default() })
    }

    /// The configured issuer.
    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// True when `person` is on the `revoked` list.
    pub fn is_revoked(&self, person: &str) -> bool {
        self.config.revoked.iter().any(|r| r == person)
    }

    /// What a member of `groups` may reach.
    pub fn access(&self, groups: &[String]) -> Access {
        let by_group = groups.iter().filter_map(|g| self.config.groups.get(g)).flatten();
        Access::from_names(self.config.upstreams.iter().chain(by_group))
    }

    /// How long a verified `token` holds: until its `exp` (the leeway included, in Unix
    /// seconds) and while the keys are those it was verified with (a refresh may withdraw
    /// one). `None` when it is not remembered.
    pub fn holds(&self, token: &str) -> Option<(u64, u64)> {
        let leeway = self.config.leeway.as_secs();
        let remembered = self.remembered();
        let (_, exp, generation) = remembered.get(&sha256(token.as_bytes()))?;
        Some((exp.saturating_add(leeway), *generation))
    }

    /// Fetches the keys again in the background when they are old.
    pub fn refresh_keys_if_old(&self) {
        self.keys.refresh_if_old();
    }

    /// The generation of the keys now.
    pub fn generation(&self) -> u64 {
        self.keys.generation()
    }

    /// Who `token` says the caller is, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<Arc<Caller>, Refusal> {
        let hash = sha256(token.as_bytes());
        let leeway = self.config.leeway.as_secs();
        self.keys.refresh_if_old();
        let generation = self.keys.generation();
        if let Some((caller, exp, seen)) = self.remembered().get(&hash)
            && *seen == generation
            && get_current_timestamp() <= exp.saturating_add(leeway)
        {
            return Ok(caller.clone());
        }
        let (alg, kid) = self.header(token)?;
        let keys = self.keys.current();
        let claims = match self.check(token, alg, kid.as_deref(), &keys) {
            Err(Refusal::UnknownKey) => {
                if !self.keys.refresh(&keys).await {
                    return Err(Refusal::KeysUnavailable);
                }
                self.check(token, alg, kid.as_deref(), &self.keys.current())?
            }
            checked => checked?,
        };
        let caller = Arc::new(self.caller(&claims)?);
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let mut verified = self.remembered();
        if verified.len() >= MAX_VERIFIED {
            let now = get_current_timestamp();
            verified.retain(|_, (_, exp, _)| now <= exp.saturating_add(leeway));
            if verified.len() >= MAX_VERIFIED {
                verified.clear();
            }
        }
        verified.insert(hash, (caller.clone(), exp, self.keys.generation()));
        Ok(caller)
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, Verified> {
        self.verified.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token's algorithm (refused unless signed with an accepted one) and key id.
    fn header(&self, token: &str) -> Result<(Algorithm, Option<String>), Refusal> {
        let mut parts = token.split('.');
        let (header, signature) = (parts.next().unwrap_or(""), parts.nth(1).unwrap_or(""));
        let header: Map<String, Value> = URL_SAFE_NO_PAD
            .decode(header)
            .ok()
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or(Refusal::Malformed)?;
        let alg = header.get("alg").and_then(Value::as_str).ok_or(Refusal::Malformed)?;
        if alg.eq_ignore_ascii_case("none") || signature.is_empty() {
            return Err(Refusal::Unsigned);
        }
        let alg = Algorithm::from_str(alg).map_err(|_| Refusal::Algorithm)?;
        if !self.algorithms.contains(&alg) {
            return Err(Refusal::Algorithm);
        }
        let kid = header.get("kid").and_then(Value::as_str).map(str::to_owned);
        Ok((alg, kid))
    }

    /// The token's claims, checked with each key it may have been signed with.
    fn check(
        &self,
        token: &str,
        alg: Algorithm,
        kid: Option<&str>,
        keys: &[Jwk],
    ) -> Result<Map<String, Value>, Refusal> {
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        let candidates = keys.iter().filter(|key| {
            kid.is_none_or(|kid| key.common.key_id.as_deref() == Some(kid)) && fits(key, alg)
        });
        let mut outcome = Err(Refusal::UnknownKey);
        for key in candidates {
            let Ok(decoding) = DecodingKey::from_jwk(key) else { continue };
            outcome = jsonwebtoken::decode::<Map<String, Value>>(token, &decoding, &validation)
                .map(|data| data.claims)
                .map_err(|e| refusal(e.kind()));
            if !matches!(outcome, Err(Refusal::BadSignature)) {
                break;
            }
        }
        outcome
    }

    /// The caller a verified token's claims name.
    fn caller(&self, claims: &Map<String, Value>) -> Result<Caller, Refusal> {
        let person = claims
            .get(&self.config.identity_claim)
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty() && !p.chars().any(char::is_control))
            .ok_or(Refusal::NoIdentity)?;
        if self.is_revoked(person) {
            return Err(Refusal::Revoked);
        }
        // An address the person typed but never proved is not a name to trust.
        if self.config.identity_claim == "email"
            && claims.get("email_verified").and_then(Value::as_bool) == Some(false)
        {
            return Err(Refusal::Unverified);
        }
        let groups: Vec<String> = match claims.get(&self.config.groups_claim) {
            Some(Value::Array(list)) => {
                list.iter().filter_map(Value::as_str).take(MAX_GROUPS).map(str::to_owned).collect()
            }
            Some(Value::String(one)) => vec![one.clone()],
            _ => Vec::new(),
        };
        let issuer: Arc<str> = self.config.issuer.as_str().into();
        Ok(Caller {
            id: IdentityId(format!("oidc:{issuer}\n{person}").into()),
            name: person.into(),
            label: issuer.clone(),
            access: self.access(&groups),
            origin: Origin::Oidc { issuer, groups: groups.into() },
        })
    }
}

/// True when `key` can verify a signature of `alg`.
fn fits(key: &Jwk, alg: Algorithm) -> bool {
    let declared = key.common.key_algorithm.map(|a| format!("{a:?}"));
    if declared.is_some_and(|a| a != format!("{alg:?}")) {
        return false;
    }
    matches!(
        (&key.algorithm, alg),
        (AlgorithmParameters::RSA(_), Algorithm::RS256)
            | (AlgorithmParameters::EllipticCurve(_), Algorithm::ES256)
            | (AlgorithmParameters::OctetKeyPair(_), Algorithm::EdDSA)
    )
}

/// The refusal a failed check means.
fn refusal(kind: &ErrorKind) -> Refusal {
    match kind {
        ErrorKind::ExpiredSignature => Refusal::Expired,
        ErrorKind::ImmatureSignature => Refusal::NotYetValid,
        ErrorKind::InvalidAudience => Refusal::WrongAudience,
        ErrorKind::InvalidIssuer => Refusal::WrongIssuer,
        ErrorKind::InvalidSignature | ErrorKind::Crypto(_) => Refusal::BadSignature,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => Refusal::Algorithm,
        _ => Refusal::Malformed,
    }
}
