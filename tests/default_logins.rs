//! Every client logs in through passthrough with its **default settings** (no TLS, key or
//! plugin options), as it does directly: the `mariadb` CLI, PyMySQL, mysql-connector-python,
//! node mysql2, MariaDB Connector/J and Oracle's Connector/J 8.0.33 (DBeaver's two drivers).
//! A wrong password gets the upstream's own 1045, word for word as directly.

use e2e::cli::mariadb_async;
use e2e::java::without_connection_tags;
use e2e::{DATABASE, Tunnel, clients, create_user, mysql_port, within};

const PASSWORD: &str = "Default-login-1";

#[derive(Clone, Copy, Debug)]
enum Client {
    MariadbCli,
    PyMysql,
    ConnectorPython,
    NodeMysql2,
    MariadbConnectorJ,
    OracleConnectorJ,
}

/// One line: `user | <current user> | <database>`, or `error | <code> | …` as the client
/// reports it.
async fn login(client: Client, port: u16, user: &str, password: &str) -> String {
    let port_text = port.to_string();
    let out = match client {
        Client::MariadbCli => {
            let sql = ["-N", "-e", "SELECT CURRENT_USER(), DATABASE()", DATABASE];
            let run = mariadb_async(port, user, password, &sql).await;
            if run.success {
                format!("user | {}", run.stdout.trim().replace('\t', " | "))
            } else {
                format!("error | {}", run.stderr.trim())
            }
        }
        Client::PyMysql | Client::ConnectorPython => {
            let driver = if matches!(client, Client::PyMysql) { "pymysql" } else { "connector" };
            let args = [driver, &port_text, user, password, DATABASE];
            clients::python("default_login.py", &args).await
        }
        Client::NodeMysql2 => {
            clients::node("mysql2_login.js", &[&port_text, user, password, DATABASE]).await
        }
        Client::MariadbConnectorJ | Client::OracleConnectorJ => {
            let compiled = tokio::task::spawn_blocking(|| e2e::java::compile("DefaultLogin"))
                .await
                .expect("compile");
            let (classpath, scheme) = match client {
                Client::OracleConnectorJ => (e2e::java::with_oracle_driver(&compiled), "mysql"),
                _ => (compiled, "mariadb"),
            };
            let url = format!("jdbc:{scheme}://127.0.0.1:{port}/{DATABASE}");
            let run = e2e::java::run(&classpath, "DefaultLogin", &[&url, user, password]).await;
            match String::from_utf8_lossy(&run.stdout).into_owned() {
                // Not even an SQL error: what the JVM said instead.
                out if out.trim().is_empty() => {
                    format!("no output; stderr: {}", String::from_utf8_lossy(&run.stderr))
                }
                out => out,
            }
        }
    };
    without_connection_tags(out.trim())
}

/// The client logs in through the tunnel as directly, and a wrong password gets the same 1045.
async fn logs_in_as_directly(client: Client, user: &str) {
    within(120, async {
        let user = create_user(user, PASSWORD).await;
        let tunnel = Tunnel::start_passthrough("").await;
        let through = login(client, tunnel.sidecar.port(), &user, PASSWORD).await;
        assert_eq!(through, format!("user | {user}@% | {DATABASE}"), "{client:?}");
        let direct = login(client, mysql_port(), &user, PASSWORD).await;
        assert_eq!(through, direct, "{client:?}");

        let through = login(client, tunnel.sidecar.port(), &user, "not-the-password").await;
        assert!(
            through.starts_with("error |") && through.contains("1045"),
            "{client:?}: {through}"
        );
        let direct = login(client, mysql_port(), &user, "not-the-password").await;
        assert_eq!(through, direct, "{client:?}");
    })
    .await;
}

#[tokio::test]
async fn the_mariadb_cli() {
    logs_in_as_directly(Client::MariadbCli, "dl_cli").await;
}

#[tokio::test]
async fn pymysql() {
    logs_in_as_directly(Client::PyMysql, "dl_pymysql").await;
}

#[tokio::test]
async fn mysql_connector_python() {
    logs_in_as_directly(Client::ConnectorPython, "dl_connector").await;
}

#[tokio::test]
async fn node_mysql2() {
    logs_in_as_directly(Client::NodeMysql2, "dl_mysql2").await;
}

#[tokio::test]
async fn mariadb_connector_j() {
    logs_in_as_directly(Client::MariadbConnectorJ, "dl_mariadb_j").await;
}

#[tokio::test]
async fn oracle_connector_j_8_0_33() {
    logs_in_as_directly(Client::OracleConnectorJ, "dl_oracle_j").await;
}
