//! The MariaDB the tests run against: the one `SQLTUNNEL_TEST_MYSQL_PORT` names (`scripts/test.sh`
//! starts it), else the test binary's own, started on first use with `scripts/lib.sh`'s
//! `start_mariadb` on a free port under the temp dir, shared by the binary's tests, and stopped
//! and removed by a watchdog once the binary has exited.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A running MariaDB: its port and the CA of its TLS certificate.
#[derive(Debug)]
pub struct Server {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The CA that signed its certificate.
    pub ca: PathBuf,
}

/// The tests' MariaDB, started on the first call when no variable names one.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let given = std::env::var("SQLTUNNEL_TEST_MYSQL_PORT").ok().filter(|p| !p.is_empty());
        match given {
            Some(port) => Server {
                port: port.parse().expect("SQLTUNNEL_TEST_MYSQL_PORT is a port number"),
                ca: std::env::var_os("SQLTUNNEL_TEST_MYSQL_CA")
                    .expect("SQLTUNNEL_TEST_MYSQL_CA names the CA of that server's certificate")
                    .into(),
            },
            None => start_own(),
        }
    })
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Starts a MariaDB for this test binary alone and a watchdog that stops it and removes its
/// directory once this process is gone (however it ends). Both run in a process group of their
/// own, so a Ctrl-C of the tests reaches neither before the watchdog's cleanup.
fn start_own() -> Server {
    let dir = std::env::temp_dir().join(format!("sqltunnel-mariadb-{}", std::process::id()));
    drop(std::fs::remove_dir_all(&dir));
    std::fs::create_dir_all(&dir).expect("the MariaDB's directory");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let log = dir.join("start.log");
    let out = std::fs::File::create(&log).expect("start.log");
    let started = Command::new("bash")
        .arg("-c")
        .arg(r#"source scripts/lib.sh && start_mariadb "$0/server" "$1""#)
        .arg(&dir)
        .arg(port.to_string())
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .process_group(0)
        .status()
        .expect("bash");
    // In the background of a shell that exits at once: nobody waits for it, and it outlives
    // this process to clean up after it.
    let watchdog = r#"(
        while kill -0 "$1" 2>/dev/null; do sleep 1; done
        pid=$(cat "$0/server/mysqld.pid" 2>/dev/null) && kill "$pid" 2>/dev/null
        for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -rf "$0"
    ) >/dev/null 2>&1 </dev/null &"#;
    Command::new("bash")
        .arg("-c")
        .arg(watchdog)
        .arg(&dir)
        .arg(std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .status()
        .expect("the MariaDB's watchdog");
    if !started.success() {
        panic!(
            "no SQLTUNNEL_TEST_MYSQL_PORT, and the tests' own MariaDB did not start (scripts/setup.sh \
             installs it):\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    eprintln!("the tests' own MariaDB: 127.0.0.1:{port}, {}", dir.display());
    Server { port, ca: dir.join("server/tls/ca.pem") }
}

/// A test program's path from its variable (`SQLTUNNEL_TEST_PYTHON`…), else `default` under the
/// workspace's `target/test-clients/` when it is there (`scripts/setup.sh` installs them).
pub fn client_path(var: &str, default: &str) -> String {
    if let Some(given) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
        return given;
    }
    let installed = root().join("target/test-clients").join(default);
    assert!(
        installed.exists(),
        "{var} is not set and {} is missing: run scripts/setup.sh, which installs the test clients",
        installed.display()
    );
    installed.to_string_lossy().into_owned()
}
