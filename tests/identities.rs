//! Named identities: each token is a person with the upstreams it may reach. A session is
//! bound to its identity; an upstream the identity may not reach is refused with a MySQL error
//! naming both; `/v1/ready` lists only what the caller may reach; the audit log names the
//! person; a SIGHUP that removes an identity, or takes an upstream from it, ends its sessions.
//! Over a stream and over requests.

use std::time::Duration;

use e2e::http::call;
use e2e::processes::{Proc, free_port, wait_port};
use e2e::{Carrier, DATABASE, mysql_port, on_both_carriers, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use serde_json::Value;

const ALICE: &str = "alice-T0ken-5Rq8Zm2Xv7Lw4Np9";
const BOB: &str = "bob-T0ken-3Hk6Yt1Gf8Sd5Ja2Qe";
const CAROL: &str = "carol-T0ken-6Ty1Ur8Ie3Wq5Zm7Nb";

/// The SHA-256 of `token`, as `transport hash-token` prints it.
fn hash_token(token: &str) -> String {
    let out = std::process::Command::new(e2e::processes::bin_dir().join("transport"))
        .arg("hash-token")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(format!("{token}\n").as_bytes())?;
            child.wait_with_output()
        })
        .expect("transport hash-token");
    assert!(out.status.success());
    String::from_utf8(out.stdout).expect("utf-8").trim().to_owned()
}

/// A transport on `port` with upstreams `main` and `reporting` (the same server), an audit log,
/// and `identities` (YAML list items).
fn transport_yaml(port: u16, audit: &std::path::Path, identities: &str) -> String {
    let mysql = mysql_port();
    format!(
        "listen: 127.0.0.1:{port}\nupstreams:\n  - name: main\n    address: 127.0.0.1:{mysql}\n  - name: reporting\n    address: 127.0.0.1:{mysql}\nsession_timeout: 30s\naudit:\n  path: {}\nidentities:\n{identities}",
        audit.display()
    )
}

/// A sidecar on `carrier` with `token`, whose `users` entry reaches `upstream`.
fn sidecar_for(carrier: Carrier, transport_port: u16, token: &str, upstream: &str) -> (Proc, u16) {
    let port = free_port();
    let yaml = carrier
        .sidecar(&sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), token))
        .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
        .replace("upstream: main", &format!("upstream: {upstream}"));
    let tag = format!("identities-{token}-{upstream}-{}", carrier.name());
    (Proc::start("sidecar", &yaml, &tag), port)
}

/// Waits until `proc` logs `needle` once more than `seen` times.
async fn reload(proc: &Proc, yaml: &str) {
    let seen = proc.log_count("configuration reloaded");
    std::fs::write(&proc.config, yaml).expect("config");
    proc.signal("HUP");
    proc.log_grows("configuration reloaded", seen).await;
}

on_both_carriers!(identities_reach_their_upstreams_only_and_lose_their_sessions_when_revoked);
async fn identities_reach_their_upstreams_only_and_lose_their_sessions_when_revoked(
    carrier: Carrier,
) {
    within(90, async {
        let transport_port = free_port();
        let audit = std::env::temp_dir().join(format!(
            "sqltunnel-identities-{}-{}.jsonl",
            std::process::id(),
            carrier.name()
        ));
        drop(std::fs::remove_file(&audit));
        let alice = format!(
            "  - name: alice\n    token_sha256: {}\n    upstreams: [main]\n",
            hash_token(ALICE)
        );
        let bob = format!("  - name: bob\n    token: {BOB}\n    upstreams: [reporting]\n");
        let carol = |upstreams: &str| {
            format!(
                "  - name: carol\n    token_sha256: {}\n    upstreams: [{upstreams}]\n",
                hash_token(CAROL)
            )
        };
        let all = format!("{alice}{bob}{}", carol("main, reporting"));
        let tag = format!("identities-{}", carrier.name());
        let transport =
            Proc::start("transport", &transport_yaml(transport_port, &audit, &all), &tag);
        wait_port(transport_port).await;
        let config = std::fs::read_to_string(&transport.config).expect("config");
        assert!(!config.contains(ALICE) && !config.contains(CAROL), "hashes only");

        // /v1/ready names the caller and lists what it may reach.
        let (status, _, body) = call(transport_port, ALICE, "GET", "/v1/ready", "").await;
        let ready: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(status, 200, "{body}");
        assert_eq!(ready["identity"], "alice", "{body}");
        assert_eq!(e2e::http::ready_upstreams(&ready), ["main"], "{body}");

        // A session belongs to its identity: another person's valid token does not find it.
        let (status, session, _) =
            call(transport_port, ALICE, "POST", "/v1/relay", r#"{"upstream":"main"}"#).await;
        assert_eq!(status, 201);
        let keep = format!(r#"{{"sessions":["{session}"],"wait_ms":0}}"#);
        let (_, _, own) = call(transport_port, ALICE, "POST", "/v1/keepalive", &keep).await;
        let (_, _, other) = call(transport_port, CAROL, "POST", "/v1/keepalive", &keep).await;
        assert!(!own.contains(&session) && other.contains(&session), "{own} / {other}");
        let (status, _, body) =
            call(transport_port, BOB, "POST", &format!("/v1/sessions/{session}/command"), "").await;
        assert_eq!(status, 404, "{body}");

        // A name alice may not reach, configured or not, gets the same refusal: she learns
        // nothing of which upstreams exist.
        let (forbidden, _, said) =
            call(transport_port, ALICE, "POST", "/v1/relay", r#"{"upstream":"reporting"}"#).await;
        let (unknown, _, unknown_said) =
            call(transport_port, ALICE, "POST", "/v1/relay", r#"{"upstream":"payroll"}"#).await;
        assert_eq!((forbidden, unknown), (403, 403));
        assert_eq!(
            said.replace("reporting", "NAME"),
            unknown_said.replace("payroll", "NAME"),
            "the same refusal"
        );

        // Through sidecars: alice reaches main; bob is refused main with a clear MySQL error.
        let (alice_sidecar, alice_port) = sidecar_for(carrier, transport_port, ALICE, "main");
        let (bob_sidecar, bob_port) = sidecar_for(carrier, transport_port, BOB, "main");
        let (carol_sidecar, carol_port) = sidecar_for(carrier, transport_port, CAROL, "main");
        wait_port(alice_port).await;
        wait_port(bob_port).await;
        wait_port(carol_port).await;
        let mut alice_conn =
            Conn::new(opts(alice_port, Some(DATABASE))).await.expect("alice logs in");
        alice_conn.query_drop("DO 1").await.expect("alice's query");
        let refused =
            Conn::new(opts(bob_port, Some(DATABASE))).await.expect_err("bob may not reach main");
        let said = refused.to_string();
        assert!(said.contains("1045") || said.contains("Access denied"), "{said}");
        assert!(said.contains("'bob'") && said.contains("'main'"), "{said}");
        let mut carol_conn =
            Conn::new(opts(carol_port, Some(DATABASE))).await.expect("carol logs in");
        carol_conn.query_drop("DO 1").await.expect("carol's query");

        // The audit log names the person on every line.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let lines: Vec<Value> = std::fs::read_to_string(&audit)
            .expect("audit")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert!(lines.iter().any(|l| l["identity"] == "alice"), "{lines:?}");
        assert!(lines.iter().any(|l| l["identity"] == "carol"), "{lines:?}");
        assert!(
            lines.iter().all(|l| l["identity"] == "alice" || l["identity"] == "carol"),
            "{lines:?}"
        );

        // Sessions are counted by identity name (bounded: configured names only).
        let (_, _, metrics) = call(transport_port, BOB, "GET", "/metrics", "").await;
        assert!(
            metrics.contains(r#"sqltunnel_identity_sessions_opened_total{identity="alice"}"#),
            "{metrics}"
        );
        assert!(!metrics.contains(r#"identity="bob""#), "bob opened none: {metrics}");

        // Revocation: alice removed, carol's main taken away; bob untouched.
        let fewer = format!("{bob}{}", carol("reporting"));
        reload(&transport, &transport_yaml(transport_port, &audit, &fewer)).await;
        for (who, conn) in [("alice", &mut alice_conn), ("carol", &mut carol_conn)] {
            let err = conn.query_drop("DO 1").await.expect_err("revoked");
            let said = err.to_string();
            assert!(
                said.contains("revoked") || said.contains("refused the sidecar's token"),
                "{who}: {said}"
            );
        }
        let log = std::fs::read_to_string(&transport.log).expect("log");
        let revoked: Vec<&str> =
            log.lines().filter(|l| l.contains("its identity's access was revoked")).collect();
        assert!(revoked.iter().any(|l| l.contains("identity=alice")), "{log}");
        assert!(revoked.iter().any(|l| l.contains("identity=carol")), "{log}");
        assert!(!revoked.iter().any(|l| l.contains("identity=bob")), "{log}");
        assert!(
            !log.contains(ALICE) && !log.contains(BOB) && !log.contains(CAROL),
            "no token logged"
        );
        let (status, _, body) = call(transport_port, ALICE, "GET", "/v1/sessions", "").await;
        assert_eq!(status, 401, "{body}");
        drop((alice_sidecar, bob_sidecar, carol_sidecar));
        drop(std::fs::remove_file(&audit));
    })
    .await;
}
