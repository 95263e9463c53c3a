//! OpenID Connect bearer tokens from a real provider (npm's `oidc-provider`, client
//! credentials grant): a valid token logs in through a sidecar whose `token_command` prints it,
//! and is audited by the person's name; an expired, wrong-audience, wrong-issuer, tampered,
//! `alg: none` or claim-less token is refused with its own kind; a group that may not reach
//! an upstream is refused; a refreshed token of the same person keeps the session and another
//! person's does not; the provider's key rotation needs no restart. A person revoked at a
//! reload loses their sessions, over a stream and over requests.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use e2e::http::call;
use e2e::idp::{EDDSA, ES256, IdpClient, OTHER_AUDIENCE, Provider, RS256, SHORT};
use e2e::processes::{Proc, free_port, sidecar_check, wait_port};
use e2e::{Carrier, DATABASE, mysql_port, on_both_carriers, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use serde_json::{Value, json};

fn clients() -> [IdpClient; 4] {
    [
        IdpClient {
            id: "alice-app",
            secret: "alice-secret",
            claims: json!({ "email": "alice@example.com", "groups": ["dba"] }),
        },
        IdpClient {
            id: "carol-app",
            secret: "carol-secret",
            claims: json!({ "email": "carol@example.com", "groups": ["analysts"] }),
        },
        IdpClient { id: "nobody-app", secret: "nobody-secret", claims: json!({}) },
        IdpClient {
            id: "mallory-app",
            secret: "mallory-secret",
            claims: json!({ "email": "alice@example.com", "email_verified": false }),
        },
    ]
}

fn transport_yaml(port: u16, provider: &Provider, audit: &std::path::Path) -> String {
    let mysql = mysql_port();
    format!(
        "listen: 127.0.0.1:{port}\nupstreams:\n  - name: main\n    address: 127.0.0.1:{mysql}\n  - name: reporting\n    address: 127.0.0.1:{mysql}\nsession_timeout: 30s\naudit:\n  path: {}\noidc:\n  issuer: {}\n  audience: sqltunnel\n  jwks_url: {}\n  jwks_min_interval: 1s\n  leeway: 0s\n  identity_claim: email\n  groups_claim: groups\n  groups:\n    dba: [\"*\"]\n    analysts: [reporting]\n",
        audit.display(),
        provider.issuer,
        provider.jwks_url()
    )
}

/// A sidecar config whose token comes from `argv`, for `upstream`.
fn sidecar_with_command(transport_port: u16, port: u16, argv: &[String], upstream: &str) -> String {
    sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), "unused-token")
        .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
        .replace("  token: unused-token\n", &format!("  token_command: {}\n", json!(argv)))
        .replace("upstream: main", &format!("upstream: {upstream}"))
}

/// The transport's answer to `/v1/ready` with `token`: status and JSON body.
async fn ready(port: u16, token: &str) -> (u16, Value) {
    let (status, _, body) = call(port, token, "GET", "/v1/ready", "").await;
    (status, serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}")))
}

/// Asserts that `token` is refused with `kind`.
async fn refused_as(port: u16, token: &str, kind: &str) {
    let (status, _, body) =
        call(port, token, "POST", "/v1/keepalive", r#"{"sessions":[],"wait_ms":0}"#).await;
    assert_eq!(status, 401, "{kind}: {body}");
    let body: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(body["error"], kind, "{body}");
}

/// `token` with its payload replaced by `edit` of the decoded claims (the signature kept).
fn with_claims(token: &str, edit: impl FnOnce(&mut Value)) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("json");
    edit(&mut claims);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{}.{payload}.{}", parts[0], parts[2])
}

#[tokio::test]
async fn provider_tokens_log_in_by_name_and_each_bad_token_has_its_kind() {
    within(120, async {
        let clients = clients();
        let [alice, carol, nobody, mallory] = &clients;
        let provider = Provider::start("main", &clients);
        let port = free_port();
        let audit =
            std::env::temp_dir().join(format!("sqltunnel-oidc-{}.jsonl", std::process::id()));
        drop(std::fs::remove_file(&audit));
        let transport = Proc::start("transport", &transport_yaml(port, &provider, &audit), "oidc");
        wait_port(port).await;

        // Every accepted algorithm; the caller is named by its email and reaches what its
        // group may.
        for resource in [ES256, RS256, EDDSA] {
            let (status, body) = ready(port, &provider.token(alice, resource).await).await;
            assert_eq!(status, 200, "{resource}: {body}");
            assert_eq!(body["identity"], "alice@example.com", "{body}");
            assert_eq!(e2e::http::ready_upstreams(&body), ["main", "reporting"], "{body}");
        }
        let (_, body) = ready(port, &provider.token(carol, ES256).await).await;
        assert_eq!(e2e::http::ready_upstreams(&body), ["reporting"], "{body}");

        // Each refusal has its kind.
        let good = provider.token(alice, ES256).await;
        refused_as(port, &provider.token(alice, OTHER_AUDIENCE).await, "token_wrong_audience")
            .await;
        let forged = with_claims(&good, |c| c["email"] = json!("mallory@example.com"));
        refused_as(port, &forged, "token_bad_signature").await;
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
        let payload = good.split('.').nth(1).expect("payload");
        refused_as(port, &format!("{header}.{payload}."), "token_unsigned").await;
        let hs256 = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","typ":"JWT"}"#);
        refused_as(port, &format!("{hs256}.{payload}.c2ln"), "token_algorithm").await;
        refused_as(port, &provider.token(nobody, ES256).await, "token_malformed").await;
        refused_as(port, &provider.token(mallory, ES256).await, "token_malformed").await;
        refused_as(port, "not.a.jwt", "token_malformed").await;
        refused_as(port, "just-a-wrong-token", "unauthorized").await;
        let twin = provider.twin("twin", &clients);
        refused_as(port, &twin.token(alice, ES256).await, "token_wrong_issuer").await;
        drop(twin);
        let short = provider.token(alice, SHORT).await;
        assert_eq!(ready(port, &short).await.0, 200, "valid for 2 s");
        tokio::time::sleep(Duration::from_millis(3100)).await;
        refused_as(port, &short, "token_expired").await;

        // A session belongs to the person: a refreshed token keeps it, another person's does
        // not find it.
        let (status, session, _) =
            call(port, &good, "POST", "/v1/relay", r#"{"upstream":"main"}"#).await;
        assert_eq!(status, 201);
        let keep = format!(r#"{{"sessions":["{session}"],"wait_ms":0}}"#);
        let refreshed = provider.token(alice, RS256).await;
        assert_ne!(refreshed, good);
        let (_, _, own) = call(port, &refreshed, "POST", "/v1/keepalive", &keep).await;
        assert!(!own.contains(&session), "a refreshed token keeps the session: {own}");
        let (_, _, other) =
            call(port, &provider.token(carol, ES256).await, "POST", "/v1/keepalive", &keep).await;
        assert!(other.contains(&session), "another person's token does not see it: {other}");

        // Through a sidecar whose token_command asks the provider: alice logs in and is
        // audited by name; carol may not reach main.
        let (alice_port, carol_port) = (free_port(), free_port());
        let alice_yaml =
            sidecar_with_command(port, alice_port, &provider.token_command(alice, ES256), "main");
        let (ok, said) = sidecar_check(&alice_yaml).await;
        assert!(ok, "{said}");
        assert!(
            said.contains("accepted as alice@example.com")
                && said.contains("upstreams: main, reporting"),
            "{said}"
        );
        let alice_sidecar = Proc::start("sidecar", &alice_yaml, "oidc-alice");
        let carol_sidecar = Proc::start(
            "sidecar",
            &sidecar_with_command(port, carol_port, &provider.token_command(carol, ES256), "main"),
            "oidc-carol",
        );
        wait_port(alice_port).await;
        wait_port(carol_port).await;
        let mut conn = Conn::new(opts(alice_port, Some(DATABASE))).await.expect("alice logs in");
        conn.query_drop("CREATE TEMPORARY TABLE oidc_t (n INT)").await.expect("ddl");
        conn.query_drop("INSERT INTO oidc_t VALUES (1)").await.expect("dml");
        let n: Option<i64> = conn.query_first("SELECT COUNT(*) FROM oidc_t").await.expect("select");
        assert_eq!(n, Some(1));
        let refused = Conn::new(opts(carol_port, Some(DATABASE)))
            .await
            .expect_err("carol may not reach main");
        let said = refused.to_string();
        assert!(said.contains("'carol@example.com'") && said.contains("'main'"), "{said}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let lines: Vec<Value> = std::fs::read_to_string(&audit)
            .expect("audit")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert!(lines.len() >= 3, "{lines:?}");
        assert!(lines.iter().all(|l| l["identity"] == "alice@example.com"), "{lines:?}");

        // A token of 2 s through token_command: asked for again as it nears its `exp` (or
        // after the 401 that an expired one meets), the session going on across tokens.
        let short_port = free_port();
        let short_yaml =
            sidecar_with_command(port, short_port, &provider.token_command(alice, SHORT), "main");
        let short_sidecar = Proc::start("sidecar", &short_yaml, "oidc-short");
        wait_port(short_port).await;
        let mut short = Conn::new(opts(short_port, Some(DATABASE))).await.expect("login");
        let id: Option<u64> = short.query_first("SELECT CONNECTION_ID()").await.expect("id");
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let again: Option<u64> = short
                .query_first("SELECT CONNECTION_ID()")
                .await
                .expect("a query as tokens expire");
            assert_eq!(again, id, "the same session throughout");
        }
        drop(short_sidecar);

        // The provider rotates its keys: new tokens are accepted without a restart.
        let provider = provider.rotate_keys(&clients);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (status, body) = ready(port, &provider.token(alice, ES256).await).await;
        assert_eq!(status, 200, "a new kid is fetched: {body}");
        conn.query_drop("DO 1").await.expect("the session carries on");
        let log = std::fs::read_to_string(&transport.log).expect("log");
        assert!(!log.contains(&good) && !log.contains(&refreshed), "no token in the log");
        drop((alice_sidecar, carol_sidecar));
        drop(std::fs::remove_file(&audit));
    })
    .await;
}

on_both_carriers!(a_person_revoked_at_a_reload_loses_sessions_and_tokens_at_once);
/// A person revoked by name at a reload (`oidc.revoked`) loses their sessions and their
/// still-valid tokens at once; the others carry on.
async fn a_person_revoked_at_a_reload_loses_sessions_and_tokens_at_once(carrier: Carrier) {
    within(90, async {
        let clients = clients();
        let [alice, carol, ..] = &clients;
        let tag = format!("revoke-{}", carrier.name());
        let provider = Provider::start(&tag, &clients);
        let port = free_port();
        let audit =
            std::env::temp_dir().join(format!("sqltunnel-oidc-{tag}-{}.jsonl", std::process::id()));
        let yaml = transport_yaml(port, &provider, &audit);
        let transport = Proc::start("transport", &yaml, &format!("oidc-{tag}"));
        wait_port(port).await;
        let (alice_port, carol_port) = (free_port(), free_port());
        let alice_yaml = carrier.sidecar(&sidecar_with_command(
            port,
            alice_port,
            &provider.token_command(alice, ES256),
            "main",
        ));
        let carol_yaml = carrier.sidecar(&sidecar_with_command(
            port,
            carol_port,
            &provider.token_command(carol, ES256),
            "reporting",
        ));
        let _alice_sidecar = Proc::start("sidecar", &alice_yaml, &format!("{tag}-alice"));
        let _carol_sidecar = Proc::start("sidecar", &carol_yaml, &format!("{tag}-carol"));
        wait_port(alice_port).await;
        wait_port(carol_port).await;
        let mut alice_conn = Conn::new(opts(alice_port, Some(DATABASE))).await.expect("alice");
        let mut carol_conn = Conn::new(opts(carol_port, Some(DATABASE))).await.expect("carol");
        alice_conn.query_drop("SELECT 1").await.expect("alice queries");
        let token = provider.token(alice, ES256).await;
        assert_eq!(ready(port, &token).await.0, 200, "alice's token works");

        std::fs::write(&transport.config, format!("{yaml}  revoked: [alice@example.com]\n"))
            .expect("rewrite config");
        let reloaded = transport.log_count("configuration reloaded");
        transport.signal("HUP");
        transport.log_grows("configuration reloaded", reloaded).await;

        refused_as(port, &token, "unauthorized").await;
        let ended = alice_conn.query_drop("SELECT 1").await.expect_err("alice's session ended");
        assert!(ended.to_string().contains("revoked"), "{ended}");
        assert!(Conn::new(opts(alice_port, Some(DATABASE))).await.is_err(), "alice cannot log in");
        carol_conn.query_drop("SELECT 1").await.expect("carol carries on");
        drop(std::fs::remove_file(&audit));
    })
    .await;
}
