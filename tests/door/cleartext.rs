//! A hostile upstream (or whoever stands in for it: a compromised transport, a man in the
//! middle of plain `http://`) asking a passed-through login for its password in clear, by its
//! greeting or by an auth switch to `mysql_clear_password` or `dialog`: PyMySQL, with its
//! defaults, would send the password as it is. The sidecar refuses the login with error 1251
//! instead, and the server receives no password. So it does for a COM_CHANGE_USER answered
//! with such a switch (`mysql_async` with its cleartext plugin on, as for PAM, would answer).
//! With `auth.cleartext_passwords: true` (PAM or LDAP logins over TLS) the password goes, as
//! asked: the test sees it, so it would see a leak.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::door::{HostileUpstream, greeting, packet};
use e2e::processes::{Proc, free_port, wait_port};
use e2e::{TOKEN, Tunnel, clients, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "Cl3ar-Text-Secret-9";

/// A PyMySQL login (its defaults) through a passthrough sidecar to a transport whose upstream
/// greets with `greets` and switches to `switches`; what the client printed, and whether the
/// upstream received the password.
async fn login(greets: &'static str, switches: &'static str, allowed: bool) -> (String, bool) {
    let hostile = HostileUpstream::start(greets, switches, b"").await;
    let port = free_port();
    let yaml =
        e2e::transport_yaml(hostile.port).replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    let _transport = Proc::start("transport", &yaml, "cleartext");
    wait_port(port).await;
    let allow = if allowed { "auth:\n  cleartext_passwords: true\n" } else { "" };
    let sidecar = format!(
        "listen: 127.0.0.1:0\ntransport:\n  url: http://127.0.0.1:{port}/\n  token: {TOKEN}\n  connect_timeout: 2s\n{allow}"
    );
    let shutdown = CancellationToken::new();
    let addr = Tunnel::start_sidecar(&sidecar, shutdown.clone()).await;
    let said = clients::python(
        "pymysql_login.py",
        &[&addr.port().to_string(), "victim", SECRET, "", "plain"],
    )
    .await;
    shutdown.cancel();
    (said, hostile.received_contains(SECRET.as_bytes()))
}

#[tokio::test]
async fn a_passed_through_login_never_sends_its_password_in_clear() {
    within(90, async {
        for (greets, switches) in [
            ("mysql_native_password", "mysql_clear_password"),
            ("mysql_native_password", "dialog"),
            ("mysql_clear_password", "mysql_clear_password"),
        ] {
            let (said, leaked) = login(greets, switches, false).await;
            println!("{greets} then {switches}: PyMySQL said {}", said.trim());
            assert!(!leaked, "{greets}/{switches}: the upstream received the password");
            assert!(
                said.contains("\"error\": 1251") && said.contains("in clear"),
                "{greets}/{switches}: {said}"
            );
        }
        let (said, leaked) = login("mysql_native_password", "mysql_clear_password", true).await;
        println!("allowed: PyMySQL said {}", said.trim());
        assert!(leaked, "with cleartext_passwords on, the password goes as asked: {said}");
    })
    .await;
}

/// A fake server that takes any login, answers a COM_CHANGE_USER with a switch to
/// `mysql_clear_password` and everything else with OK; its port and what it received.
async fn change_user_upstream() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let kept = received.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let ok = |seq| packet(seq, &[0, 0, 0, 2, 0, 0, 0]);
                drop(s.write_all(&packet(0, &greeting("mysql_native_password"))).await);
                let mut buf = vec![0u8; 65536];
                let mut logged_in = false;
                while let Ok(Ok(n @ 1..)) =
                    tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await
                {
                    kept.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(&buf[..n]);
                    let answer = match (logged_in, buf.get(4)) {
                        (false, _) => ok(2),
                        (true, Some(0x11)) => packet(1, b"\xfemysql_clear_password\0"),
                        (true, _) => ok(1),
                    };
                    logged_in = true;
                    if s.write_all(&answer).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, received)
}

#[tokio::test]
async fn a_change_user_never_sends_its_password_in_clear() {
    within(60, async {
        let (upstream, received) = change_user_upstream().await;
        let port = free_port();
        let yaml = e2e::transport_yaml(upstream).replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
        let _transport = Proc::start("transport", &yaml, "cleartext-change-user");
        wait_port(port).await;
        let sidecar = format!(
            "listen: 127.0.0.1:0\ntransport:\n  url: http://127.0.0.1:{port}/\n  token: {TOKEN}\n  connect_timeout: 2s\n"
        );
        let shutdown = CancellationToken::new();
        let addr = Tunnel::start_sidecar(&sidecar, shutdown.clone()).await;
        let opts = e2e::opts_as(addr.port(), "victim", "Login-pw-1", None).enable_cleartext_plugin(true);
        let mut conn = mysql_async::Conn::new(opts).await.expect("the fake server takes any login");
        let to = mysql_async::ChangeUserOpts::default()
            .with_user(Some("other".into()))
            .with_pass(Some(SECRET.into()));
        let changed = conn.change_user(to).await;
        shutdown.cancel();
        let said = format!("{changed:?}");
        println!("COM_CHANGE_USER answered with a switch to mysql_clear_password: {said}");
        let leaked = {
            let received = received.lock().unwrap_or_else(|p| p.into_inner());
            received.windows(SECRET.len()).any(|w| w == SECRET.as_bytes())
        };
        assert!(!leaked, "the upstream received the password");
        assert!(said.contains("1251") && said.contains("in clear"), "{said}");
    })
    .await;
}
