//! Runs the real `mariadb` command-line client.

use std::process::{Command, Output};

/// Output of one `mariadb` run.
#[derive(Debug)]
pub struct CliRun {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Exit status success.
    pub success: bool,
}

/// Runs `mariadb` against `port` as `user`/`password` with extra `args` (blocking; call from
/// `spawn_blocking`).
pub fn mariadb(port: u16, user: &str, password: &str, args: &[&str]) -> CliRun {
    let output: Output = Command::new("mariadb")
        .arg("--no-defaults")
        .arg("--protocol=TCP")
        .arg("-h127.0.0.1")
        .arg(format!("-P{port}"))
        .arg(format!("-u{user}"))
        .arg(format!("-p{password}"))
        .arg("--connect-timeout=10")
        .args(args)
        .output()
        .expect("the mariadb client is installed (scripts/test.sh installs it)");
    CliRun {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        success: output.status.success(),
    }
}

/// Async wrapper around [`mariadb`].
pub async fn mariadb_async(port: u16, user: &str, password: &str, args: &[&str]) -> CliRun {
    let (user, password) = (user.to_owned(), password.to_owned());
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        mariadb(port, &user, &password, &refs)
    })
    .await
    .expect("mariadb task")
}
