//! DBeaver's two drivers, MariaDB Connector/J (Debian's libmariadb-java) and Oracle's
//! Connector/J 8.0.33, replay a DBeaver session; the tunnel's answers must equal the direct
//! connection's, line by line.

use e2e::http::metric;
use e2e::java::without_connection_tags;
use e2e::{TOKEN, Tunnel, mysql_port, within};

async fn run(classpath: &str, port: u16, options: &str, scheme: &str) -> String {
    let args = [&port.to_string(), options, scheme];
    let output = e2e::java::run(classpath, "DbeaverSession", &args).await;
    assert!(
        output.status.success(),
        "the JDBC session failed on port {port}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn a_dbeaver_like_jdbc_session_matches_direct() {
    within(240, async {
        let classpath = tokio::task::spawn_blocking(|| e2e::java::compile("DbeaverSession"))
            .await
            .expect("compile");
        let oracle = e2e::java::with_oracle_driver(&classpath);
        // A `users` login, then the same session logging in with the database's own
        // credentials (passthrough: the login is the upstream's), with both drivers.
        let listed = Tunnel::start().await;
        let passthrough = Tunnel::start_passthrough("").await;
        for (tunnel, options, classpath, scheme) in [
            (&listed, "", &classpath, "mariadb"),
            (&listed, "useServerPrepStmts=true", &classpath, "mariadb"),
            (&passthrough, "", &classpath, "mariadb"),
            (&passthrough, "useServerPrepStmts=true", &classpath, "mariadb"),
            (&passthrough, "", &oracle, "mysql"),
            (&passthrough, "useServerPrepStmts=true&useCursorFetch=true", &oracle, "mysql"),
        ] {
            let pipelined = || {
                metric(tunnel.transport.port(), Some(TOKEN), "sqltunnel_pipelined_commands_total")
            };
            let direct = run(classpath, mysql_port(), options, scheme).await;
            let before = pipelined().await;
            let through = run(classpath, tunnel.sidecar.port(), options, scheme).await;
            // MariaDB's driver pipelines a batch's statements (and its first queries behind the
            // login): they crossed in shared requests.
            let crossed_together = pipelined().await - before;
            if scheme == "mariadb" {
                assert!(crossed_together >= 40, "{crossed_together} commands pipelined");
            }
            assert!(direct.lines().count() > 50, "the session really ran:\n{direct}");
            assert!(
                through.contains("row | 1 | alpha-edited"),
                "the updatable result set edited the row:\n{through}"
            );
            // MariaDB's driver reports the server's 1317. Oracle's races its own cancel thread
            // against the server's ERR (directly too): its own exception (0) or the 1317.
            let cancel_outcome = |output: &str| {
                let line = output.lines().find(|l| l.starts_with("cancel: error")).unwrap_or("");
                match (scheme, line) {
                    ("mysql", "cancel: error 1317 70100") => "cancel: error 0 null".to_owned(),
                    _ => line.to_owned(),
                }
            };
            let expected = if scheme == "mariadb" { "error 1317 70100" } else { "error 0 null" };
            assert_eq!(cancel_outcome(&through), format!("cancel: {expected}"));
            assert!(through.contains("cancel: within 5 s true"), "{through}");
            for (i, (d, t)) in direct.lines().zip(through.lines()).enumerate() {
                if d.starts_with("cancel: error") {
                    assert_eq!(
                        cancel_outcome(d),
                        cancel_outcome(t),
                        "line {i} (options {options:?})"
                    );
                    continue;
                }
                // Connector/J quotes the connection id, and the port, in some messages.
                assert_eq!(
                    without_connection_tags(d),
                    without_connection_tags(t),
                    "line {i} differs (options {options:?})"
                );
            }
            assert_eq!(direct.lines().count(), through.lines().count());
        }
    })
    .await;
}
