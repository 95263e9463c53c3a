//! The transport is a door into a private network: no secret ever reaches a log, and an
//! unauthenticated caller learns nothing about what is behind it.

use e2e::processes::{Proc, free_port, wait_port};
use e2e::{DATABASE, PASSWORD, TOKEN, USER, mysql_port, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn passwords_and_tokens_never_reach_the_logs() {
    within(120, async {
        let (transport_port, sidecar_port) = (free_port(), free_port());
        let transport_yaml = format!(
            "{}log:\n  level: trace\n",
            e2e::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"))
        );
        let key_file = std::env::temp_dir().join(format!("sqltunnel-sec-{}.pem", std::process::id()));
        let key_path = key_file.to_str().expect("utf-8 path");
        let genpkey = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key_path])
            .output()
            .expect("openssl");
        assert!(genpkey.status.success());
        let private_pem = std::fs::read_to_string(&key_file).expect("key");
        let sidecar_yaml = format!(
            "{}log:\n  level: trace\nauth:\n  mode: passthrough\n  rsa_key_file: {key_path}\n",
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
        // Passthrough logins: the password travels RSA-encrypted to the sidecar, then upstream.
        let user = e2e::create_user("pt_secret", "passthrough-secret-7").await;
        let pt = e2e::opts_as(sidecar_port, &user, "passthrough-secret-7", Some(DATABASE));
        Conn::new(pt.clone()).await.expect("passthrough login").disconnect().await.expect("quit");
        assert!(Conn::new(pt.pass(Some("passthrough-wrong-8"))).await.is_err());
        let body = r#"{"upstream":"main","user":"app","password":"upstream-secret-9","client_flags":0,"collation":45}"#;
        let request = format!(
            "POST /v1/sessions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let (status, _) = raw_request(transport_port, &request).await;
        assert_eq!(status, 422, "the upstream refused the wrong password");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;

        let logs = format!(
            "{}\n{}",
            std::fs::read_to_string(&transport.log).expect("transport log"),
            std::fs::read_to_string(&sidecar.log).expect("sidecar log")
        );
        assert!(logs.contains("client quit") && logs.contains("login refused"), "debug logging really ran:\n{logs}");
        for secret in [PASSWORD, TOKEN, "wrong-password-x", "upstream-secret-9", "passthrough-secret-7", "passthrough-wrong-8"] {
            assert!(!logs.contains(secret), "{secret:?} appears in the logs");
        }
        assert!(logs.contains("fingerprint"), "the key's fingerprint is logged");
        for line in private_pem.lines().filter(|l| !l.starts_with("-----")) {
            assert!(!logs.contains(line), "a line of the RSA private key appears in the logs");
        }
        assert!(logs.contains(USER), "logs do name the user");
    })
    .await;
}

async fn raw_request(port: u16, request: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("send");
    let mut out = String::new();
    drop(s.read_to_string(&mut out).await);
    let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out)
}

#[tokio::test]
async fn unauthenticated_callers_learn_nothing_about_upstreams() {
    within(60, async {
        let transport_port = free_port();
        let yaml = e2e::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"));
        let _transport = Proc::start("transport", &yaml, "unauth");
        wait_port(transport_port).await;
        let upstream_port = mysql_port().to_string();
        for path in ["/v1/upstreams", "/metrics", "/v1/sessions", "/v1/keepalive", "/v1/sessions/0123456789abcdef0123456789abcdef/command"] {
            for method in ["GET", "POST"] {
                let (status, text) = raw_request(transport_port, &format!("{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")).await;
                assert_eq!(status, 401, "{method} {path}: {text}");
                assert!(!text.contains(&upstream_port) && !text.contains("main") && !text.contains("MariaDB"), "{method} {path} leaks: {text}");
            }
        }
    })
    .await;
}
