//! The real `transport` and `sidecar` binaries run as child processes (for kill tests and
//! memory measurements).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Directory holding the built binaries (`target/<profile>`), next to the test executable.
/// `cargo test` builds no other package's binary: a binary older than a source file it is
/// built from is named in a warning, which a failing test shows.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("target dir").to_path_buf();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let newest_source = ["common", "sidecar", "transport"]
        .iter()
        .filter_map(|krate| newest(&root.join(krate)))
        .max();
    for bin in ["transport", "sidecar"] {
        let built = std::fs::metadata(dir.join(bin)).and_then(|m| m.modified());
        let fix = "run `cargo build -p sidecar -p transport` (scripts/test.sh builds them)";
        let Ok(built) = built else { panic!("{} is missing: {fix}", dir.join(bin).display()) };
        if newest_source.is_some_and(|source| source > built) {
            eprintln!("warning: {} is older than the sources: {fix}", dir.join(bin).display());
        }
    }
    dir
}

/// The latest modification time of a file below `dir` (its `src/` and `Cargo.toml`).
fn newest(dir: &std::path::Path) -> Option<std::time::SystemTime> {
    let mut latest = std::fs::metadata(dir.join("Cargo.toml")).and_then(|m| m.modified()).ok();
    let mut pending = vec![dir.join("src")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if let Ok(modified) = meta.modified() {
                latest = latest.max(Some(modified));
            }
        }
    }
    latest
}

/// A running binary, killed on drop.
pub struct Proc {
    child: Child,
    /// Its log file.
    pub log: PathBuf,
    /// Its config file (rewrite it, then send SIGHUP, to reload).
    pub config: PathBuf,
}

impl Proc {
    /// Starts `bin --config <yaml written to a temp file>`.
    pub fn start(bin: &str, yaml: &str, tag: &str) -> Proc {
        Self::start_with_env(bin, yaml, tag, &[])
    }

    /// [`Self::start`] with these environment variables set.
    pub fn start_with_env(bin: &str, yaml: &str, tag: &str, env: &[(&str, &str)]) -> Proc {
        let dir = std::env::temp_dir().join(format!("sqltunnel-test-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let config = dir.join(format!("{bin}.yaml"));
        std::fs::write(&config, yaml).expect("write config");
        let log = dir.join(format!("{bin}.log"));
        let log_file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(bin_dir().join(bin))
            .envs(env.iter().copied())
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start binary");
        Proc { child, log, config }
    }

    /// Starts the same binary with the same config file and `args` (e.g. `--take-over`),
    /// logging to `<log>.<tag>`.
    pub fn start_again(&self, bin: &str, args: &[&str], tag: &str) -> Proc {
        let log = self.log.with_extension(format!("log.{tag}"));
        let log_file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(bin_dir().join(bin))
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start binary");
        Proc { child, log, config: self.config.clone() }
    }

    /// Waits up to `within` for the process to exit; true when it did.
    pub async fn exits_within(&mut self, within: Duration) -> bool {
        let start = std::time::Instant::now();
        while self.is_running() {
            if start.elapsed() > within {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident memory (VmHWM) in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        status_kib(&self.pid().to_string(), "VmHWM:").expect("VmHWM")
    }

    /// Resident memory now (VmRSS) in KiB.
    pub fn rss_kib(&self) -> u64 {
        status_kib(&self.pid().to_string(), "VmRSS:").expect("VmRSS")
    }

    /// Open file descriptors now.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }

    /// Sends `signal` (a name such as `STOP`, `CONT`, `TERM`, `HUP`) with kill(1). A `STOP`
    /// returns once the process is stopped (a signal is delivered after kill(1) returns: until
    /// then a busy process may still answer).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill -{signal} {}", self.pid());
        if signal == "STOP" {
            let stat = format!("/proc/{}/stat", self.pid());
            let stopped = || {
                let text = std::fs::read_to_string(&stat).unwrap_or_default();
                text.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('T'))
            };
            let started = std::time::Instant::now();
            while !stopped() {
                assert!(started.elapsed() < Duration::from_secs(10), "{} did not stop", self.pid());
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// How many times its log holds `needle` now.
    pub fn log_count(&self, needle: &str) -> usize {
        std::fs::read_to_string(&self.log).map_or(0, |log| log.matches(needle).count())
    }

    /// Waits until its log holds `needle` more than `seen` times (at most 10 s).
    pub async fn log_grows(&self, needle: &str, seen: usize) {
        let start = std::time::Instant::now();
        while self.log_count(needle) <= seen {
            assert!(start.elapsed() < Duration::from_secs(10), "{needle:?} never logged");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `field` of `/proc/<pid>/status` given in kB (`VmRSS:`, `VmHWM:`), for `pid` a process id
/// or `self`.
pub fn status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Waits until something accepts TCP connections on `port`.
pub async fn wait_port(port: u16) {
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing listens on port {port}");
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Below the kernel's ephemeral range (32768 and up by default): no outgoing connection of
    // a concurrent test can take the port between this check and a binary's bind. Tests of one
    // process walk the range from a point that depends on the process id.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    for _ in 0..1000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 10_000 + (std::process::id().wrapping_mul(7919).wrapping_add(n * 13) % 22_000);
        if let Ok(port) = u16::try_from(port)
            && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
        {
            return port;
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The real binaries as deployed: a transport process and a sidecar process in front of it.
pub struct ProcTunnel {
    /// The transport.
    pub transport: Proc,
    /// The sidecar.
    pub sidecar: Proc,
    /// Where clients connect.
    pub sidecar_port: u16,
    /// Where the transport listens.
    pub transport_port: u16,
}

impl ProcTunnel {
    /// Starts both on free ports, with the harness's configs as `edit_transport` and
    /// `edit_sidecar` change them (YAML text in, YAML text out).
    pub async fn start(
        tag: &str,
        edit_transport: impl FnOnce(String) -> String,
        edit_sidecar: impl FnOnce(String) -> String,
    ) -> ProcTunnel {
        let (transport_port, sidecar_port) = (free_port(), free_port());
        let transport_yaml = edit_transport(
            crate::transport_yaml(crate::mysql_port())
                .replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}")),
        );
        let sidecar_yaml = edit_sidecar(
            crate::sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), crate::TOKEN)
                .replace("127.0.0.1:0", &format!("127.0.0.1:{sidecar_port}")),
        );
        let transport = Proc::start("transport", &transport_yaml, tag);
        wait_port(transport_port).await;
        let sidecar = Proc::start("sidecar", &sidecar_yaml, tag);
        wait_port(sidecar_port).await;
        ProcTunnel { transport, sidecar, sidecar_port, transport_port }
    }

    /// [`Self::start`] with the sidecar on `carrier` (and `tag` made the carrier's own).
    pub async fn start_on(
        carrier: crate::Carrier,
        tag: &str,
        edit_transport: impl FnOnce(String) -> String,
        edit_sidecar: impl FnOnce(String) -> String,
    ) -> ProcTunnel {
        let tag = format!("{tag}-{}", carrier.name());
        Self::start(&tag, edit_transport, |s| edit_sidecar(carrier.sidecar(&s))).await
    }
}

/// Runs `sidecar check --config` on `yaml`, with no proxy or token from the environment;
/// answers whether it exited 0, and what it printed (stdout, then stderr).
pub async fn sidecar_check(yaml: &str) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!(
        "sqltunnel-check-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("sidecar.yaml");
    std::fs::write(&path, yaml).expect("config");
    let run = move || {
        Command::new(bin_dir().join("sidecar"))
            .arg("check")
            .arg("--config")
            .arg(&path)
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("SQLTUNNEL_TOKEN")
            .stdin(Stdio::null())
            .output()
    };
    let output = crate::within(60, tokio::task::spawn_blocking(run))
        .await
        .expect("join")
        .expect("run sidecar check");
    drop(std::fs::remove_dir_all(&dir));
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}
