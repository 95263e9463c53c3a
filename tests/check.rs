//! `sidecar check` against a working transport (directly and through nginx's example config)
//! and against each failure it names: DNS, a refused port, TLS where there is none, an
//! untrusted certificate, one for another name, an expired one, plain HTTP to a TLS port, a
//! wrong token, a wrong path prefix, nginx's 502, nginx's body limit, the transport's own body
//! limit, an unknown or unreachable upstream.
//! Every failure is one line that says the fix, and the exit code says it failed.

use e2e::certs::TestPki;
use e2e::nginx::{Nginx, default_config, example_config};
use e2e::processes::{free_port, sidecar_check};
use e2e::{TOKEN, Tunnel, direct, mysql_port, sidecar_yaml, transport_yaml};
use mysql_async::prelude::Queryable;
use tokio_util::sync::CancellationToken;

/// What `sidecar check` printed, and whether it exited 0.
struct Report {
    passed: bool,
    text: String,
}

impl Report {
    /// The line of `step` with `outcome` (`ok`, `FAIL`), if printed.
    fn line(&self, outcome: &str, step: &str) -> Option<&str> {
        self.text.lines().find(|l| {
            l.split_whitespace().next() == Some(outcome) && l[5..].trim_start().starts_with(step)
        })
    }

    /// Asserts the check failed at `step` with one line that has `words` and a fix, and that
    /// it was the only failure.
    fn assert_fails(&self, step: &str, words: &str) {
        assert!(!self.passed, "the check passed:\n{}", self.text);
        let line =
            self.line("FAIL", step).unwrap_or_else(|| panic!("no FAIL {step}:\n{}", self.text));
        assert!(line.contains(words), "{line:?} lacks {words:?}");
        assert!(line.contains("Fix: "), "{line:?} says no fix");
        assert_eq!(self.text.matches("FAIL").count(), 1, "{}", self.text);
    }
}

/// Runs `sidecar check` on `yaml`.
async fn check(yaml: &str) -> Report {
    let (passed, text) = sidecar_check(yaml).await;
    Report { passed, text }
}

/// A transport alone, in-process, from `yaml`; its port.
fn transport(yaml: &str, shutdown: &CancellationToken) -> u16 {
    let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let config: transport::TransportConfig = common::config::parse_yaml(yaml).expect("yaml");
    config.validate().expect("valid");
    tokio::spawn(transport::run(listener, config, shutdown.clone()));
    port
}

#[tokio::test]
async fn a_working_transport_passes_every_step() {
    let tunnel = Tunnel::start().await;
    let report = check(&sidecar_yaml(&format!("http://{}/", tunnel.transport), TOKEN)).await;
    assert!(report.passed, "{}", report.text);
    for step in [
        "dns",
        "connect",
        "tls",
        "transport",
        "round trip",
        "token",
        "stream",
        "upstream",
        "body limit",
    ] {
        assert!(report.line("ok", step).is_some(), "no ok {step}:\n{}", report.text);
    }
    let version: String =
        direct().await.query_first("SELECT VERSION()").await.expect("version").expect("row");
    let upstream = report.line("ok", "upstream").unwrap_or_default();
    assert!(upstream.ends_with(&format!("main: server {version}")), "{upstream:?} vs {version}");
    let round_trip = report.line("ok", "round trip").unwrap_or_default();
    assert!(round_trip.contains(" ms over 5 requests"), "{round_trip:?}");
}

#[tokio::test]
async fn each_failure_of_the_way_there_is_named_with_its_fix() {
    let shutdown = CancellationToken::new();
    let port = transport(&transport_yaml(mysql_port()), &shutdown);
    let at = |url: &str, token: &str| sidecar_yaml(url, token);
    check(&at(&format!("http://127.0.0.1:{port}/"), "not-the-token"))
        .await
        .assert_fails("token", "refused the token");
    check(&at(&format!("http://127.0.0.1:{}/", free_port()), TOKEN))
        .await
        .assert_fails("connect", "refused the connection");
    check(&at("http://no-such-transport.invalid:8080/", TOKEN))
        .await
        .assert_fails("dns", "no-such-transport.invalid");
    check(&at(&format!("https://127.0.0.1:{port}/"), TOKEN))
        .await
        .assert_fails("tls", "does not speak TLS");
    shutdown.cancel();
}

#[tokio::test]
async fn certificates_and_plain_http_to_tls_are_named() {
    let pki = TestPki::new("check");
    let shutdown = CancellationToken::new();
    let yaml = format!(
        "{}tls:\n  cert_file: {}\n  key_file: {}\n",
        transport_yaml(mysql_port()),
        pki.server_cert.display(),
        pki.server_key.display()
    );
    let port = transport(&yaml, &shutdown);
    let https = format!("https://127.0.0.1:{port}/");
    let with_ca = |ca: &std::path::Path| {
        let tls = format!("  connect_timeout: 2s\n  tls:\n    ca_file: {}\n", ca.display());
        sidecar_yaml(&https, TOKEN).replace("  connect_timeout: 2s\n", &tls)
    };
    let trusted = check(&with_ca(&pki.ca)).await;
    assert!(trusted.passed, "{}", trusted.text);
    let tls = trusted.line("ok", "tls").unwrap_or_default();
    assert!(tls.contains("certificate valid"), "{}", trusted.text);
    check(&with_ca(&pki.other_ca)).await.assert_fails("certificate", "transport.tls.ca_file");
    // A certificate for another name, and an expired one, from the trusted CA.
    for ((cert, key), words) in
        [(&pki.wrong_name, "not valid for the name"), (&pki.expired, "validity dates")]
    {
        let yaml = format!(
            "{}tls:\n  cert_file: {}\n  key_file: {}\n",
            transport_yaml(mysql_port()),
            cert.display(),
            key.display()
        );
        let port = transport(&yaml, &shutdown);
        let url = format!("https://127.0.0.1:{port}/");
        let tls = format!("  connect_timeout: 2s\n  tls:\n    ca_file: {}\n", pki.ca.display());
        let sidecar = sidecar_yaml(&url, TOKEN).replace("  connect_timeout: 2s\n", &tls);
        check(&sidecar).await.assert_fails("certificate", words);
    }
    check(&sidecar_yaml(&format!("http://127.0.0.1:{port}/"), TOKEN))
        .await
        .assert_fails("transport", "use https://");
    shutdown.cancel();
}

#[tokio::test]
async fn upstreams_that_are_unknown_or_unreachable_are_named() {
    let shutdown = CancellationToken::new();
    let dead = free_port();
    let yaml = format!(
        "{}  - name: gone\n    address: 127.0.0.1:{dead}\n",
        transport_yaml(mysql_port()).replace("session_timeout: 30s\n", "")
    );
    let port = transport(&format!("{yaml}session_timeout: 30s\n"), &shutdown);
    let url = format!("http://127.0.0.1:{port}/");
    let report = check(&sidecar_yaml(&url, TOKEN)).await;
    report.assert_fails("upstream", "gone: cannot be reached");
    assert!(report.line("ok", "upstream").is_some_and(|l| l.contains("main: server")));
    // The rest of the way is still checked after an upstream failed.
    assert!(report.line("ok", "body limit").is_some(), "{}", report.text);
    let port = transport(&transport_yaml(mysql_port()), &shutdown);
    let unknown = sidecar_yaml(&format!("http://127.0.0.1:{port}/"), TOKEN)
        .replace("upstream: main", "upstream: mian");
    check(&unknown).await.assert_fails("upstream", "\"mian\"");
    shutdown.cancel();
}

#[tokio::test]
async fn the_transports_own_body_limit_is_named() {
    let shutdown = CancellationToken::new();
    let small = format!("{}max_request_bytes: 1048576\n", transport_yaml(mysql_port()));
    let port = transport(&small, &shutdown);
    check(&sidecar_yaml(&format!("http://127.0.0.1:{port}/"), TOKEN))
        .await
        .assert_fails("body limit", "max_request_bytes");
    shutdown.cancel();
}

#[tokio::test]
async fn through_nginx_the_path_the_body_limit_and_a_dead_transport_are_named() {
    let shutdown = CancellationToken::new();
    let port = transport(&transport_yaml(mysql_port()), &shutdown);
    // The example config passes every step.
    let nginx_port = Nginx::port();
    let nginx = Nginx::start(&example_config(&[port], nginx_port), nginx_port).await;
    let good =
        check(&sidecar_yaml(&format!("http://127.0.0.1:{nginx_port}/db-tunnel/"), TOKEN)).await;
    assert!(good.passed, "{}", good.text);
    let stream = good.line("ok", "stream").unwrap_or_default();
    assert!(stream.contains("passes WebSocket upgrades"), "{}", good.text);
    check(&sidecar_yaml(&format!("http://127.0.0.1:{nginx_port}/"), TOKEN))
        .await
        .assert_fails("path", "404");
    drop(nginx);
    // nginx's defaults: a 1 MB body limit, and no upgrade passed (a warning, with the fix).
    let nginx_port = Nginx::port();
    let _nginx = Nginx::start(&default_config(port, nginx_port, ""), nginx_port).await;
    let defaults = sidecar_yaml(&format!("http://127.0.0.1:{nginx_port}/db-tunnel/"), TOKEN);
    let report = check(&defaults).await;
    report.assert_fails("body limit", "client_max_body_size 64m");
    let stream = report.line("warn", "stream").unwrap_or_default();
    assert!(stream.contains("426") && stream.contains("proxy_set_header Upgrade"), "{stream}");
    // Required, the refusal fails the first step that needs the transport's API.
    let required =
        defaults.replace("  connect_timeout: 2s\n", "  connect_timeout: 2s\n  stream: on\n");
    let report = check(&required).await;
    assert!(!report.passed, "{}", report.text);
    let fail = report.text.lines().find(|l| l.starts_with("FAIL")).unwrap_or_default();
    assert!(fail.contains("transport.stream is on") && fail.contains("Upgrade"), "{fail}");
    // nginx in front of nothing.
    let nginx_port = Nginx::port();
    let _dead = Nginx::start(&default_config(free_port(), nginx_port, ""), nginx_port).await;
    check(&sidecar_yaml(&format!("http://127.0.0.1:{nginx_port}/db-tunnel/"), TOKEN))
        .await
        .assert_fails("transport", "502");
    shutdown.cancel();
}
