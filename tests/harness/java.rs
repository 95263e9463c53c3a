//! Java programs under `tests/jdbc/`, compiled with `javac` against MariaDB Connector/J from
//! Debian's libmariadb-java, and run with `java`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, PoisonError};

/// The driver jar `libmariadb-java` installs.
const DRIVER: &str = "/usr/share/java/mariadb-java-client.jar";

/// Compiles `tests/jdbc/<class>.java` into a temp dir, once per test process; returns the
/// classpath to run it with. Tests of one process share the class files: compiled again while
/// another test's JVM loads them, a class could be read half-written (seen as a Connector/J
/// login that printed nothing).
pub fn compile(class: &str) -> String {
    static COMPILED: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    let mut compiled = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(classpath) = compiled.get(class) {
        return classpath.clone();
    }
    let classpath = compile_now(class);
    compiled.insert(class.to_owned(), classpath.clone());
    classpath
}

/// Runs `javac` for `class`.
fn compile_now(class: &str) -> String {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("jdbc/{class}.java"));
    let out = std::env::temp_dir().join(format!("sqltunnel-jdbc-{}-{class}", std::process::id()));
    std::fs::create_dir_all(&out).expect("class dir");
    let javac = Command::new("javac")
        .arg("-cp")
        .arg(DRIVER)
        .arg("-d")
        .arg(&out)
        .arg(&src)
        .output()
        .expect("javac (scripts/test.sh installs a JDK)");
    assert!(javac.status.success(), "javac failed: {}", String::from_utf8_lossy(&javac.stderr));
    format!("{DRIVER}:{}", out.display())
}

/// Runs `class` with `args` off the async runtime.
pub async fn run(classpath: &str, class: &str, args: &[&str]) -> Output {
    let mut command = Command::new("java");
    command.arg("-cp").arg(classpath).arg(class).args(args);
    tokio::task::spawn_blocking(move || command.output().expect("java")).await.expect("java task")
}

/// `classpath` (from [`compile`]) with Oracle's MySQL Connector/J 8.0.33, DBeaver's MySQL
/// driver, in place of MariaDB's. `scripts/setup.sh` takes the jar from PyPI's `wbjdbc` wheel
/// (`SQLTUNNEL_TEST_MYSQL_JAR` names another).
pub fn with_oracle_driver(classpath: &str) -> String {
    let jar = crate::mariadb::client_path(
        "SQLTUNNEL_TEST_MYSQL_JAR",
        "jars/mysql-connector-j-8.0.33.jar",
    );
    classpath.replacen(DRIVER, &jar, 1)
}

/// Drops what differs between two servers in a driver's messages: Connector/J's `(conn=N)`
/// and `(port=N)` tags.
pub fn without_connection_tags(line: &str) -> String {
    let mut out = line.to_owned();
    for tag in ["(port=", "(conn="] {
        while let Some(a) = out.find(tag) {
            let Some(b) = out[a..].find(')') else { break };
            out.replace_range(a..a + b + 1, "");
        }
    }
    out
}
