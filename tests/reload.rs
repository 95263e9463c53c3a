//! SIGHUP reloads the configuration and never ends the process: tokens are rotated without
//! dropping a session (a withdrawn token's sessions end), a file that does not load is refused
//! with an error line, and both binaries go on. Over a stream and over requests. SIGHUP also
//! opens `log.file` again, so that a rotation can move it.

use e2e::processes::{Proc, free_port, wait_port};
use e2e::{Carrier, DATABASE, mysql_port, on_both_carriers, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

const OLD: &str = "old-T0ken-2Wx9Cv4Bn7Mq1Lz6Kp";
const NEW: &str = "new-T0ken-8Fj3Hd5Gs2Ka9Pl4Ox";

/// Rewrites `proc`'s config file with `yaml`, sends it SIGHUP, and waits until it says the
/// configuration was reloaded, or the reload refused.
async fn reload(proc: &Proc, yaml: &str) {
    let said = |p: &Proc| p.log_count("configuration reloaded") + p.log_count("reload refused");
    let seen = said(proc);
    std::fs::write(&proc.config, yaml).expect("config");
    proc.signal("HUP");
    let start = std::time::Instant::now();
    while said(proc) <= seen {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "no word of the reload");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

on_both_carriers!(sighup_rotates_tokens_without_dropping_sessions);
async fn sighup_rotates_tokens_without_dropping_sessions(carrier: Carrier) {
    within(60, async {
        let (transport_port, sidecar_port) = (free_port(), free_port());
        let transport_yaml = |tokens: &str| {
            e2e::transport_yaml(mysql_port())
                .replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"))
                .replace(&format!("tokens: [{}]", e2e::TOKEN), &format!("tokens: [{tokens}]"))
        };
        let sidecar_yaml = |token: &str| {
            carrier
                .sidecar(&sidecar_yaml(&format!("http://127.0.0.1:{transport_port}/"), token))
                .replace("127.0.0.1:0", &format!("127.0.0.1:{sidecar_port}"))
        };
        let tag = format!("reload-{}", carrier.name());
        let mut transport = Proc::start("transport", &transport_yaml(OLD), &tag);
        wait_port(transport_port).await;
        let mut sidecar = Proc::start("sidecar", &sidecar_yaml(OLD), &tag);
        wait_port(sidecar_port).await;
        let mut before = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("login");

        // Rotation: the transport accepts both, then the sidecar switches to the new token.
        reload(&transport, &transport_yaml(&format!("{OLD}, {NEW}"))).await;
        reload(&sidecar, &sidecar_yaml(NEW)).await;
        // (The greeting prepared ahead was opened with the old token: one login uses it.)
        let mut after = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("login");
        let mut newest = Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("login");
        before.query_drop("DO 1").await.expect("a session of the old token carries on");
        after.query_drop("DO 1").await.expect("works");
        newest.query_drop("DO 1").await.expect("works");

        // The old token withdrawn: its session ends at once, and its client is told why at its
        // next command (revoked, or the token refused when the command got there first); the
        // new ones carry on.
        reload(&transport, &transport_yaml(NEW)).await;
        let refused = before.query_drop("DO 1").await.expect_err("the old token is gone");
        let said = refused.to_string();
        assert!(said.contains("revoked") || said.contains("refused the sidecar's token"), "{said}");
        newest.query_drop("DO 1").await.expect("the new token's session carries on");

        // A file that does not load is refused; the running configuration stays.
        reload(&transport, "tokens: [").await;
        reload(&sidecar, "listen: [").await;
        newest.query_drop("DO 1").await.expect("still works");
        assert!(transport.is_running() && sidecar.is_running(), "SIGHUP never ends a process");
        let log = std::fs::read_to_string(&transport.log).expect("log");
        assert!(log.contains("reload refused"), "{log}");
        assert!(!log.contains(OLD) && !log.contains(NEW), "no token in the log");
    })
    .await;
}

/// A rotation moves `log.file` and sends SIGHUP: the lines after it go to a new file at the
/// configured path (mode 0600), the moved file keeps the earlier ones; so also when the
/// reloaded config does not load.
#[tokio::test]
async fn sighup_opens_the_log_file_again_after_a_rotation_moved_it() {
    use std::os::unix::fs::PermissionsExt;
    within(60, async {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sqltunnel-logfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (file, moved) = (dir.join("transport.log"), dir.join("transport.log.1"));
        let yaml = e2e::transport_yaml(mysql_port())
            .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
            + &format!("log:\n  file: {}\n", file.display());
        let transport = Proc::start("transport", &yaml, "logfile");
        wait_port(port).await;
        let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_default();
        let says = async |path: &std::path::Path, needle: &str| {
            let start = std::time::Instant::now();
            while !read(path).contains(needle) {
                assert!(start.elapsed().as_secs() < 10, "{needle:?} not in {}", path.display());
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        says(&file, "listening").await;

        std::fs::rename(&file, &moved).expect("rotate");
        for (config, line) in
            [(yaml.as_str(), "configuration reloaded"), ("tokens: [", "reload refused")]
        {
            std::fs::write(&transport.config, config).expect("config");
            transport.signal("HUP");
            says(&file, line).await;
        }
        let mode = std::fs::metadata(&file).expect("new file").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the new file is its owner's only");
        let old = read(&moved);
        assert!(old.contains("listening") && !old.contains("reload"), "{old}");
        drop(transport);
        drop(std::fs::remove_dir_all(&dir));
    })
    .await;
}
