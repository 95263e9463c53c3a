//! The Windows sidecar, cross-compiled for `x86_64-pc-windows-gnu`, runs under Wine in front
//! of the Linux transport: a Linux `mariadb` client logs in through it, queries, prepares and
//! loads a LOCAL file; the DBeaver replay with Connector/J answers as directly; the config is
//! found in `%APPDATA%\sqltunnel\sidecar.yaml` without `--config`; Ctrl-C drains it; it
//! installs, runs, stops and uninstalls as a Windows service (Wine's service manager); over
//! HTTPS it trusts its `ca_file` and refuses another CA's certificate, and the system store's.

use std::time::Duration;

use e2e::cli::mariadb_async;
use e2e::java::without_connection_tags;
use e2e::processes::{free_port, wait_port};
use e2e::wine::{WindowsSidecar, appdata};
use e2e::{DATABASE, PASSWORD, TOKEN, USER, mysql_port, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tokio_util::sync::CancellationToken;

/// A transport in this process on a free port; its URL and what stops it.
async fn transport() -> (String, CancellationToken) {
    let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let config: transport::TransportConfig =
        common::config::parse_yaml(&e2e::transport_yaml(mysql_port())).expect("yaml");
    let stop = CancellationToken::new();
    tokio::spawn(transport::run(listener, config, stop.clone()));
    (url, stop)
}

/// A sidecar config for the transport at `url`, listening on `port`.
fn config_text(url: &str, port: u16) -> String {
    sidecar_yaml(url, TOKEN).replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
}

#[tokio::test]
async fn the_windows_sidecar_under_wine_relays_a_linux_client() {
    within(240, async {
        let (url, _stop) = transport().await;
        let port = free_port();
        let path = std::env::temp_dir().join(format!("sqltunnel-wine-{}.yaml", std::process::id()));
        std::fs::write(&path, config_text(&url, port)).expect("config");
        let path = path.display().to_string();
        let mut sidecar = WindowsSidecar::start(&["--config", &path], "relay");
        sidecar.wait_listening(port).await;
        let version = sidecar.logged_with("sidecar listening").await;
        assert!(version.contains("sidecar listening"), "{version}");

        // The mariadb CLI: a query, a LOAD DATA LOCAL of a file on this machine.
        let run = mariadb_async(port, USER, PASSWORD, &["-N", "-e", "SELECT 6*7, @@version_comment", DATABASE]).await;
        assert!(run.success && run.stdout.starts_with("42\t"), "{run:?}");
        let file = std::env::temp_dir().join(format!("sqltunnel-wine-{}.csv", std::process::id()));
        let rows: String = (1..=2000).map(|i| format!("{i},row {i}\n")).collect();
        std::fs::write(&file, rows).expect("csv");
        let sql = format!(
            "DROP TABLE IF EXISTS wine_infile; CREATE TABLE wine_infile (id INT, v VARCHAR(20)); LOAD DATA LOCAL INFILE '{}' INTO TABLE wine_infile FIELDS TERMINATED BY ','; SELECT COUNT(*), SUM(id) FROM wine_infile",
            file.display()
        );
        let run = mariadb_async(port, USER, PASSWORD, &["--local-infile=1", "-N", "-e", &sql, DATABASE]).await;
        assert!(run.success, "{}", run.stderr);
        assert_eq!(run.stdout.trim(), "2000\t2001000");
        drop(std::fs::remove_file(&file));

        // Prepared statements (the binary protocol) as directly.
        let mut through = Conn::new(opts(port, Some(DATABASE))).await.expect("login");
        let mut direct = Conn::new(opts(mysql_port(), Some(DATABASE))).await.expect("direct");
        let query = "SELECT ? * 2, CONCAT(?, '!'), ? IS NULL";
        let params = (21, "hello", None::<i32>);
        let a: Option<(i64, String, i64)> = through.exec_first(query, params).await.expect("through");
        let b: Option<(i64, String, i64)> = direct.exec_first(query, params).await.expect("direct");
        assert_eq!(a, b);
        assert_eq!(a, Some((42, "hello!".into(), 1)));
        through.query_drop("DROP TABLE wine_infile").await.expect("drop");
        drop(through.disconnect().await);
        drop(direct.disconnect().await);

        // The DBeaver replay with MariaDB's Connector/J, line by line as directly.
        let classpath = tokio::task::spawn_blocking(|| e2e::java::compile("DbeaverSession")).await.expect("compile");
        let replay = |port: u16| {
            let classpath = classpath.clone();
            async move {
                let args = [port.to_string(), String::new(), "mariadb".to_owned()];
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let output = e2e::java::run(&classpath, "DbeaverSession", &args).await;
                assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
                String::from_utf8_lossy(&output.stdout).into_owned()
            }
        };
        let (direct, through) = (replay(mysql_port()).await, replay(port).await);
        assert!(direct.lines().count() > 50, "{direct}");
        for (d, t) in direct.lines().zip(through.lines()).filter(|(d, _)| !d.starts_with("cancel:")) {
            assert_eq!(without_connection_tags(d), without_connection_tags(t));
        }
        assert_eq!(direct.lines().count(), through.lines().count());

        // Ctrl-C: the sidecar drains and exits cleanly.
        let mut idle = Conn::new(opts(port, Some(DATABASE))).await.expect("login");
        idle.query_drop("DO 1").await.expect("query");
        assert!(sidecar.ctrl_c(), "a clean exit on Ctrl-C: {}", sidecar.logged());
        let said = sidecar.logged();
        assert!(said.contains("sidecar shutting down") && said.contains("sidecar stopped"), "{said}");
    })
    .await;
}

#[tokio::test]
async fn the_windows_sidecar_reads_its_config_from_appdata() {
    within(60, async {
        let (url, _stop) = transport().await;
        let port = free_port();
        let dir = appdata().join("sqltunnel");
        std::fs::create_dir_all(&dir).expect("appdata");
        std::fs::write(dir.join("sidecar.yaml"), config_text(&url, port)).expect("config");
        let sidecar = WindowsSidecar::start(&[], "appdata");
        sidecar.wait_listening(port).await;
        let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("login");
        let n: Option<i64> = conn.query_first("SELECT 1").await.expect("query");
        assert_eq!(n, Some(1));
        drop(conn);
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(sidecar);
        drop(std::fs::remove_file(dir.join("sidecar.yaml")));
    })
    .await;
}

/// Runs `sidecar.exe service …` under Wine; its exit success and output.
fn service(args: &[&str]) -> (bool, String) {
    let dir = std::path::PathBuf::from(std::env::var("SQLTUNNEL_TEST_WINDOWS_DIR").expect("dir"));
    // Its output goes to a file, not a pipe: a Wine helper the command leaves behind (such as
    // `start.exe`) may hold a pipe open long after the command ended, and a read to its end
    // would wait for it.
    let said_at =
        std::env::temp_dir().join(format!("sqltunnel-service-said-{}", std::process::id()));
    let said_file = std::fs::File::create(&said_at).expect("output file");
    let mut child = std::process::Command::new(std::env::var("SQLTUNNEL_TEST_WINE").expect("wine"))
        .arg(dir.join("sidecar.exe"))
        .arg("service")
        .args(args)
        .env("WINEDEBUG", "-all")
        .stdin(std::process::Stdio::null())
        .stdout(said_file.try_clone().expect("output file"))
        .stderr(said_file)
        .spawn()
        .expect("wine");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(60) {
            drop(child.kill());
            drop(child.wait());
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = std::fs::read_to_string(&said_at).unwrap_or_default();
    drop(std::fs::remove_file(&said_at));
    match status {
        Some(status) => (status.success(), said),
        None => (false, format!("`service {}` did not end within 60 s: {said}", args.join(" "))),
    }
}

#[tokio::test]
async fn the_windows_sidecar_installs_runs_and_stops_as_a_service() {
    within(120, async {
        let (url, _stop) = transport().await;
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sqltunnel-service-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let config = dir.join("sidecar.yaml");
        // The token in a file: the service, not the installer, finds it missing below.
        let token_file = dir.join("token");
        std::fs::write(&token_file, TOKEN).expect("token");
        let text = config_text(&url, port).replace(
            &format!("  token: {TOKEN}\n"),
            &format!("  token_file: {}\n", token_file.display()),
        );
        std::fs::write(&config, text).expect("config");
        let config = config.display().to_string();
        let _wine = e2e::wine::KeepWineUp::start();
        // One left by an earlier run that failed half-way goes first.
        drop(service(&["uninstall"]));
        let (bad, said) = service(&["install", "--config", "/nonexistent/sidecar.yaml"]);
        assert!(
            !bad && said.contains("nonexistent"),
            "a config that does not load is refused: {said}"
        );
        let (ok, said) = service(&["install", "--config", &config]);
        assert!(ok && said.contains("installed sqltunnel-sidecar"), "{said}");
        let (ok, said) = service(&["start"]);
        assert!(ok, "{said}");
        wait_port(port).await;
        let mut conn =
            Conn::new(opts(port, Some(DATABASE))).await.expect("login through the service");
        let n: Option<i64> = conn.query_first("SELECT 2+2").await.expect("query");
        assert_eq!(n, Some(4));
        drop(conn.disconnect().await);
        let (ok, said) = service(&["stop"]);
        assert!(ok, "{said}");
        let started = std::time::Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            assert!(started.elapsed() < Duration::from_secs(30), "the service stopped listening");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The drain ends with its last line in the service's log, beside its config.
        let log = loop {
            let log = std::fs::read_to_string(dir.join("sidecar.log")).unwrap_or_default();
            if log.contains("sidecar stopped") || started.elapsed() > Duration::from_secs(30) {
                break log;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(log.contains("sidecar listening") && log.contains("sidecar stopped"), "{log}");
        // A start that fails says so, and why, there and in the log: its port taken, then
        // its token file gone (as for LocalSystem, which cannot read a user's file).
        let taken = std::net::TcpListener::bind(("127.0.0.1", port)).expect("take the port");
        let (ok, said) = service(&["start"]);
        assert!(!ok && said.contains("did not start") && said.contains("cannot listen"), "{said}");
        drop(taken);
        std::fs::remove_file(&token_file).expect("remove the token");
        let (ok, said) = service(&["start"]);
        assert!(!ok && said.contains(&token_file.display().to_string()), "{said}");
        let log = std::fs::read_to_string(dir.join("sidecar.log")).unwrap_or_default();
        assert_eq!(log.matches("could not start").count(), 2, "{log}");
        let (ok, said) = service(&["uninstall"]);
        assert!(ok && said.contains("removed"), "{said}");
        let (ok, _) = service(&["start"]);
        assert!(!ok, "no service once removed");
        drop(std::fs::remove_dir_all(&dir));
    })
    .await;
}

#[tokio::test]
async fn the_windows_sidecar_reaches_an_https_transport_and_refuses_an_untrusted_one() {
    within(90, async {
        let pki = e2e::certs::TestPki::new("wine-https");
        let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let url = format!("https://{}/", listener.local_addr().expect("addr"));
        let yaml = format!(
            "{}tls:\n  cert_file: {}\n  key_file: {}\n",
            e2e::transport_yaml(mysql_port()),
            pki.server_cert.display(),
            pki.server_key.display()
        );
        let config: transport::TransportConfig = common::config::parse_yaml(&yaml).expect("yaml");
        let stop = CancellationToken::new();
        tokio::spawn(transport::run(listener, config, stop.clone()));
        // Trusting the test CA; another CA; the system's roots (Windows' certificate store,
        // read through rustls-native-certs: Wine's holds the host's roots, not the test CA).
        for (ca, trusted) in [(Some(&pki.ca), true), (Some(&pki.other_ca), false), (None, false)] {
            let port = free_port();
            let tls =
                ca.map(|ca| format!("  tls:\n    ca_file: {}\n", ca.display())).unwrap_or_default();
            let text = config_text(&url, port).replace("  token:", &format!("{tls}  token:"));
            let path = std::env::temp_dir()
                .join(format!("sqltunnel-wine-https-{}-{port}.yaml", std::process::id()));
            std::fs::write(&path, text).expect("config");
            let path = path.display().to_string();
            let sidecar = WindowsSidecar::start(&["--config", &path], &format!("https-{port}"));
            sidecar.wait_listening(port).await;
            let login = Conn::new(opts(port, Some(DATABASE))).await;
            if trusted {
                let mut conn = login.expect("login over HTTPS");
                let n: Option<i64> = conn.query_first("SELECT 40 + 2").await.expect("query");
                assert_eq!(n, Some(42));
            } else {
                let said = login.expect_err("an untrusted certificate").to_string();
                assert!(said.contains("certificate") || said.contains("TLS"), "{said}");
            }
            drop(sidecar);
        }
        stop.cancel();
    })
    .await;
}
