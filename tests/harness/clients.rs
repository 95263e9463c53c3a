//! Client programs under `tests/clients/` run with the interpreters `scripts/setup.sh` (and
//! `scripts/test.sh`) install: PyMySQL in a virtualenv (`SQLTUNNEL_TEST_PYTHON`) and node's
//! mysql2 (`SQLTUNNEL_TEST_NODE_MODULES`), by default under `target/test-clients/`.

use std::path::PathBuf;
use std::process::Command;

use crate::mariadb::client_path;

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients").join(name)
}

async fn stdout_of(mut command: Command) -> String {
    let output = tokio::task::spawn_blocking(move || command.output().expect("client program"))
        .await
        .expect("client task");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        !stdout.trim().is_empty(),
        "the client program printed nothing: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Runs `tests/clients/<name>` with the PyMySQL virtualenv's Python; returns its stdout.
pub async fn python(name: &str, args: &[&str]) -> String {
    let mut command = Command::new(client_path("SQLTUNNEL_TEST_PYTHON", "venv/bin/python"));
    command.arg(script(name)).args(args);
    stdout_of(command).await
}

/// Runs `tests/clients/<name>` with node, mysql2 on its module path; returns its stdout.
pub async fn node(name: &str, args: &[&str]) -> String {
    let mut command = Command::new("node");
    let modules = client_path("SQLTUNNEL_TEST_NODE_MODULES", "node/node_modules");
    command.env("NODE_PATH", modules).arg(script(name)).args(args);
    stdout_of(command).await
}
