//! The transport is a door into a private network: no secret ever reaches a log, an
//! unauthenticated caller learns nothing about what is behind it, and a session answers only
//! the token that opened it.

use e2e::http::{call, raw_request};
use e2e::processes::{Proc, free_port, wait_port};
use e2e::{DATABASE, PASSWORD, TOKEN, USER, mysql_port, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

#[tokio::test]
async fn passwords_and_tokens_never_reach_the_logs() {
    within(120, async {
        let (transport_port, sidecar_port) = (free_port(), free_port());
        let transport_yaml = format!(
            "{}log:\n  level: trace\n",
            e2e::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"))
        );
        // A users entry whose upstream password is wrong: the transport logs in with it and
        // the server refuses.
        let sidecar_yaml = format!(
            "{}  - name: mapped\n    password: mapped-local-6\n    upstream: main\n    upstream_user: {USER}\n    upstream_password: upstream-secret-9\nlog:\n  level: trace\nauth:\n  mode: passthrough\n",
            sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), TOKEN)
                .replace("127.0.0.1:0", &format!("127.0.0.1:{sidecar_port}"))
        );
        let transport = Proc::start("transport", &transport_yaml, "secrets");
        wait_port(transport_port).await;
        let sidecar = Proc::start("sidecar", &sidecar_yaml, "secrets");
        wait_port(sidecar_port).await;

        // A full session, a failed login, and an upstream refusal.
        let mut c = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("login");
        c.query_drop("SELECT 1").await.expect("query");
        c.disconnect().await.expect("quit");
        assert!(Conn::new(opts(sidecar_port, Some(DATABASE)).pass(Some("wrong-password-x"))).await.is_err());
        // Passthrough logins: relayed, the password never leaves the client in clear.
        let user = e2e::create_user("pt_secret", "passthrough-secret-7").await;
        let pt = e2e::opts_as(sidecar_port, &user, "passthrough-secret-7", Some(DATABASE));
        Conn::new(pt.clone()).await.expect("passthrough login").disconnect().await.expect("quit");
        assert!(Conn::new(pt.pass(Some("passthrough-wrong-8"))).await.is_err());
        let mapped = e2e::opts_as(sidecar_port, "mapped", "mapped-local-6", Some(DATABASE));
        let refused = sidecar.log_count("login refused by the upstream");
        match Conn::new(mapped).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1045, "{}", e.message),
            other => panic!("expected the upstream's 1045, got {:?}", other.map(|_| ())),
        }
        // Its line is the last the test makes: once it is there, every line is.
        sidecar.log_grows("login refused by the upstream", refused).await;

        let logs = format!(
            "{}\n{}",
            std::fs::read_to_string(&transport.log).expect("transport log"),
            std::fs::read_to_string(&sidecar.log).expect("sidecar log")
        );
        assert!(logs.contains("client quit") && logs.contains("login refused"), "debug logging really ran:\n{logs}");
        for secret in [PASSWORD, TOKEN, "wrong-password-x", "upstream-secret-9", "passthrough-secret-7", "passthrough-wrong-8", "mapped-local-6"] {
            assert!(!logs.contains(secret), "{secret:?} appears in the logs");
        }
        assert!(logs.contains(USER), "logs do name the user");
    })
    .await;
}

#[tokio::test]
async fn unauthenticated_callers_learn_nothing_about_upstreams() {
    within(60, async {
        let transport_port = free_port();
        let yaml = e2e::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"));
        let _transport = Proc::start("transport", &yaml, "unauth");
        wait_port(transport_port).await;
        let upstream_port = mysql_port().to_string();
        for path in ["/metrics", "/v1/relay", "/v1/keepalive", "/v1/sessions/0123456789abcdef0123456789abcdef/command"] {
            for method in ["GET", "POST"] {
                let (status, text) = raw_request(transport_port, &format!("{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")).await;
                assert_eq!(status, 401, "{method} {path}: {text}");
                assert!(!text.contains(&upstream_port) && !text.contains("main") && !text.contains("MariaDB"), "{method} {path} leaks: {text}");
            }
        }
        // Readiness answers without a token, but says only whether the transport is ready;
        // a stream needs a token too.
        let (status, text) = raw_request(transport_port, "GET /v1/ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await;
        assert!(status == 200 || status == 503, "{text}");
        assert!(!text.contains("main") && !text.contains("upstreams") && !text.contains("parked"), "/v1/ready leaks: {text}");
        let upgrade = "GET /v1/stream HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: sqltunnel.v3\r\n\r\n";
        assert_eq!(raw_request(transport_port, upgrade).await.0, 401, "a stream without a token");
    })
    .await;
}

#[tokio::test]
async fn a_session_answers_only_the_token_that_opened_it() {
    within(60, async {
        let (alice, bob) = ("alice-T0ken-5Rq8Zm2Xv7Lw4Np9", "bob-T0ken-3Hk6Yt1Gf8Sd5Ja2Qe");
        let transport_port = free_port();
        let yaml = e2e::transport_yaml(mysql_port())
            .replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"))
            .replace(&format!("tokens: [{}]", TOKEN), &format!("tokens: [{alice}, {bob}]"));
        let _transport = Proc::start("transport", &yaml, "tokens");
        wait_port(transport_port).await;
        let (status, id, _) = call(transport_port, alice, "POST", "/v1/relay", "{}").await;
        assert_eq!((status, id.len()), (201, 32), "alice opens a session");
        let unknown = "0123456789abcdef0123456789abcdef";
        let login = format!(
            "{{\"user\":\"{}\",\"password\":\"{}\",\"client_flags\":{},\"collation\":45}}",
            USER, PASSWORD, 0x000a_a20d_u32
        );
        for (method, what, body) in
            [("POST", "/login", login.as_str()), ("POST", "/command", "\x01\x00\x00\x00\x0e")]
        {
            let foreign =
                call(transport_port, bob, method, &format!("/v1/sessions/{id}{what}"), body).await;
            let never =
                call(transport_port, bob, method, &format!("/v1/sessions/{unknown}{what}"), body)
                    .await;
            assert_eq!(foreign.0, 404, "bob on alice's session: {what}");
            assert_eq!(foreign, never, "{what}: as unknown as an id never issued");
        }
        let keepalive = format!("{{\"sessions\":[\"{id}\"]}}");
        let (_, _, gone) = call(transport_port, bob, "POST", "/v1/keepalive", &keepalive).await;
        assert!(gone.contains(&id), "bob is told alice's session is gone: {gone}");
        let (status, _, _) =
            call(transport_port, bob, "DELETE", &format!("/v1/sessions/{id}"), "").await;
        assert_eq!(status, 204, "closing is idempotent, and says nothing");
        let (_, _, gone) = call(transport_port, alice, "POST", "/v1/keepalive", &keepalive).await;
        assert!(!gone.contains(&id), "bob's requests did not end alice's session: {gone}");
        let (status, _, answer) =
            call(transport_port, alice, "POST", &format!("/v1/sessions/{id}/login"), &login).await;
        assert_eq!(status, 200, "alice logs in on her session: {answer}");
    })
    .await;
}

/// `token_command`'s stderr was copied to the sidecar's own, which is its log when it runs
/// as a service or with stderr redirected: a helper's debug output that shows its token put
/// the token in the log. Now it is shown only on a terminal.
#[tokio::test]
async fn a_token_commands_stderr_stays_out_of_the_log() {
    within(60, async {
        let (transport_port, sidecar_port) = (free_port(), free_port());
        let yaml = e2e::transport_yaml(mysql_port())
            .replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"));
        let _transport = Proc::start("transport", &yaml, "helper-stderr");
        wait_port(transport_port).await;
        let helper = format!("[sh, -c, 'echo \"debug: got token {TOKEN}\" >&2; echo {TOKEN}']");
        let yaml = sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), TOKEN)
            .replace("127.0.0.1:0", &format!("127.0.0.1:{sidecar_port}"))
            .replace(&format!("  token: {TOKEN}\n"), &format!("  token_command: {helper}\n"));
        let sidecar = Proc::start("sidecar", &yaml, "helper-stderr");
        wait_port(sidecar_port).await;
        let mut c = Conn::new(opts(sidecar_port, Some(DATABASE)))
            .await
            .expect("login with the helper's token");
        c.query_drop("SELECT 1").await.expect("query");
        c.disconnect().await.expect("quit");
        let log = std::fs::read_to_string(&sidecar.log).expect("sidecar log");
        assert!(!log.contains(TOKEN), "the helper's token is in the sidecar's log:\n{log}");
    })
    .await;
}
