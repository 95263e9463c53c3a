//! Why a bearer token was refused: each reason has its own `kind` in the JSON error, so a
//! sidecar (and its user) can tell an expired token from a wrong one.

use common::wire::ApiErrorKind;

/// Why a request's token was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token no identity has (and not a JWT the issuer signed).
    Unknown,
    /// Not a well-formed JWT, or without a claim the transport needs.
    Malformed,
    /// `alg: none`, or no signature at all.
    Unsigned,
    /// Signed with an algorithm not in `oidc.algorithms`.
    Algorithm,
    /// Its signature does not verify (tampered, or signed by another key).
    BadSignature,
    /// Its key (`kid`) is not among the issuer's published keys, even fetched again.
    UnknownKey,
    /// The issuer's keys could not be fetched.
    KeysUnavailable,
    /// Past its `exp` (and the leeway).
    Expired,
    /// Before its `nbf` (less the leeway).
    NotYetValid,
    /// Its `aud` is not the transport's audience.
    WrongAudience,
    /// Its `iss` is not the configured issuer.
    WrongIssuer,
    /// Verified, but without the claim that names the person (`oidc.identity_claim`).
    NoIdentity,
    /// Its `email` is marked not verified (`email_verified: false`).
    Unverified,
    /// The person it names is on `oidc.revoked`.
    Revoked,
}

impl Refusal {
    /// What the caller is told (never anything of the token itself).
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Missing => "missing bearer token",
            Refusal::Unknown => "invalid bearer token",
            Refusal::Malformed => "the bearer token is not a JWT the transport can read",
            Refusal::Unsigned => "the bearer token is not signed (alg none)",
            Refusal::Algorithm => "the bearer token's signature algorithm is not accepted",
            Refusal::BadSignature => "the bearer token's signature does not verify",
            Refusal::UnknownKey => {
                "the bearer token was signed with a key the issuer does not publish"
            }
            Refusal::KeysUnavailable => "the issuer's keys could not be fetched; try again",
            Refusal::Expired => "the bearer token has expired",
            Refusal::NotYetValid => "the bearer token is not valid yet (nbf)",
            Refusal::WrongAudience => "the bearer token is for another audience",
            Refusal::WrongIssuer => "the bearer token is from another issuer",
            Refusal::NoIdentity => {
                "the bearer token lacks the claim that names the person (oidc.identity_claim)"
            }
            Refusal::Unverified => {
                "the bearer token's email is not verified (email_verified is false)"
            }
            Refusal::Revoked => "the person this bearer token names has been revoked",
        }
    }

    /// Its kind in the JSON error.
    pub fn kind(self) -> ApiErrorKind {
        match self {
            Refusal::Missing | Refusal::Unknown | Refusal::Revoked => ApiErrorKind::Unauthorized,
            Refusal::Malformed | Refusal::NoIdentity | Refusal::Unverified => {
                ApiErrorKind::TokenMalformed
            }
            Refusal::Unsigned => ApiErrorKind::TokenUnsigned,
            Refusal::Algorithm => ApiErrorKind::TokenAlgorithm,
            Refusal::BadSignature => ApiErrorKind::TokenBadSignature,
            Refusal::UnknownKey => ApiErrorKind::TokenUnknownKey,
            Refusal::KeysUnavailable => ApiErrorKind::TokenKeysUnavailable,
            Refusal::Expired => ApiErrorKind::TokenExpired,
            Refusal::NotYetValid => ApiErrorKind::TokenNotYetValid,
            Refusal::WrongAudience => ApiErrorKind::TokenWrongAudience,
            Refusal::WrongIssuer => ApiErrorKind::TokenWrongIssuer,
        }
    }

    /// True when the caller may have been someone trying tokens (the refusal is slowed down);
    /// an expired or early token of the issuer is an honest mistake.
    pub fn is_suspicious(self) -> bool {
        !matches!(
            self,
            Refusal::Expired | Refusal::NotYetValid | Refusal::KeysUnavailable | Refusal::Revoked
        )
    }
}
