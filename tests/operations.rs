//! What an operator relies on: liveness and readiness (a database that stops makes the
//! transport not ready within seconds, and ready again after), HEAD on both, metrics a
//! Prometheus parser reads, log files without terminal escapes and with one line per command
//! naming its session, and log filters checked strictly (`log.level`, `RUST_LOG`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::http::raw_request;
use e2e::processes::{ProcTunnel, bin_dir, free_port};
use e2e::{PASSWORD, TOKEN, USER, mysql_port, within};
use tokio::net::{TcpListener, TcpStream};

/// A TCP forwarder to MariaDB that can be stopped (connections refused, open ones cut) and
/// started again on the same port: the database as the transport sees it.
struct Switch {
    port: u16,
    up: Arc<AtomicBool>,
}

impl Switch {
    fn start() -> Switch {
        let port = free_port();
        let up = Arc::new(AtomicBool::new(true));
        let flag = up.clone();
        tokio::spawn(async move {
            loop {
                if !flag.load(Ordering::Acquire) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
                while flag.load(Ordering::Acquire) {
                    let accepted =
                        tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
                    let Ok(Ok((mut client, _))) = accepted else { continue };
                    let flag = flag.clone();
                    tokio::spawn(async move {
                        let Ok(mut db) = TcpStream::connect(("127.0.0.1", mysql_port())).await
                        else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut db) => {}
                            () = async { while flag.load(Ordering::Acquire) {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            } } => {}
                        }
                    });
                }
            }
        });
        Switch { port, up }
    }

    fn set(&self, up: bool) {
        self.up.store(up, Ordering::Release);
    }
}

/// GET (or HEAD) a path on the transport without a token: (status, whole answer).
async fn get(port: u16, method: &str, path: &str) -> (u16, String) {
    raw_request(port, &format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"))
        .await
}

/// Waits until `/v1/ready` answers `status`; returns how long that took.
async fn until_ready_is(port: u16, status: u16) -> Duration {
    let start = Instant::now();
    loop {
        if get(port, "GET", "/v1/ready").await.0 == status {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(15), "/v1/ready never answered {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn readiness_follows_the_database_and_health_does_not() {
    within(90, async {
        let switch = Switch::start();
        let db = switch.port;
        let tunnel = ProcTunnel::start(
            "ready",
            move |t| {
                t.replace(&format!("127.0.0.1:{}", mysql_port()), &format!("127.0.0.1:{db}"))
                    .replace(
                        "    address:",
                        &format!(
                            "    admin_user: {USER}\n    admin_password: {PASSWORD}\n    address:"
                        ),
                    )
            },
            |s| s,
        )
        .await;
        let port = tunnel.transport_port;
        until_ready_is(port, 200).await;
        let (status, text) = get(port, "HEAD", "/v1/ready").await;
        assert_eq!(status, 200, "HEAD works: {text}");
        assert!(text.ends_with("\r\n\r\n"), "HEAD has no body: {text:?}");
        let (status, _) = get(port, "HEAD", "/v1/health").await;
        assert_eq!(status, 200, "HEAD /v1/health needs no token");

        switch.set(false);
        let took = until_ready_is(port, 503).await;
        assert!(took < Duration::from_secs(8), "not ready after {took:?}");
        let (_, text) = get(port, "GET", "/v1/ready").await;
        assert!(text.contains("not ready") && !text.contains("main"), "no detail without a token: {text}");
        let detailed = format!("GET /v1/ready HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n");
        let (_, text) = raw_request(port, &detailed).await;
        assert!(text.contains("\"ready\":false") && text.contains("main"), "{text}");
        assert_eq!(get(port, "GET", "/v1/health").await.0, 200, "still alive");

        switch.set(true);
        let took = until_ready_is(port, 200).await;
        assert!(took < Duration::from_secs(8), "ready again after {took:?}");

        for proc in [&tunnel.transport, &tunnel.sidecar] {
            let log = std::fs::read_to_string(&proc.log).unwrap_or_default();
            assert!(!log.is_empty() && !log.contains('\u{1b}'), "no terminal escapes: {log}");
            assert!(!log.contains(PASSWORD), "no password in the log");
        }
    })
    .await;
}

/// Runs `bin --check` (or, with `rust_log`, starts it under that filter); returns (ok, stderr).
fn run(bin: &str, yaml: &str, rust_log: Option<&str>) -> (bool, String) {
    // Tests run at once in this process: each call its own file.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir()
        .join(format!("sqltunnel-ops-{}-{bin}-{call}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write");
    let mut cmd = std::process::Command::new(bin_dir().join(bin));
    cmd.arg("--config").arg(&path);
    match rust_log {
        Some(filter) => cmd.env("RUST_LOG", filter),
        None => cmd.arg("--check").env_remove("RUST_LOG"),
    };
    let out = cmd.output().expect("run");
    drop(std::fs::remove_file(&path));
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn log_filters_are_checked_strictly() {
    let transport = format!(
        "listen: 127.0.0.1:{}\ntokens: [cHange-Not-7Yt4Re1Wq8Po5Iu2Lk]\nupstreams: [{{name: main, address: '127.0.0.1:3306'}}]\n",
        free_port()
    );
    let sidecar = format!(
        "listen: 127.0.0.1:{}\ntransport: {{url: 'http://127.0.0.1:9/', token: change-me-please}}\n",
        free_port()
    );
    for (bin, yaml) in [("transport", &transport), ("sidecar", &sidecar)] {
        let (ok, err) = run(bin, &format!("{yaml}log: {{level: verbose}}\n"), None);
        assert!(!ok && err.contains("log.level") && err.contains("verbose"), "{bin}: {err}");
        let (ok, err) = run(bin, yaml, Some("info,transport=loud"));
        assert!(!ok && err.contains("RUST_LOG") && err.contains("loud"), "{bin}: {err}");
        let (ok, err) = run(bin, &format!("{yaml}log: {{level: 'warn,sidecar=debug'}}\n"), None);
        assert!(ok, "{bin} accepts a good filter: {err}");
    }
}

/// An exposition (the HTTP answer `text`) read by the Prometheus Python client's OpenMetrics
/// parser: its families by name (type, help, samples), and the parser's output. Every family
/// must have HELP.
async fn parse_metrics(text: &str) -> (serde_json::Map<String, serde_json::Value>, String) {
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    let path = std::env::temp_dir().join(format!(
        "sqltunnel-metrics-{}-{}.txt",
        std::process::id(),
        free_port()
    ));
    std::fs::write(&path, body).expect("write");
    let parsed =
        e2e::clients::python("metrics_check.py", &[path.to_str().unwrap_or_default()]).await;
    drop(std::fs::remove_file(&path));
    let families: serde_json::Value = serde_json::from_str(&parsed).expect("json");
    let families = families.as_object().cloned().unwrap_or_default();
    for (name, family) in &families {
        assert!(!family["help"].as_str().unwrap_or_default().is_empty(), "{name} has HELP");
    }
    (families, parsed)
}

#[tokio::test]
async fn metrics_parse_with_the_prometheus_parser_and_count_what_happened() {
    within(90, async {
        let (metrics_port, sidecar_metrics) = (free_port(), free_port());
        let tunnel = ProcTunnel::start(
            "metrics",
            move |t| {
                format!(
                    "{t}metrics_listen: 127.0.0.1:{metrics_port}\nlog:\n  level: 'info,transport=debug'\n"
                )
            },
            move |s| format!("{s}metrics_listen: 127.0.0.1:{sidecar_metrics}\n"),
        )
        .await;
        let mut conn = mysql_async::Conn::new(e2e::opts(tunnel.sidecar_port, Some(e2e::DATABASE)))
            .await
            .expect("connect");
        for _ in 0..5 {
            mysql_async::prelude::Queryable::query_drop(&mut conn, "SELECT SLEEP(0.01)")
                .await
                .expect("query");
        }
        // Without a token: refused on the API address, served on the metrics address.
        assert_eq!(get(tunnel.transport_port, "GET", "/metrics").await.0, 401);
        let (status, text) = get(metrics_port, "GET", "/metrics").await;
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("application/openmetrics-text"), "{text}");
        assert_eq!(get(metrics_port, "GET", "/v1/relay").await.0, 404, "nothing else there");
        let (families, parsed) = parse_metrics(&text).await;
        let sample = |family: &str, sample: &str| {
            families.get(family).and_then(|f| f["samples"][sample].as_f64()).unwrap_or(-1.0)
        };
        assert!(sample("sqltunnel_commands", "sqltunnel_commands_total") >= 5.0, "{parsed}");
        assert_eq!(
            families["sqltunnel_command_duration_seconds"]["type"].as_str(),
            Some("histogram")
        );
        assert!(
            sample(
                "sqltunnel_command_duration_seconds",
                "sqltunnel_command_duration_seconds_count"
            ) >= 5.0,
            "{parsed}"
        );
        assert!(sample("sqltunnel_answer_bytes", "sqltunnel_answer_bytes_total") > 0.0);
        assert_eq!(sample("sqltunnel_sessions_open", "sqltunnel_sessions_open"), 2.0, "{parsed}");
        assert!(sample("process_resident_memory_bytes", "process_resident_memory_bytes") > 0.0);
        assert_eq!(sample("sqltunnel_upstream_ready", "sqltunnel_upstream_ready"), 1.0);

        // The sidecar's, on its own local address.
        let (status, text) = get(sidecar_metrics, "GET", "/metrics").await;
        assert_eq!(status, 200, "{text}");
        let (sidecar, parsed) = parse_metrics(&text).await;
        let sample = |family: &str, sample: &str| {
            sidecar.get(family).and_then(|f| f["samples"][sample].as_f64()).unwrap_or(-1.0)
        };
        let count = "sqltunnel_sidecar_command_duration_seconds_count";
        assert!(sample("sqltunnel_sidecar_command_duration_seconds", count) >= 5.0, "{parsed}");
        let accepted = "sqltunnel_sidecar_clients_accepted_total";
        assert!(sample("sqltunnel_sidecar_clients_accepted", accepted) >= 1.0, "{parsed}");
        let connects = "sqltunnel_sidecar_transport_connects_total";
        assert!(sample("sqltunnel_sidecar_transport_connects", connects) >= 1.0, "{parsed}");
        assert!(sample("sqltunnel_sidecar_clients_open", "sqltunnel_sidecar_clients_open") >= 1.0);

        // One debug line per command, naming its session, with what it was and how it went.
        let log = std::fs::read_to_string(&tunnel.transport.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().filter(|l| l.contains("command relayed")).collect();
        assert!(lines.len() >= 5, "{log}");
        for line in lines {
            for field in ["session=", "command=Query", "ms=", "bytes=", "end=Done"] {
                assert!(line.contains(field), "{field} in {line}");
            }
        }
        assert!(!log.contains('\u{1b}'), "no terminal escapes");
    })
    .await;
}

#[tokio::test]
async fn a_proxy_without_keep_alive_is_noticed_and_named() {
    within(90, async {
        let tunnel = ProcTunnel::start("churn", |t| t, |s| s).await;
        let port = tunnel.transport_port;
        for _ in 0..210 {
            // A new connection and `Connection: close` for every request, as nginx's defaults.
            let (status, ..) =
                e2e::http::call(port, e2e::TOKEN, "POST", "/v1/keepalive", "{\"sessions\":[]}")
                    .await;
            assert_eq!(status, 200);
        }
        let log = std::fs::read_to_string(&tunnel.transport.log).unwrap_or_default();
        let warnings = log.matches("a proxy in front opens a connection per command").count();
        assert_eq!(warnings, 1, "warned once: {log}");
        assert!(log.contains("keepalive"), "names the fix");
    })
    .await;
}

#[tokio::test]
async fn a_laptop_sidecar_runs_from_flags_alone() {
    within(60, async {
        let tunnel = ProcTunnel::start("flags", |t| t, |s| s).await;
        let home = std::env::temp_dir().join(format!("sqltunnel-home-{}", std::process::id()));
        std::fs::create_dir_all(&home).expect("home");
        let url = format!("http://127.0.0.1:{}/", tunnel.transport_port);
        let sidecar = |args: &[&str]| {
            let mut cmd = std::process::Command::new(bin_dir().join("sidecar"));
            cmd.args(args)
                .env_remove("SQLTUNNEL_CONFIG")
                .env_remove("XDG_CONFIG_HOME")
                .env("HOME", &home)
                .env("SQLTUNNEL_TOKEN", e2e::TOKEN);
            cmd
        };
        // No file anywhere, no flags: a clear error naming both ways.
        let out = sidecar(&["--check"]).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("--transport") && err.contains("--config"),
            "{err}"
        );
        let out = sidecar(&["--transport", &url, "--check"]).output().expect("run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut child = sidecar(&["--transport", &url, "--listen", &listen])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the sidecar");
        e2e::processes::wait_port(port).await;
        let login = mysql_async::Conn::new(
            e2e::opts(port, Some(e2e::DATABASE)).user(Some(USER)).pass(Some(PASSWORD)),
        )
        .await;
        let mut conn = login.expect("a passthrough login through the flag-made sidecar");
        let one: Option<u8> = mysql_async::prelude::Queryable::query_first(&mut conn, "SELECT 1")
            .await
            .expect("query");
        assert_eq!(one, Some(1));
        drop(conn);
        drop(child.kill());
        drop(child.wait());

        // The transport takes no such flags.
        let out = std::process::Command::new(bin_dir().join("transport"))
            .args([
                "--config",
                &tunnel.transport.config.to_string_lossy(),
                "--transport",
                &url,
                "--check",
            ])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("sidecar options"), "{err}");
        drop(std::fs::remove_dir_all(&home));
    })
    .await;
}

#[test]
fn gen_token_prints_a_token_the_transport_takes() {
    let out = std::process::Command::new(bin_dir().join("transport"))
        .arg("gen-token")
        .env_remove("SQLTUNNEL_CONFIG")
        .output()
        .expect("run gen-token");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(token.len(), 64, "{token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    let yaml = format!(
        "listen: 127.0.0.1:{}\ntokens: [{token}]\nupstreams: [{{name: main, address: '127.0.0.1:3306'}}]\n",
        free_port()
    );
    let (ok, stderr) = run("transport", &yaml, None);
    assert!(ok, "the transport takes it: {stderr}");
}
