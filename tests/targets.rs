//! The other Linux builds `scripts/test.sh` makes with `scripts/release.sh`: the aarch64
//! sidecar runs under qemu-user and relays a login and a query; the static musl transport and
//! sidecar (no dynamic loader, no libc of the host) relay one too.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use e2e::processes::{free_port, wait_port};
use e2e::{DATABASE, TOKEN, mysql_port, opts, sidecar_yaml, transport_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// A built binary of another target: `$SQLTUNNEL_TEST_TARGETS_DIR/<target>/<bin>`.
fn binary(target: &str, bin: &str) -> PathBuf {
    let dir = std::env::var("SQLTUNNEL_TEST_TARGETS_DIR").unwrap_or_else(|_| {
        panic!("SQLTUNNEL_TEST_TARGETS_DIR is not set: run the tests through scripts/test.sh, which builds the other targets")
    });
    PathBuf::from(dir).join(target).join(bin)
}

/// A process killed on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.0.kill());
        drop(self.0.wait());
    }
}

/// Starts `argv` with `yaml` as its `--config`.
fn start(argv: &[PathBuf], yaml: &str, tag: &str) -> Running {
    let path = std::env::temp_dir().join(format!("sqltunnel-{tag}-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("config");
    let (program, args) = argv.split_first().expect("a program");
    let child = Command::new(program)
        .args(args)
        .arg("--config")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    Running(child)
}

/// Logs in through the sidecar on `port` and checks a query's answer.
async fn relays(port: u16) {
    let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("login through it");
    let row: Option<(i64, String)> =
        conn.exec_first("SELECT ? + 1, DATABASE()", (41,)).await.expect("query");
    assert_eq!(row, Some((42, DATABASE.to_owned())));
    drop(conn.disconnect().await);
}

fn transport_on(port: u16) -> String {
    transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
}

fn sidecar_on(port: u16, transport_port: u16) -> String {
    sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), TOKEN)
        .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
}

#[tokio::test]
async fn the_aarch64_sidecar_runs_under_qemu_and_relays_a_login() {
    within(120, async {
        let sidecar = binary("aarch64-unknown-linux-gnu", "sidecar");
        let qemu = || {
            let mut argv = vec![PathBuf::from("qemu-aarch64-static"), "-L".into()];
            argv.extend(["/usr/aarch64-linux-gnu".into(), sidecar.clone()]);
            argv
        };
        let version =
            Command::new(&qemu()[0]).args(&qemu()[1..]).arg("--version").output().expect("qemu");
        let said = String::from_utf8_lossy(&version.stdout);
        assert!(said.contains("aarch64-unknown-linux-gnu"), "{said}");
        let (transport_port, port) = (free_port(), free_port());
        let _transport = start(
            &[e2e::processes::bin_dir().join("transport")],
            &transport_on(transport_port),
            "x86-transport",
        );
        wait_port(transport_port).await;
        let _sidecar = start(&qemu(), &sidecar_on(port, transport_port), "aarch64-sidecar");
        wait_port(port).await;
        relays(port).await;
    })
    .await;
}

#[tokio::test]
async fn the_static_musl_binaries_relay_a_login() {
    within(60, async {
        let target = "x86_64-unknown-linux-musl";
        for bin in ["sidecar", "transport"] {
            let path = binary(target, bin);
            let ldd = Command::new("ldd").arg(&path).output().expect("ldd");
            let said = String::from_utf8_lossy(&ldd.stdout).into_owned()
                + &String::from_utf8_lossy(&ldd.stderr);
            assert!(
                !ldd.status.success() || said.contains("statically linked"),
                "{bin} is dynamic: {said}"
            );
        }
        let (transport_port, port) = (free_port(), free_port());
        let _transport =
            start(&[binary(target, "transport")], &transport_on(transport_port), "musl-transport");
        wait_port(transport_port).await;
        let _sidecar =
            start(&[binary(target, "sidecar")], &sidecar_on(port, transport_port), "musl-sidecar");
        wait_port(port).await;
        relays(port).await;
    })
    .await;
}
