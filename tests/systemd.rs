//! The systemd units pass `systemd-analyze verify`, and the transport unit's recipe in
//! docs/deploy/transport.md runs as written (but for its paths): its check sees the config as
//! the service will, the environment file's password reaches the service, and a reload
//! revokes a person.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use e2e::processes::bin_dir;

fn configs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

/// `systemd-analyze verify` on a unit of `configs/systemd/`, its binary path pointed at the
/// build; fails on any complaint about the unit file, not only on errors.
fn verify_unit(name: &str, binary_in_unit: &str, bin: &str, user: bool) {
    let dir = std::env::temp_dir().join(format!("sqltunnel-units-{}-{bin}", std::process::id()));
    let runtime = dir.join("run");
    std::fs::create_dir_all(&runtime).expect("dir");
    let text = std::fs::read_to_string(configs_dir().join("systemd").join(name)).expect("unit");
    assert!(text.contains(binary_in_unit), "{name} starts {binary_in_unit}");
    let built = bin_dir().join(bin);
    let unit = dir.join(name);
    std::fs::write(&unit, text.replace(binary_in_unit, &built.to_string_lossy())).expect("write");
    let mut cmd = Command::new("systemd-analyze");
    if user {
        cmd.arg("--user").env("XDG_RUNTIME_DIR", &runtime);
    }
    let out = cmd
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze (scripts/test.sh installs systemd)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    drop(std::fs::remove_dir_all(&dir));
    assert!(out.status.success(), "{name}: {stderr}");
    assert!(!stderr.contains(name), "{name} has complaints: {stderr}");
}

#[test]
fn systemd_units_pass_systemd_analyze_verify() {
    verify_unit("sqltunnel-transport@.service", "/usr/local/bin/transport", "transport", false);
    verify_unit("sqltunnel-sidecar.service", "%h/.local/bin/sidecar", "sidecar", true);
}

/// The ```sh blocks under `### {heading}` of the section "Run it with systemd" of
/// docs/deploy/transport.md, joined.
fn recipe_step(doc: &str, heading: &str) -> String {
    let section = &doc[doc.find("\n## Run it with systemd\n").expect("the systemd section")..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    let at = section.find(&format!("\n### {heading}\n")).unwrap_or_else(|| panic!("### {heading}"));
    let step = &section[at + 5..];
    let step = &step[..step.find("\n### ").unwrap_or(step.len())];
    let blocks: Vec<&str> = step
        .split("```sh\n")
        .skip(1)
        .map(|b| &b[..b.find("```").expect("a block's end")])
        .collect();
    assert!(!blocks.is_empty(), "### {heading} has no ```sh block");
    blocks.concat()
}

/// The status line and body of `GET /v1/ready` on `port` with `token`.
fn ready_with(port: u16, token: &str) -> String {
    use std::io::Read;
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).expect("timeout");
    let request = format!(
        "GET /v1/ready HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    drop(stream.read_to_string(&mut answer));
    answer
}

/// Ends the transports the recipe's `systemctl` started (each instance's pid in a file
/// `<path>.<instance>`), however the test ends.
struct Service(PathBuf);

impl Service {
    /// The pid of `instance`, as its file says.
    fn pid(&self, instance: &str) -> Option<String> {
        let file = self.0.with_extension(format!("pid.{instance}"));
        std::fs::read_to_string(file).ok().map(|p| p.trim().to_owned())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        for instance in ["blue", "green"] {
            if let Some(pid) = self.pid(instance) {
                drop(Command::new("kill").arg("-9").arg(pid).status());
            }
        }
    }
}

/// The systemd recipe of docs/deploy/transport.md, its blocks run as written but for where they
/// act (a scratch root for `/etc`, a free port for 8080) and without systemd as PID 1: `sudo`
/// runs its command, `sudoedit` writes the admin's password line, `systemctl enable --now`
/// starts the installed unit's own `ExecStart` with its `EnvironmentFile=`, `systemd-run` runs
/// its command with the properties it is given (`DynamicUser=yes` and the unit's own user are
/// `nobody` when the test runs as root, as the transient user cannot read a root-only file
/// either), and `systemctl reload` is the unit's SIGHUP. The check fails until the environment
/// file holds the admin's password; then the service's admin probe logs in with it (ready); the
/// person's token is accepted, and refused (401) once the recipe removes them and reloads;
/// another person's stays.
#[test]
fn the_systemd_recipe_runs_as_written_and_a_reload_revokes() {
    let doc = std::fs::read_to_string(configs_dir().join("../docs/deploy/transport.md"))
        .expect("docs/deploy/transport.md");
    let unit_file = configs_dir().join("systemd/sqltunnel-transport@.service");
    let unit = std::fs::read_to_string(&unit_file).expect("unit");
    // The unit's own install comment gives the same commands as the doc.
    for command in unit.lines().filter_map(|l| l.strip_prefix("#   ")) {
        assert!(doc.lines().any(|l| l.trim() == command.trim()), "not in the doc: {command}");
    }
    assert!(!unit.contains("\nLoadCredential="), "a credential is copied once: a reload misses it");
    assert!(unit.contains("\nLimitCORE=0\n") && unit.contains("\nDynamicUser=yes\n"));

    let dir = std::env::temp_dir().join(format!("sqltunnel-recipe-{}", std::process::id()));
    let (root, work, shims) = (dir.join("root"), dir.join("work"), dir.join("shims"));
    for d in [&work, &shims, &root.join("etc/systemd/system"), &root.join("usr/local/bin")] {
        std::fs::create_dir_all(d).expect("dir");
    }
    std::os::unix::fs::symlink(configs_dir(), work.join("configs")).expect("configs");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let pid_file = dir.join("transport.pid");
    let service = Service(pid_file.clone());
    let shim = |name: &str, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = shims.join(name);
        std::fs::write(&path, text).expect("shim");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    shim("sudo", "#!/bin/sh\nexec \"$@\"\n");
    shim(
        "sudoedit",
        "#!/bin/sh\nprintf 'SQLTUNNEL_ADMIN_PASSWORD=%s\\n' \"$ADMIN_PASSWORD\" >>\"$1\"\n",
    );
    shim(
        "systemd-run",
        r#"#!/bin/bash
set -euo pipefail
env_file="" as=()
while [[ $1 == -* ]]; do
    case "$1 ${2:-}" in
        "--quiet "* | "--wait "* | "--pipe "*) shift ;;
        "-p DynamicUser=yes")
            [[ $(id -u) -ne 0 ]] || as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
            shift 2 ;;
        "-p EnvironmentFile="*) env_file=${2#EnvironmentFile=}; env_file=${env_file#-}; shift 2 ;;
        *) echo "systemd-run $*: not in the recipe" >&2; exit 1 ;;
    esac
done
if [[ -f $env_file ]]; then set -a; . "$env_file"; set +a; fi
[[ $1 == /usr/local/bin/transport ]] && set -- "$TRANSPORT" "${@:2}"
exec "${as[@]}" "$@"
"#,
    );
    shim(
        "systemctl",
        r#"#!/bin/bash
set -euo pipefail
unit="$ROOT/etc/systemd/system/sqltunnel-transport@.service"
start() {
    exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
    exec_start=${exec_start//\/usr\/local\/bin\/transport/$TRANSPORT}
    exec_start=${exec_start//\/etc\//$ROOT\/etc\/}
    env_file=$(sed -n 's/^EnvironmentFile=-\?//p' "$unit")
    env_file=${env_file//\/etc\//$ROOT\/etc\/}
    if [[ -f $env_file ]]; then set -a; . "$env_file"; set +a; fi
    runtime="$ROOT/run/$(sed -n 's/^RuntimeDirectory=//p' "$unit")"
    mkdir -p "$runtime" && chmod 0700 "$runtime"
    as=()
    if [[ $(id -u) -eq 0 ]]; then
        as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
        chown 65534:65534 "$runtime"
    fi
    umask 0077
    RUNTIME_DIRECTORY="$runtime" "${as[@]}" $exec_start --listen "127.0.0.1:$PORT" >>"$LOG" 2>&1 </dev/null &
    echo $! >"$PID_FILE.$1"
}
case "$*" in
    daemon-reload) test -f "$unit" ;;
    "enable --now sqltunnel-transport@blue") start blue ;;
    "start sqltunnel-transport@green") start green ;;
    "enable sqltunnel-transport@"* | "disable sqltunnel-transport@"*) test -f "$unit" ;;
    "reload sqltunnel-transport@*")
        for pid_file in "$PID_FILE".*; do
            if kill -0 "$(cat "$pid_file")" 2>/dev/null; then kill -HUP "$(cat "$pid_file")"; fi
        done ;;
    *) echo "systemctl $*: not in the recipe" >&2; exit 1 ;;
esac
"#,
    );
    {
        use std::os::unix::fs::PermissionsExt;
        for d in [&dir, &root, &root.join("etc"), &work] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
    }
    let log = dir.join("transport.log");
    let path = format!(
        "{}:{}:{}",
        shims.display(),
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let try_run = |step: &str, name: &str| -> (bool, String, String) {
        let script = step
            .replace("/etc/", &format!("{}/etc/", root.display()))
            .replace(
                "target/release/transport /usr/local/bin/transport",
                &format!(
                    "{} {}/usr/local/bin/transport",
                    bin_dir().join("transport").display(),
                    root.display()
                ),
            )
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"))
            .replace("name=alice", &format!("name={name}"));
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&work)
            .env("PATH", &path)
            .env("ROOT", &root)
            .env("TRANSPORT", bin_dir().join("transport"))
            .env("PORT", port.to_string())
            .env("LOG", &log)
            .env("PID_FILE", &pid_file)
            .env("ADMIN_PASSWORD", e2e::PASSWORD)
            .output()
            .expect("bash");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said, script)
    };
    let run = |step: &str, name: &str| -> String {
        let (ok, said, script) = try_run(step, name);
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(ok, "{script}\n{said}\ntransport's log:\n{log}");
        said
    };
    run(&recipe_step(&doc, "Install"), "alice");
    let config = root.join("etc/sqltunnel/transport.yaml");
    let mode = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
    };
    assert_eq!(mode(&root.join("etc/sqltunnel")), 0o755);
    assert_eq!(mode(&config), 0o644, "the transient user reads it");
    // What the doc says to edit by hand: the database's address and the admin account.
    let yaml = std::fs::read_to_string(&config)
        .expect("config")
        .replace("address: 127.0.0.1:3306", &format!("address: 127.0.0.1:{}", e2e::mysql_port()))
        .replace("# admin_user: sqltunnel_admin", &format!("admin_user: {}", e2e::USER))
        .replace("# admin_password_env:", "admin_password_env:");
    std::fs::write(&config, yaml).expect("edit");
    for name in ["alice", "bob"] {
        run(&recipe_step(&doc, "Add a person"), name);
    }
    assert_eq!(mode(&work.join("alice.token")), 0o600, "the token is its owner's only");
    let (ok, said, _) = try_run(&recipe_step(&doc, "Check"), "alice");
    assert!(!ok && said.contains("SQLTUNNEL_ADMIN_PASSWORD is not set"), "{said}");
    run(&recipe_step(&doc, "Secrets in the environment file"), "alice");
    assert_eq!(mode(&root.join("etc/sqltunnel/transport.env")), 0o600);
    let said = run(&recipe_step(&doc, "Check"), "alice");
    assert!(said.contains("transport.yaml: ok"), "{said}");
    let token = |name: &str| {
        std::fs::read_to_string(work.join(format!("{name}.token")))
            .expect("token")
            .trim()
            .to_owned()
    };
    let said = run(&recipe_step(&doc, "Start"), "alice");
    assert!(said.contains(r#""identity":"alice""#), "{said}");
    // The admin probe logs in with the environment file's password: the transport is ready.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !ready_with(port, &token("alice")).contains(r#""status":"ready""#) {
        assert!(std::time::Instant::now() < deadline, "{}", ready_with(port, &token("alice")));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(ready_with(port, &token("bob")).contains(r#""identity":"bob""#));

    run(&recipe_step(&doc, "Remove a person"), "alice");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let answer = ready_with(port, &token("alice"));
        if answer.starts_with("HTTP/1.1 401") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "alice is still let in: {answer}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let answer = ready_with(port, &token("bob"));
    assert!(answer.contains(r#""identity":"bob""#), "bob lost his access: {answer}");
    assert_eq!(mode(&config), 0o644, "still readable after the edit");

    // The upgrade: the other instance takes the running one over, which exits; bob's token is
    // still accepted, by the new one.
    let blue = service.pid("blue").expect("the first instance's pid");
    run(&recipe_step(&doc, "Upgrade without ending a session"), "alice");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while Path::new(&format!("/proc/{blue}")).exists() {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(std::time::Instant::now() < deadline, "the old instance did not exit:\n{log}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(log_text.contains("take-over done"), "{log_text}");
    let answer = ready_with(port, &token("bob"));
    assert!(answer.contains(r#""identity":"bob""#), "the new instance serves bob: {answer}");
    let installed = root.join("usr/local/bin/transport");
    assert_eq!(mode(&installed), 0o755, "the new binary installed");
    // The instances stopped first: their pids are in the directory.
    drop(service);
    drop(std::fs::remove_dir_all(&dir));
}
