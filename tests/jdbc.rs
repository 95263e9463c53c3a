//! MariaDB Connector/J (Debian's libmariadb-java, what DBeaver uses) replays a DBeaver
//! session; the tunnel's answers must equal the direct connection's, line by line.

use e2e::{Tunnel, mysql_port, within};

async fn run(classpath: &str, port: u16, options: &str) -> String {
    let output = e2e::java::run(classpath, "DbeaverSession", &[&port.to_string(), options]).await;
    assert!(
        output.status.success(),
        "the JDBC session failed on port {port}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Drops the `(conn=N)` Connector/J puts in error messages.
fn without_conn_id(line: &str) -> String {
    match (line.find("(conn="), line.find(") ")) {
        (Some(a), Some(b)) if b > a => format!("{}{}", &line[..a], &line[b + 2..]),
        _ => line.to_owned(),
    }
}

#[tokio::test]
async fn a_dbeaver_like_jdbc_session_matches_direct() {
    within(240, async {
        let classpath = tokio::task::spawn_blocking(|| e2e::java::compile("DbeaverSession"))
            .await
            .expect("compile");
        // A `users` login, then the same session logging in with the database's own
        // credentials (passthrough: caching_sha2_password with the sidecar's RSA key).
        let listed = Tunnel::start().await;
        let passthrough = Tunnel::start_passthrough("").await;
        for (tunnel, options) in [
            (&listed, ""),
            (&listed, "useServerPrepStmts=true"),
            (&passthrough, "allowPublicKeyRetrieval=true&useServerPrepStmts=true"),
        ] {
            let direct = run(&classpath, mysql_port(), options).await;
            let through = run(&classpath, tunnel.sidecar.port(), options).await;
            assert!(direct.lines().count() > 50, "the session really ran:\n{direct}");
            assert!(
                through.contains("row | 1 | alpha-edited"),
                "the updatable result set edited the row:\n{through}"
            );
            assert!(
                through.contains("cancel: error 1317 70100")
                    && through.contains("cancel: within 5 s true"),
                "{through}"
            );
            for (i, (d, t)) in direct.lines().zip(through.lines()).enumerate() {
                // Connector/J quotes the handshake's connection id in messages: the sidecar's own.
                assert_eq!(
                    without_conn_id(d),
                    without_conn_id(t),
                    "line {i} differs (options {options:?})"
                );
            }
            assert_eq!(direct.lines().count(), through.lines().count());
        }
    })
    .await;
}
