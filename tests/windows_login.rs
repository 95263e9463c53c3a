//! `sidecar login --device` with the Windows sidecar under Wine: a person logs in with a code
//! at a real OpenID Provider, the refresh token goes to the Windows Credential Manager (Wine's,
//! not a file), and the Windows sidecar then relays a Linux client with the tokens it renews.

use std::process::{Command, Stdio};
use std::time::Duration;

use e2e::idp::{PEOPLE_CLIENT, Provider, SHORT};
use e2e::processes::{Proc, free_port, wait_port};
use e2e::wine::{WindowsSidecar, appdata};
use e2e::{DATABASE, PASSWORD, USER, mysql_port, opts, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run through scripts/test.sh"))
}

#[tokio::test]
async fn the_windows_sidecar_logs_a_person_in_with_a_code_and_keeps_it_in_the_credential_manager() {
    within(240, async {
        let provider = Provider::for_people("wine-device", 3600);
        let transport_port = free_port();
        let _transport = Proc::start(
            "transport",
            &provider.transport_yaml(transport_port, mysql_port()),
            "wine-login-transport",
        );
        wait_port(transport_port).await;
        let port = free_port();
        let yaml = format!(
            "listen: 127.0.0.1:{port}\ntransport:\n  url: http://127.0.0.1:{transport_port}/\n  connect_timeout: 2s\n  login:\n    issuer: {}\n    client_id: {PEOPLE_CLIENT}\n    resource: {SHORT}\nusers:\n  - name: {USER}\n    password: {PASSWORD}\n    upstream: main\n",
            provider.issuer
        );
        let config = std::env::temp_dir()
            .join(format!("sqltunnel-wine-login-{}.yaml", std::process::id()));
        std::fs::write(&config, &yaml).expect("config");
        // Its output goes to a file (a Wine helper may hold a pipe open past the program).
        let said_at = config.with_extension("said");
        let said_file = std::fs::File::create(&said_at).expect("output file");
        let windows = std::path::PathBuf::from(env("SQLTUNNEL_TEST_WINDOWS_DIR"));
        let mut login = Command::new(env("SQLTUNNEL_TEST_WINE"))
            .arg(windows.join("sidecar.exe"))
            .args(["login", "--device", "--config"])
            .arg(&config)
            .env("WINEDEBUG", "-all")
            .stdin(Stdio::null())
            .stdout(said_file.try_clone().expect("file"))
            .stderr(said_file)
            .spawn()
            .expect("wine");
        let said = || std::fs::read_to_string(&said_at).unwrap_or_default();
        let started = std::time::Instant::now();
        let address = loop {
            let text = said();
            if let Some(at) = text.find("(or open ") {
                let rest = &text[at + 9..];
                break rest[..rest.find(')').expect("address end")].to_owned();
            }
            assert!(started.elapsed() < Duration::from_secs(60), "no code shown: {text}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let person = Command::new(provider.person_browser()).arg(&address).output().expect("browser");
        assert!(person.status.success(), "{}", String::from_utf8_lossy(&person.stdout));
        let status = loop {
            if let Some(status) = login.try_wait().expect("wait") {
                break status;
            }
            assert!(started.elapsed() < Duration::from_secs(120), "login still runs: {}", said());
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let text = said();
        assert!(status.success() && text.contains("Logged in as ada@example.test"), "{text}");
        assert!(text.contains("credential store"), "kept by the Credential Manager: {text}");
        assert!(!appdata().join("sqltunnel").join("logins").exists(), "no file keeps it");

        let config_arg = config.display().to_string();
        let sidecar = WindowsSidecar::start(&["--config", &config_arg], "wine-login");
        sidecar.wait_listening(port).await;
        let mut c = Conn::new(opts(port, Some(DATABASE))).await.expect("a login through the tunnel");
        let id: Option<u64> = c.query_first("SELECT CONNECTION_ID()").await.expect("query");
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let again: Option<u64> = c.query_first("SELECT CONNECTION_ID()").await.expect("query");
        assert_eq!(again, id, "the session outlived a token renewal: {}", sidecar.logged());
        drop(sidecar);
        drop(std::fs::remove_file(&config));
        drop(std::fs::remove_file(&said_at));
    })
    .await;
}
