//! `sidecar login`: a person logs in at a real OpenID Provider (npm's `oidc-provider`, whose
//! pages `tests/idp/person.mjs` goes through as the person's browser would), with the
//! authorization code and PKCE through `$BROWSER` and a loopback redirect, or with the device
//! flow; the refresh token is kept in a file only its owner reads; the running sidecar renews
//! its access tokens silently (a session outlives several), and once the login is over, a
//! client is told to run `sidecar login`.

use std::process::{Command, Stdio};
use std::time::Duration;

use e2e::idp::{PEOPLE_CLIENT as CLIENT, Provider, SHORT};
use e2e::processes::{Proc, bin_dir, free_port, wait_port};
use e2e::{DATABASE, PASSWORD, USER, mysql_port, opts, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// A transport on `port` that takes the provider's tokens.
fn transport(port: u16, provider: &Provider) -> Proc {
    let yaml = provider.transport_yaml(port, mysql_port());
    Proc::start("transport", &yaml, &format!("login-transport-{port}"))
}

/// A sidecar config on `port` whose token comes from the person's login (tokens for the
/// 2-second resource: each is renewed within a second).
fn sidecar_yaml(transport_port: u16, port: u16, provider: &Provider) -> String {
    format!(
        "listen: 127.0.0.1:{port}\ntransport:\n  url: http://127.0.0.1:{transport_port}/\n  connect_timeout: 2s\n  login:\n    issuer: {}\n    client_id: {CLIENT}\n    resource: {SHORT}\nusers:\n  - name: {USER}\n    password: {PASSWORD}\n    upstream: main\n",
        provider.issuer
    )
}

/// Where logins are kept for this test (`XDG_CONFIG_HOME`), and the config file.
fn home(tag: &str, yaml: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sqltunnel-login-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("sidecar.yaml");
    std::fs::write(&config, yaml).expect("config");
    (dir.join("config"), config)
}

/// Runs `sidecar ARGS --config CONFIG` with logins kept under `xdg` and `browser` as
/// `$BROWSER`; its exit status and output.
async fn sidecar(
    args: &[&str],
    config: &std::path::Path,
    xdg: &std::path::Path,
    browser: &std::path::Path,
) -> (bool, String) {
    let mut command = Command::new(bin_dir().join("sidecar"));
    command
        .args(args)
        .arg("--config")
        .arg(config)
        .env("XDG_CONFIG_HOME", xdg)
        .env("BROWSER", browser);
    let output = tokio::task::spawn_blocking(move || command.stdin(Stdio::null()).output())
        .await
        .expect("join")
        .expect("run the sidecar");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// The mode of the one login file kept under `xdg`.
fn kept_file_mode(xdg: &std::path::Path) -> u32 {
    let dir = xdg.join("sqltunnel").join("logins");
    let files: Vec<_> = std::fs::read_dir(&dir).expect("logins dir").flatten().collect();
    assert_eq!(files.len(), 1, "one login kept in {}", dir.display());
    let meta = files[0].metadata().expect("meta");
    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777
}

#[tokio::test]
async fn a_person_logs_in_in_the_browser_and_a_session_outlives_token_renewals() {
    within(120, async {
        let provider = Provider::for_people("browser", 3600);
        let transport_port = free_port();
        let _transport = transport(transport_port, &provider);
        wait_port(transport_port).await;
        let port = free_port();
        let yaml = sidecar_yaml(transport_port, port, &provider);
        let (xdg, config) = home("browser", &yaml);
        let browser = provider.person_browser();
        let (ok, said) = sidecar(&["login"], &config, &xdg, &browser).await;
        assert!(ok, "sidecar login: {said}");
        assert!(said.contains("Logged in as ada@example.test"), "{said}");
        assert_eq!(kept_file_mode(&xdg), 0o600, "the refresh token is its owner's only");
        let (ok, said) = sidecar(&["check"], &config, &xdg, &browser).await;
        assert!(said.contains("logged in as ada@example.test"), "sidecar check ({ok}): {said}");

        let xdg_text = xdg.display().to_string();
        let _sidecar = Proc::start_with_env(
            "sidecar",
            &yaml,
            "login-sidecar",
            &[("XDG_CONFIG_HOME", &xdg_text)],
        );
        wait_port(port).await;
        let mut c =
            Conn::new(opts(port, Some(DATABASE))).await.expect("a login through the tunnel");
        let id: Option<u64> = c.query_first("SELECT CONNECTION_ID()").await.expect("query");
        // Each access token lives 2 s: the session outlives several.
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(2_500)).await;
            let again: Option<u64> =
                c.query_first("SELECT CONNECTION_ID()").await.expect("query after a renewal");
            assert_eq!(again, id, "the same session");
        }
        let mut other = Conn::new(opts(port, Some(DATABASE))).await.expect("a second login");
        other.query_drop("SELECT 1").await.expect("query");

        // Logged out: once the last token has expired, a new client is told to log in again.
        let (ok, said) = sidecar(&["logout"], &config, &xdg, &browser).await;
        assert!(ok && said.contains("Logged out"), "{said}");
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let refused = Conn::new(opts(port, Some(DATABASE))).await.map(drop);
        let message = format!("{refused:?}");
        assert!(message.contains("run `sidecar login`"), "{message}");
        drop(std::fs::remove_dir_all(xdg.parent().expect("dir")));
    })
    .await;
}

#[tokio::test]
async fn a_person_logs_in_with_a_code_on_another_device_until_the_login_ends() {
    within(120, async {
        // Refresh tokens live 8 s: the login ends while the sidecar runs.
        let provider = Provider::for_people("device", 8);
        let transport_port = free_port();
        let _transport = transport(transport_port, &provider);
        wait_port(transport_port).await;
        let port = free_port();
        let yaml = sidecar_yaml(transport_port, port, &provider);
        let (xdg, config) = home("device", &yaml);
        let browser = provider.person_browser();
        // No browser here: the code is read off the sidecar's output and entered elsewhere.
        let mut login = tokio::process::Command::new(bin_dir().join("sidecar"))
            .args(["login", "--device", "--config"])
            .arg(&config)
            .env("XDG_CONFIG_HOME", &xdg)
            .env("BROWSER", "/bin/false")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sidecar login --device");
        let stdout = login.stdout.take().expect("stdout");
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        let mut said = String::new();
        let address = loop {
            let line = lines
                .next_line()
                .await
                .expect("read")
                .unwrap_or_else(|| panic!("no address in: {said}"));
            said.push_str(&line);
            said.push('\n');
            if let Some(at) = line.find("(or open ") {
                break line[at + 9..].trim_end_matches(')').to_owned();
            }
        };
        assert!(said.contains("enter the code"), "{said}");
        let person = Command::new(&browser).arg(&address).output().expect("the person's browser");
        assert!(person.status.success(), "{}", String::from_utf8_lossy(&person.stdout));
        while let Some(line) = lines.next_line().await.expect("read") {
            said.push_str(&line);
        }
        let status = login.wait().await.expect("wait");
        assert!(status.success() && said.contains("Logged in as ada@example.test"), "{said}");

        let xdg_text = xdg.display().to_string();
        let _sidecar = Proc::start_with_env(
            "sidecar",
            &yaml,
            "login-device",
            &[("XDG_CONFIG_HOME", &xdg_text)],
        );
        wait_port(port).await;
        let mut c =
            Conn::new(opts(port, Some(DATABASE))).await.expect("a login through the tunnel");
        c.query_drop("SELECT 1").await.expect("query");
        // The refresh token expires: the next token cannot be had, and a client is told why.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let refused = Conn::new(opts(port, Some(DATABASE))).await.map(drop);
        let message = format!("{refused:?}");
        assert!(message.contains("run `sidecar login`") && message.contains("1045"), "{message}");
        drop(std::fs::remove_dir_all(xdg.parent().expect("dir")));
    })
    .await;
}
