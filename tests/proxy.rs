//! The sidecar reaches the transport through a real forward proxy (Debian's tinyproxy) with
//! CONNECT, as on a corporate laptop: sessions work through it, a proxy that wants credentials
//! gets them from the proxy URL, a proxy that is down or refuses is named in the error, and
//! `sidecar check` walks through the proxy and names what it refuses.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use e2e::processes::{free_port, sidecar_check, wait_port};
use e2e::{DATABASE, TOKEN, Tunnel, mysql_port, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// A tinyproxy in the foreground on a free port, stopped on drop.
struct Tinyproxy {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Tinyproxy {
    async fn start(tag: &str, basic_auth: Option<(&str, &str)>) -> Tinyproxy {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("sqltunnel-proxy-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        // tinyproxy drops to `nobody` when started as root: its log must be writable by it.
        let log = dir.join("tinyproxy.log");
        std::fs::write(&log, "").expect("log");
        drop(Command::new("chmod").arg("0777").arg(&dir).arg(&log).status());
        let mut conf = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 600\nAllow 127.0.0.1\nMaxClients 200\nLogFile \"{}\"\nLogLevel Connect\n",
            log.display()
        );
        if runs_as_root() {
            conf.push_str("User nobody\nGroup nogroup\n");
        }
        if let Some((user, password)) = basic_auth {
            conf.push_str(&format!("BasicAuth {user} {password}\n"));
        }
        let path = dir.join("tinyproxy.conf");
        std::fs::write(&path, conf).expect("conf");
        let child = Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tinyproxy (scripts/test.sh installs it)");
        wait_port(port).await;
        Tinyproxy { child, port, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("tinyproxy.log")).unwrap_or_default()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
    }
}

/// True when the tests run as root (uid 0, from /proc).
fn runs_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A tunnel whose sidecar reaches its transport through `proxy`.
async fn tunnel_via(proxy: &str) -> Tunnel {
    Tunnel::start_custom(&e2e::transport_yaml(mysql_port()), |url| {
        sidecar_yaml(url, TOKEN).replace(
            "  connect_timeout: 2s\n",
            &format!("  connect_timeout: 2s\n  proxy: {proxy}\n"),
        )
    })
    .await
}

async fn login_error(tunnel: &Tunnel) -> String {
    match Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await {
        Ok(_) => panic!("the login should fail"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn sessions_work_through_a_real_forward_proxy() {
    within(60, async {
        let proxy = Tinyproxy::start("plain", None).await;
        let tunnel = tunnel_via(&format!("http://127.0.0.1:{}", proxy.port)).await;
        let mut conn = Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await.expect("login");
        for i in 0..20u32 {
            let v: Option<u32> = conn.exec_first("SELECT ?", (i,)).await.expect("query");
            assert_eq!(v, Some(i));
        }
        drop(conn);
        let log = proxy.log();
        let target = format!("127.0.0.1:{}", tunnel.transport.port());
        assert!(log.contains("CONNECT") && log.contains(&target), "through the proxy: {log}");
    })
    .await;
}

#[tokio::test]
async fn proxy_credentials_come_from_the_proxy_url() {
    within(60, async {
        let proxy = Tinyproxy::start("auth", Some(("corp", "s3cret"))).await;
        let without = tunnel_via(&format!("http://127.0.0.1:{}", proxy.port)).await;
        let error = login_error(&without).await;
        assert!(error.contains("credentials") && error.contains("proxy"), "{error}");
        let with = tunnel_via(&format!("http://corp:s3cret@127.0.0.1:{}", proxy.port)).await;
        let mut conn = Conn::new(opts(with.sidecar.port(), Some(DATABASE))).await.expect("login");
        let one: Option<u8> = conn.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
    })
    .await;
}

#[tokio::test]
async fn a_dead_proxy_is_named_in_the_error() {
    within(60, async {
        let port = free_port();
        let tunnel = tunnel_via(&format!("http://127.0.0.1:{port}")).await;
        let error = tokio::time::timeout(Duration::from_secs(10), login_error(&tunnel))
            .await
            .expect("answered, not hung");
        assert!(error.contains(&format!("proxy 127.0.0.1:{port}")), "{error}");
    })
    .await;
}

#[tokio::test]
async fn sidecar_check_walks_through_the_proxy_and_names_its_failures() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let url = format!("http://{}/", tunnel.transport);
        let via = |proxy: &str| {
            sidecar_yaml(&url, TOKEN).replace(
                "  connect_timeout: 2s\n",
                &format!("  connect_timeout: 2s\n  proxy: {proxy}\n"),
            )
        };
        let open = Tinyproxy::start("check", None).await;
        let (passed, text) = sidecar_check(&via(&format!("http://127.0.0.1:{}", open.port))).await;
        assert!(passed, "{text}");
        assert!(
            text.lines().any(|l| l.starts_with("ok    proxy") && l.contains("CONNECT")),
            "{text}"
        );
        let guarded = Tinyproxy::start("check-auth", Some(("corp", "s3cret"))).await;
        let (passed, text) =
            sidecar_check(&via(&format!("http://127.0.0.1:{}", guarded.port))).await;
        let line = text.lines().find(|l| l.starts_with("FAIL  proxy")).unwrap_or_default();
        assert!(!passed && line.contains("credentials") && line.contains("Fix: "), "{text}");
        let dead = free_port();
        let (passed, text) = sidecar_check(&via(&format!("http://127.0.0.1:{dead}"))).await;
        let line = text.lines().find(|l| l.starts_with("FAIL  proxy")).unwrap_or_default();
        assert!(!passed && line.contains(&format!("127.0.0.1:{dead}")), "{text}");
    })
    .await;
}
