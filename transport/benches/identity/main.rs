//! What authorising a request costs: a plain or named token among 1 and 100 identities, and an
//! OpenID Connect JWT verified (ES256, cold) and remembered (every request after the first),
//! each as a median of several rounds, beside a baseline measured in the same run: a
//! `HashMap` lookup of the token's text, the least any check could do.
//!
//! `cargo bench -p transport --bench identity`

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::config::Secret;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use transport::identity::{Identities, OidcConfig};

const ROUNDS: usize = 7;
const CALLS: u32 = 20_000;
/// Tokens verified cold, each once.
const COLD: usize = 500;

/// The `Authorization` value that presents `token`.
fn headers(token: &str) -> Vec<u8> {
    format!("Bearer {token}").into_bytes()
}

/// Median nanoseconds per call of `f`, over [`ROUNDS`] rounds of `calls`.
fn median_ns(calls: u32, mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..calls {
                f();
            }
            started.elapsed().as_nanos() as f64 / f64::from(calls)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

/// An issuer's key, its JWKS file, and `count` tokens it signed (each its own `jti`).
fn issuer(dir: &std::path::Path, count: usize) -> (OidcConfig, Vec<String>) {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("pair");
    let point = pair.public_key().as_ref();
    let (x, y) = (URL_SAFE_NO_PAD.encode(&point[1..33]), URL_SAFE_NO_PAD.encode(&point[33..]));
    let jwks = format!(
        r#"{{"keys":[{{"kty":"EC","crv":"P-256","x":"{x}","y":"{y}","kid":"k1","alg":"ES256","use":"sig"}}]}}"#
    );
    let path = dir.join("jwks.json");
    std::fs::write(&path, jwks).expect("jwks");
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".into());
    let exp = jsonwebtoken::get_current_timestamp() + 3600;
    let key = jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref());
    let tokens = (0..count)
        .map(|jti| {
            let claims = serde_json::json!({
                "iss": "https://sso.example.com", "aud": "sqltunnel", "exp": exp, "jti": jti,
                "sub": "alice", "email": "alice@example.com", "groups": ["dba"],
            });
            jsonwebtoken::encode(&header, &claims, &key).expect("sign")
        })
        .collect();
    let config = OidcConfig {
        issuer: "https://sso.example.com".into(),
        audience: "sqltunnel".into(),
        jwks_file: Some(path.display().to_string()),
        upstreams: vec!["*".into()],
        ..OidcConfig::default()
    };
    (config, tokens)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let dir = std::env::temp_dir().join(format!("sqltunnel-bench-identity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (oidc, jwts) = issuer(&dir, 1 + COLD);
    let jwt = &jwts[0];
    println!("case                                    ns/request   ÷ baseline");
    for count in [1usize, 100] {
        let tokens: Vec<Secret> =
            (0..count).map(|i| Secret::new(format!("token-{i:04}-0123456789abcdef"))).collect();
        let identities = Identities::new(&tokens, &[], Some(&oidc), None).expect("identities");
        let last = tokens[count - 1].expose().to_owned();
        let map: HashMap<String, usize> =
            tokens.iter().enumerate().map(|(i, t)| (t.expose().to_owned(), i)).collect();
        let baseline = median_ns(CALLS, || {
            black_box(map.get(black_box(last.as_str())));
        });
        let cases = [
            (format!("plain token, {count} identities"), headers(&last)),
            (format!("unknown token, {count} identities"), headers("no-such-token-0123456789")),
            (format!("JWT remembered, {count} identities"), headers(jwt)),
        ];
        for (name, headers) in &cases {
            let ns = median_ns(CALLS, || {
                black_box(runtime.block_on(identities.authorize(Some(black_box(headers)))).is_ok());
            });
            println!("{name:<40}{ns:>10.0}   {:>8.1}", ns / baseline);
        }
        println!("{:<40}{baseline:>10.0}   {:>8.1}", "baseline: HashMap lookup of the text", 1.0);
    }
    // Tokens seen for the first time: each one's signature and claims verified.
    let identities = Identities::new(&[], &[], Some(&oidc), None).expect("identities");
    let fresh: Vec<Vec<u8>> = jwts[1..].iter().map(|t| headers(t)).collect();
    let started = Instant::now();
    for headers in &fresh {
        assert!(runtime.block_on(identities.authorize(Some(headers))).is_ok());
    }
    let cold = started.elapsed().as_nanos() as f64 / COLD as f64;
    println!("{:<40}{cold:>10.0}", "JWT verified (ES256, first request)");
    drop(std::fs::remove_dir_all(&dir));
}
