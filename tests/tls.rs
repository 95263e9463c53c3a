//! HTTPS between sidecar and transport: verified with a CA file, refused with the wrong CA,
//! mutual TLS when the transport asks for a client certificate, and the loud opt-out.

use e2e::certs::TestPki;
use e2e::scripts::DML_SCRIPT;
use e2e::{
    DATABASE, TOKEN, Tunnel, assert_same_answers, compare_script, direct, mysql_ca, mysql_port,
    opts, sidecar_yaml, within,
};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// An HTTPS transport (client certificates required when `mtls`) and a sidecar with `tls`.
async fn https_tunnel(pki: &TestPki, mtls: bool, sidecar_tls: &str) -> Tunnel {
    let listener = common::runtime::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let url = format!("https://127.0.0.1:{}/", listener.local_addr().expect("addr").port());
    let mut transport = format!(
        "{}tls:\n  cert_file: {}\n  key_file: {}\n",
        e2e::transport_yaml(mysql_port()),
        pki.server_cert.display(),
        pki.server_key.display()
    );
    if mtls {
        transport.push_str(&format!("  client_ca_file: {}\n", pki.ca.display()));
    }
    let sidecar = sidecar_yaml(&url, TOKEN).replace(
        "  connect_timeout: 2s\n",
        &format!("  connect_timeout: 2s\n  tls:\n{sidecar_tls}"),
    );
    Tunnel::start_with(listener, &transport, &sidecar).await
}

async fn login_error(tunnel: &Tunnel) -> String {
    match Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1429);
            e.message
        }
        other => panic!("expected a login error, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn https_with_a_ca_file_matches_direct() {
    within(60, async {
        let pki = TestPki::new("ca");
        let tunnel =
            https_tunnel(&pki, false, &format!("    ca_file: {}\n", pki.ca.display())).await;
        let (mut d, mut t) = (direct().await, tunnel.connect().await);
        let (a, b) = compare_script(&mut d, &mut t, DML_SCRIPT).await;
        assert_same_answers(DML_SCRIPT, &a, &b);
    })
    .await;
}

#[tokio::test]
async fn a_certificate_from_an_unknown_ca_is_refused() {
    within(60, async {
        let pki = TestPki::new("wrongca");
        let tunnel =
            https_tunnel(&pki, false, &format!("    ca_file: {}\n", pki.other_ca.display())).await;
        let msg = login_error(&tunnel).await;
        assert!(msg.contains("certificate") && msg.contains("UnknownIssuer"), "{msg}");
    })
    .await;
}

#[tokio::test]
async fn mutual_tls_requires_the_client_certificate() {
    within(60, async {
        let pki = TestPki::new("mtls");
        let without =
            https_tunnel(&pki, true, &format!("    ca_file: {}\n", pki.ca.display())).await;
        let msg = login_error(&without).await;
        assert!(msg.contains("cannot reach the sqltunnel transport"), "{msg}");
        let with = https_tunnel(
            &pki,
            true,
            &format!(
                "    ca_file: {}\n    client_cert_file: {}\n    client_key_file: {}\n",
                pki.ca.display(),
                pki.client_cert.display(),
                pki.client_key.display()
            ),
        )
        .await;
        let mut t = with.connect().await;
        let one: Option<u8> = t.query_first("SELECT 1").await.expect("query over mTLS");
        assert_eq!(one, Some(1));
    })
    .await;
}

#[tokio::test]
async fn skipping_verification_is_possible_only_when_asked() {
    within(60, async {
        let pki = TestPki::new("insecure");
        let tunnel = https_tunnel(&pki, false, "    insecure_skip_verify: true\n").await;
        let mut t = tunnel.connect().await;
        let one: Option<u8> = t.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
    })
    .await;
}

#[tokio::test]
async fn plain_http_to_an_https_transport_fails_clearly() {
    within(60, async {
        let pki = TestPki::new("plain");
        let tls = https_tunnel(&pki, false, &format!("    ca_file: {}\n", pki.ca.display())).await;
        let shutdown = tokio_util::sync::CancellationToken::new();
        let url = format!("http://127.0.0.1:{}/", tls.transport.port());
        let sidecar = Tunnel::start_sidecar(&sidecar_yaml(&url, TOKEN), shutdown.clone()).await;
        match Conn::new(opts(sidecar.port(), Some(DATABASE))).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1429, "{}", e.message),
            other => panic!("expected a login error, got {:?}", other.map(|_| ())),
        }
        shutdown.cancel();
    })
    .await;
}

/// A tunnel whose local login `app` maps to the upstream user `app_tls` (REQUIRE SSL), with
/// `upstream_tls` added to the upstream's config.
async fn tunnel_to_tls_user(upstream_tls: &str) -> Tunnel {
    let port = mysql_port();
    let transport = e2e::transport_yaml(port).replace(
        &format!("    address: 127.0.0.1:{port}\n"),
        &format!("    address: 127.0.0.1:{port}\n{upstream_tls}"),
    );
    Tunnel::start_custom(&transport, |url| {
        sidecar_yaml(url, TOKEN).replace(
            "    upstream: main\n",
            "    upstream: main\n    upstream_user: app_tls\n    upstream_password: app-tls-pw\n",
        )
    })
    .await
}

#[tokio::test]
async fn the_transport_reaches_the_upstream_over_tls_when_configured() {
    within(60, async {
        let tunnel =
            tunnel_to_tls_user(&format!("    tls:\n      ca_file: {}\n", mysql_ca())).await;
        let mut t = tunnel.connect().await;
        let cipher: Option<(String, String)> =
            t.query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'").await.expect("status");
        let cipher = cipher.map(|(_, v)| v).unwrap_or_default();
        assert!(!cipher.is_empty(), "the upstream session is encrypted");

        let plain = tunnel_to_tls_user("").await;
        match Conn::new(opts(plain.sidecar.port(), Some(DATABASE))).await {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!(e.code, 1045, "REQUIRE SSL refuses a plain login: {}", e.message)
            }
            other => panic!("expected 1045, got {:?}", other.map(|_| ())),
        }
    })
    .await;
}

/// An in-process tunnel whose sidecar offers TLS to its clients with `client_tls`.
async fn tunnel_with_client_tls(client_tls: &str) -> Tunnel {
    Tunnel::start_custom(&e2e::transport_yaml(mysql_port()), |url| {
        format!("{}client_tls:\n{client_tls}", sidecar_yaml(url, TOKEN))
    })
    .await
}

#[tokio::test]
async fn clients_can_ask_the_sidecar_for_tls_with_a_generated_certificate() {
    within(60, async {
        let tunnel = tunnel_with_client_tls("  enabled: true\n").await;
        let run = e2e::cli::mariadb_async(
            tunnel.sidecar.port(),
            e2e::USER,
            e2e::PASSWORD,
            &["--ssl", "-e", "status; SELECT 'over tls'"],
        )
        .await;
        assert!(run.success, "{}", run.stderr);
        assert!(
            run.stdout.contains("Cipher in use is"),
            "the client leg is encrypted: {}",
            run.stdout
        );
        assert!(run.stdout.contains("over tls"));
        let plain = e2e::cli::mariadb_async(
            tunnel.sidecar.port(),
            e2e::USER,
            e2e::PASSWORD,
            &["--skip-ssl", "-e", "SELECT 'plain still works'"],
        )
        .await;
        assert!(plain.stdout.contains("plain still works"), "{}", plain.stderr);
    })
    .await;
}

#[tokio::test]
async fn a_configured_client_leg_certificate_verifies() {
    within(60, async {
        let pki = TestPki::new("clientleg");
        let tunnel = tunnel_with_client_tls(&format!(
            "  enabled: true\n  cert_file: {}\n  key_file: {}\n",
            pki.server_cert.display(),
            pki.server_key.display()
        ))
        .await;
        let ssl = mysql_async::SslOpts::default().with_root_certs(vec![pki.ca.clone().into()]);
        let mut t = Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE)).ssl_opts(Some(ssl)))
            .await
            .expect("verified TLS login");
        let one: Option<u8> = t.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
        let wrong =
            mysql_async::SslOpts::default().with_root_certs(vec![pki.other_ca.clone().into()]);
        assert!(
            Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE)).ssl_opts(Some(wrong)))
                .await
                .is_err(),
            "wrong CA refused"
        );
    })
    .await;
}
