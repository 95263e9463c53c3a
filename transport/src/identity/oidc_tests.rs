//! Seeded random tests of token checks: a JWT with bytes changed at random places is refused,
//! or, where the change leaves the signed text as it was, names the same person with the same
//! access, never anyone else; random sets of static tokens each find their own identity.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::config::Secret;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};

use super::{Access, Identities, IdentityConfig, OidcConfig};
use common::seeded::Draw;

/// An `Authorization` value with `token`.
fn bearer(token: &str) -> Vec<u8> {
    format!("Bearer {token}").into_bytes()
}

/// An issuer (its JWKS in a file under `dir`) and a token of alice it signed.
fn issuer(dir: &std::path::Path) -> (OidcConfig, String) {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("pair");
    let point = pair.public_key().as_ref();
    let (x, y) = (URL_SAFE_NO_PAD.encode(&point[1..33]), URL_SAFE_NO_PAD.encode(&point[33..]));
    let jwks =
        format!(r#"{{"keys":[{{"kty":"EC","crv":"P-256","x":"{x}","y":"{y}","kid":"k1"}}]}}"#);
    let path = dir.join("jwks.json");
    std::fs::write(&path, jwks).expect("jwks");
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".into());
    let claims = serde_json::json!({
        "iss": "https://sso.test", "aud": "sqltunnel", "sub": "a",
        "exp": jsonwebtoken::get_current_timestamp() + 600,
        "email": "alice@example.com", "groups": ["analysts"],
    });
    let key = jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref());
    let token = jsonwebtoken::encode(&header, &claims, &key).expect("sign");
    let config = OidcConfig {
        issuer: "https://sso.test".into(),
        audience: "sqltunnel".into(),
        jwks_file: Some(path.display().to_string()),
        groups: [("analysts".to_owned(), vec!["reporting".to_owned()])].into(),
        ..OidcConfig::default()
    };
    (config, token)
}

#[tokio::test]
async fn a_jwt_changed_at_random_places_never_names_anyone_else() {
    let dir = std::env::temp_dir().join(format!("sqltunnel-tamper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (config, token) = issuer(&dir);
    let identities = Identities::new(&[], &[], Some(&config), None).expect("identities");
    let alice = identities.authorize(Some(&bearer(&token))).await.expect("the token itself");
    assert_eq!(alice.access, Access::Only(vec!["reporting".to_owned()].into()));
    let mut draw = Draw::seeded("tamper");
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=";
    let (mut refused, mut same) = (0, 0);
    for _ in 0..2_000 {
        let mut bytes = token.clone().into_bytes();
        // One to three changes: a replaced, deleted or inserted character.
        for _ in 0..=draw.below(3) {
            let at = draw.below(bytes.len());
            let with = ALPHABET[draw.below(ALPHABET.len())];
            match draw.below(3) {
                0 => bytes[at] = with,
                1 if bytes.len() > 1 => drop(bytes.remove(at)),
                _ => bytes.insert(at, with),
            }
        }
        let changed = String::from_utf8(bytes).expect("ascii");
        if changed == token {
            continue;
        }
        match identities.authorize(Some(&bearer(&changed))).await {
            Err(_) => refused += 1,
            Ok(caller) => {
                assert_eq!((&caller.id, &caller.access), (&alice.id, &alice.access), "{changed}");
                same += 1;
            }
        }
    }
    println!("tamper: {refused} refused, {same} the same token in another spelling");
    assert!(refused > 1_900, "{refused}");
    drop(std::fs::remove_dir_all(&dir));
}

#[tokio::test]
async fn random_sets_of_static_tokens_each_find_their_own_identity() {
    let mut draw = Draw::seeded("static tokens");
    let upstreams = ["main", "reporting", "archive"];
    for round in 0..50 {
        let plain: Vec<Secret> = (0..draw.below(4))
            .map(|i| Secret::new(format!("plain-{round}-{i}-{}", draw.below(1 << 20))))
            .collect();
        let named: Vec<(IdentityConfig, String)> = (0..1 + draw.below(6))
            .map(|i| {
                let token = format!("named-{round}-{i}-{}", draw.below(1 << 20));
                let reach: Vec<String> = upstreams
                    .iter()
                    .filter(|_| draw.below(2) == 0)
                    .map(|u| (*u).to_owned())
                    .collect();
                let identity = IdentityConfig {
                    name: format!("person{i}"),
                    token_sha256: Some(super::config::to_hex(&super::config::sha256(
                        token.as_bytes(),
                    ))),
                    upstreams: reach,
                    ..IdentityConfig::default()
                };
                (identity, token)
            })
            .collect();
        let configs: Vec<IdentityConfig> = named.iter().map(|(c, _)| c.clone()).collect();
        let identities = Identities::new(&plain, &configs, None, None).expect("identities");
        for (config, token) in &named {
            let caller = identities.authorize(Some(&bearer(token))).await.expect("its token");
            assert_eq!(&*caller.name, config.name);
            for upstream in upstreams {
                assert_eq!(
                    caller.access.allows(upstream),
                    config.upstreams.iter().any(|u| u == upstream)
                );
            }
            assert!(identities.authorize(Some(&bearer(&format!("{token}x")))).await.is_err());
        }
        for (i, token) in plain.iter().enumerate() {
            let caller = identities.authorize(Some(&bearer(token.expose()))).await.expect("plain");
            assert_eq!(&*caller.name, format!("token#{}", i + 1));
            assert!(upstreams.iter().all(|u| caller.access.allows(u)));
        }
    }
}
