//! The Windows sidecar (`x86_64-pc-windows-gnu`, built by `scripts/test.sh`) run for real
//! under Wine: `SQLTUNNEL_TEST_WINDOWS_DIR` holds `sidecar.exe` and the `bcryptprimitives.dll`
//! stand-in that Wine 8.0 lacks (`tests/wine/bcryptprimitives.c`), `SQLTUNNEL_TEST_WINE` the
//! 64-bit loader, `WINEPREFIX` the Windows profile.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests through scripts/test.sh, which builds the Windows sidecar and installs Wine")
    })
}

/// The Windows profile's `%APPDATA%`, as a Linux path.
pub fn appdata() -> PathBuf {
    let prefix = PathBuf::from(env("WINEPREFIX"));
    let users = prefix.join("drive_c").join("users");
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    users.join(user).join("AppData").join("Roaming")
}

/// A Windows sidecar process under Wine, killed on drop.
pub struct WindowsSidecar {
    child: Child,
    /// Its log (standard error).
    pub log: PathBuf,
}

impl WindowsSidecar {
    /// Starts `sidecar.exe` with `args` (a Linux path is a path on Wine's drive Z:, the
    /// current drive), logging to a file of `tag`.
    pub fn start(args: &[&str], tag: &str) -> WindowsSidecar {
        let dir = PathBuf::from(env("SQLTUNNEL_TEST_WINDOWS_DIR"));
        let log =
            std::env::temp_dir().join(format!("sqltunnel-wine-{}-{tag}.log", std::process::id()));
        let child = Command::new(env("SQLTUNNEL_TEST_WINE"))
            .arg(dir.join("sidecar.exe"))
            .args(args)
            .env("WINEDEBUG", "-all")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("wine");
        WindowsSidecar { child, log }
    }

    /// Waits until it takes connections on `port`: up to 60 s, as Wine starts slowly on a
    /// loaded machine (its other programs starting at once); else fails with what it logged.
    pub async fn wait_listening(&self, port: u16) {
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(60) {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!(
            "the Windows sidecar took no connection on port {port} in 60 s; it logged:\n{}",
            self.logged()
        );
    }

    /// What it logged so far.
    pub fn logged(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What it logged once that holds `needle` (or after 10 s): its port may take connections
    /// before the line that says so is written.
    pub async fn logged_with(&self, needle: &str) -> String {
        let started = std::time::Instant::now();
        loop {
            let log = self.logged();
            if log.contains(needle) || started.elapsed() > std::time::Duration::from_secs(10) {
                return log;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Sends it Ctrl-C (Wine turns SIGINT into the console's CTRL_C_EVENT) and waits for its
    /// exit; true when it exited cleanly.
    pub fn ctrl_c(&mut self) -> bool {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-INT", &pid]).status().expect("kill");
        assert!(sent.success());
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(30) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    }
}

impl Drop for WindowsSidecar {
    fn drop(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
    }
}

/// A Windows program kept waiting (`cmd` reading a pipe held open) so that Wine's service
/// manager, and the services it started, live on between the test's commands: Wine ends them
/// when its last program exits. Ended on drop.
pub struct KeepWineUp(Child);

impl KeepWineUp {
    /// Starts `cmd` under Wine.
    pub fn start() -> KeepWineUp {
        let child = Command::new(env("SQLTUNNEL_TEST_WINE"))
            .arg("cmd")
            .env("WINEDEBUG", "-all")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("wine cmd");
        KeepWineUp(child)
    }
}

impl Drop for KeepWineUp {
    fn drop(&mut self) {
        drop(self.0.kill());
        drop(self.0.wait());
    }
}
