//! A hostile upstream (or whoever stands in for it: a compromised transport, a man in the
//! middle of plain `http://`) asking a passed-through login for its password in clear, by its
//! greeting or by an auth switch to `mysql_clear_password` or `dialog`: PyMySQL, with its
//! defaults, would send the password as it is. The sidecar refuses the login with error 1251
//! instead, and the server receives no password. With `auth.cleartext_passwords: true` (PAM
//! or LDAP logins over TLS) the password goes, as asked: the test sees it, so it would see a
//! leak.

use e2e::door::HostileUpstream;
use e2e::processes::{Proc, free_port, wait_port};
use e2e::{TOKEN, Tunnel, clients, within};
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
