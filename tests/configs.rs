//! No example config in `configs/` lets anyone in as shipped: `--check` refuses each and says
//! how to make a token, and accepts it once a token is supplied the way its comments say. An
//! unknown key is refused with its name and line; the systemd units pass `systemd-analyze
//! verify`, and the transport unit's recipe in docs/deploy/transport.md runs as written (but
//! for its paths) and revokes a person with a reload.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use e2e::processes::bin_dir;

fn configs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

fn check(bin: &str, path: &Path) -> (bool, String) {
    check_with(bin, path, &[])
}

/// `--check` with `env` set and no `SQLTUNNEL_TOKEN` but the one `env` gives.
fn check_with(bin: &str, path: &Path, env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(bin_dir().join(bin))
        .arg("--config")
        .arg(path)
        .arg("--check")
        .env_remove("SQLTUNNEL_TOKEN")
        .envs(env.iter().copied())
        .output()
        .expect("run --check");
    (
        out.status.success(),
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
    )
}

/// `--check` of `text` written to a file of its own.
fn check_text(bin: &str, tag: &str, text: &str, env: &[(&str, &str)]) -> (bool, String) {
    let path = std::env::temp_dir().join(format!("sqltunnel-{tag}-{}.yaml", std::process::id()));
    std::fs::write(&path, text).expect("write");
    let checked = check_with(bin, &path, env);
    drop(std::fs::remove_file(&path));
    checked
}

/// A token made by `transport gen-token`.
fn gen_token() -> String {
    let out =
        Command::new(bin_dir().join("transport")).arg("gen-token").output().expect("gen-token");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `token`'s hash, by `transport hash-token` (the token on its standard input).
fn hash_token(token: &str) -> String {
    let mut child = Command::new(bin_dir().join("transport"))
        .arg("hash-token")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("hash-token");
    child.stdin.take().expect("stdin").write_all(format!("{token}\n").as_bytes()).expect("write");
    let out = child.wait_with_output().expect("hash-token");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `text` with the commented-out line `first` and the `lines - 1` after it uncommented (their
/// leading `# ` taken off), as a reader of the example would.
fn uncomment(text: &str, first: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let at = all.iter().position(|l| *l == first).unwrap_or_else(|| panic!("no `{first}` line"));
    all.iter()
        .enumerate()
        .map(|(i, l)| {
            let l = if (at..at + lines).contains(&i) {
                l.strip_prefix("# ").unwrap_or_else(|| panic!("`{l}` is not commented out"))
            } else {
                l
            };
            format!("{l}\n")
        })
        .collect()
}

/// The team example with a made token's hash in place of each `<transport hash-token <
/// NAME.token>`, as its header says.
fn identities_example_with_hashes() -> String {
    let mut text = std::fs::read_to_string(configs_dir().join("transport.identities.example.yaml"))
        .expect("read example");
    for name in ["alice", "bob", "carol"] {
        let placeholder = format!("<transport hash-token < {name}.token>");
        assert!(text.contains(&placeholder), "{placeholder}");
        text = text.replace(&placeholder, &hash_token(&gen_token()));
    }
    text
}

#[test]
fn example_configs_let_nobody_in_until_a_token_is_made() {
    let mut examples: Vec<String> = std::fs::read_dir(configs_dir())
        .expect("configs dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    examples.sort();
    // Each is checked below: a new example belongs here too.
    assert_eq!(
        examples,
        ["sidecar.example.yaml", "transport.example.yaml", "transport.identities.example.yaml"]
    );
    let token = gen_token();
    let env = [("SQLTUNNEL_TOKEN", token.as_str())];

    // The transport's: nobody until an identity, a token or a token_env is added.
    let path = configs_dir().join("transport.example.yaml");
    let text = std::fs::read_to_string(&path).expect("read example");
    let (ok, output) = check_with("transport", &path, &env);
    assert!(!ok, "transport.example.yaml lets someone in as shipped: {output}");
    assert!(output.contains("must let someone in"), "{output}");
    assert!(output.contains("transport gen-token"), "{output}");
    let identity = uncomment(&text, "# identities:", 2)
        .replace("<the output of transport hash-token>", &hash_token(&token));
    let (ok, output) = check_text("transport", "identity", &identity, &[]);
    assert!(ok, "with an identity: {output}");
    let tokens = uncomment(&text, "# tokens:", 2);
    let (ok, output) = check_text("transport", "placeholder", &tokens, &[]);
    assert!(!ok && output.contains("placeholder"), "the placeholder token passed: {output}");
    let tokens = tokens.replace("replace-me-with-the-output-of-transport-gen-token", &token);
    let (ok, output) = check_text("transport", "tokens", &tokens, &[]);
    assert!(ok, "with a token: {output}");
    let from_env = uncomment(&text, "# token_env: SQLTUNNEL_TOKEN", 1);
    let (ok, output) = check_text("transport", "token-env", &from_env, &env);
    assert!(ok, "with SQLTUNNEL_TOKEN: {output}");
    let (ok, output) = check_text("transport", "token-env", &from_env, &[]);
    assert!(!ok && output.contains("SQLTUNNEL_TOKEN is not set"), "{output}");

    // The team's: every hash a placeholder until made.
    let path = configs_dir().join("transport.identities.example.yaml");
    let (ok, output) = check("transport", &path);
    assert!(!ok, "transport.identities.example.yaml lets someone in as shipped: {output}");
    assert!(output.contains("64 hex digits") && output.contains("hash-token"), "{output}");
    let (ok, output) = check_text("transport", "team", &identities_example_with_hashes(), &[]);
    assert!(ok, "with made hashes: {output}");

    // The sidecar's: the token comes from SQLTUNNEL_TOKEN.
    let path = configs_dir().join("sidecar.example.yaml");
    let (ok, output) = check("sidecar", &path);
    assert!(!ok, "sidecar.example.yaml has a token as shipped: {output}");
    assert!(output.contains("SQLTUNNEL_TOKEN is not set"), "{output}");
    let (ok, output) = check_with("sidecar", &path, &env);
    assert!(ok, "with SQLTUNNEL_TOKEN: {output}");
}

#[test]
fn check_names_an_unknown_key_and_its_line() {
    for bin in ["sidecar", "transport"] {
        let text = std::fs::read_to_string(configs_dir().join(format!("{bin}.example.yaml")))
            .expect("read example");
        let line = text.lines().count() + 1;
        let bad =
            std::env::temp_dir().join(format!("sqltunnel-bad-{bin}-{}.yaml", std::process::id()));
        std::fs::write(&bad, format!("{text}\nlisten_typo: 1\n")).expect("write");
        let (ok, output) = check(bin, &bad);
        drop(std::fs::remove_file(&bad));
        assert!(!ok, "{bin} accepted an unknown key");
        assert!(output.contains("listen_typo"), "{bin}: {output}");
        assert!(
            output.contains(&format!("line {}", line + 1))
                || output.contains(&format!("{}:", line + 1)),
            "{bin} names the line: {output}"
        );
    }
}

#[test]
fn check_names_a_duplicate_key_and_its_line_without_library_hints() {
    for (bin, yaml) in [
        (
            "transport",
            "tokens: [T0ken-1234-5Ab8Cd3Ef6Gh9Ij2Kl]\nupstreams:\n  - name: main\n    address: 'db:3306'\n    name: other\n",
        ),
        (
            "sidecar",
            "transport:\n  url: http://gw/\n  token: t\nlisten: 127.0.0.1:3306\nlisten: 127.0.0.1:3307\n",
        ),
    ] {
        let bad =
            std::env::temp_dir().join(format!("sqltunnel-dup-{bin}-{}.yaml", std::process::id()));
        std::fs::write(&bad, yaml).expect("write");
        let (ok, output) = check(bin, &bad);
        drop(std::fs::remove_file(&bad));
        assert!(!ok, "{bin} accepted a duplicate key");
        let (key, line) = if bin == "transport" { ("name", 5) } else { ("listen", 5) };
        assert!(output.contains(&format!("duplicate mapping key `{key}`")), "{bin}: {output}");
        assert!(output.contains(&format!("line {line}")), "{bin}: {output}");
        assert!(!output.contains("DuplicateKeyPolicy"), "{bin}: {output}");
    }
}

#[test]
fn check_reads_the_tls_files_start_up_would_read() {
    let bad = std::env::temp_dir().join(format!("sqltunnel-tlsfiles-{}.yaml", std::process::id()));
    std::fs::write(
        &bad,
        "tokens: [T0ken-1234-5Ab8Cd3Ef6Gh9Ij2Kl]\nupstreams: [{name: main, address: 'db:3306'}]\ntls:\n  cert_file: /nonexistent/cert.pem\n  key_file: /nonexistent/key.pem\n",
    )
    .expect("write");
    let (ok, output) = check("transport", &bad);
    drop(std::fs::remove_file(&bad));
    assert!(!ok, "a missing certificate file passed --check");
    assert!(output.contains("/nonexistent/cert.pem"), "{output}");
}

#[test]
fn check_refuses_invalid_values_with_the_cause() {
    let bad = std::env::temp_dir().join(format!("sqltunnel-badval-{}.yaml", std::process::id()));
    std::fs::write(
        &bad,
        "tokens: [short]\nupstreams: [{name: main, address: 'db:3306'}]\nsession_timeout: 30\n",
    )
    .expect("write");
    let (ok, output) = check("transport", &bad);
    drop(std::fs::remove_file(&bad));
    assert!(!ok);
    assert!(output.contains("missing unit"), "{output}");
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
    verify_unit("sqltunnel-transport.service", "/usr/local/bin/transport", "transport", false);
    verify_unit("sqltunnel-sidecar.service", "%h/.cargo/bin/sidecar", "sidecar", true);
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

/// Ends the transport the recipe's `systemctl` started (its pid in a file), however the test
/// ends.
struct Service(PathBuf);

impl Drop for Service {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            drop(Command::new("kill").arg("-9").arg(pid.trim()).status());
        }
    }
}

/// The systemd recipe of docs/deploy/transport.md, its blocks run as written but for where they
/// act (a scratch root for `/etc`, a free port for 8080) and without systemd as PID 1: `sudo`
/// runs its command, `systemctl enable --now` starts the installed unit's own `ExecStart` (as
/// `nobody` when the test runs as root, as the unit's transient user cannot read a root-only
/// file either), and `systemctl reload` is the unit's SIGHUP. The person's token is accepted,
/// and refused (401) once the recipe removes them and reloads; another person's stays.
#[test]
fn the_systemd_recipe_runs_as_written_and_a_reload_revokes() {
    let doc = std::fs::read_to_string(configs_dir().join("../docs/deploy/transport.md"))
        .expect("docs/deploy/transport.md");
    let unit_file = configs_dir().join("systemd/sqltunnel-transport.service");
    let unit = std::fs::read_to_string(&unit_file).expect("unit");
    // The unit's own install comment gives the same commands as the doc.
    for command in unit.lines().filter_map(|l| l.strip_prefix("#   ")) {
        assert!(doc.lines().any(|l| l.trim() == command.trim()), "not in the doc: {command}");
    }
    assert!(!unit.contains("\nLoadCredential="), "a credential is copied once: a reload misses it");
    assert!(unit.contains("\nLimitCORE=0\n") && unit.contains("\nDynamicUser=yes\n"));

    let dir = std::env::temp_dir().join(format!("sqltunnel-recipe-{}", std::process::id()));
    let (root, work, shims) = (dir.join("root"), dir.join("work"), dir.join("shims"));
    for d in [&work, &shims, &root.join("etc/systemd/system")] {
        std::fs::create_dir_all(d).expect("dir");
    }
    std::os::unix::fs::symlink(configs_dir(), work.join("configs")).expect("configs");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let pid_file = dir.join("transport.pid");
    let _service = Service(pid_file.clone());
    let shim = |name: &str, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = shims.join(name);
        std::fs::write(&path, text).expect("shim");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    shim("sudo", "#!/bin/sh\nexec \"$@\"\n");
    shim(
        "systemctl",
        r#"#!/bin/bash
set -euo pipefail
unit="$ROOT/etc/systemd/system/sqltunnel-transport.service"
case "$*" in
    daemon-reload) test -f "$unit" ;;
    "enable --now sqltunnel-transport")
        exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
        exec_start=${exec_start//\/usr\/local\/bin\/transport/$TRANSPORT}
        exec_start=${exec_start//\/etc\//$ROOT\/etc\/}
        env_file=$(sed -n 's/^EnvironmentFile=-\?//p' "$unit")
        env_file=${env_file//\/etc\//$ROOT\/etc\/}
        if [[ -f $env_file ]]; then set -a; . "$env_file"; set +a; fi
        as=()
        [[ $(id -u) -ne 0 ]] || as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
        umask 0077
        "${as[@]}" $exec_start --listen "127.0.0.1:$PORT" >"$LOG" 2>&1 </dev/null &
        echo $! >"$PID_FILE" ;;
    "reload sqltunnel-transport") kill -HUP "$(cat "$PID_FILE")" ;;
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
    let run = |step: &str, name: &str| -> String {
        let script = step
            .replace("/etc/", &format!("{}/etc/", root.display()))
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
            .output()
            .expect("bash");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(out.status.success(), "{script}\n{said}\ntransport's log:\n{log}");
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
    for name in ["alice", "bob"] {
        let said = run(&recipe_step(&doc, "Add a person"), name);
        assert!(said.contains(": ok"), "{said}");
    }
    assert_eq!(mode(&work.join("alice.token")), 0o600, "the token is its owner's only");
    let token = |name: &str| {
        std::fs::read_to_string(work.join(format!("{name}.token")))
            .expect("token")
            .trim()
            .to_owned()
    };
    let said = run(&recipe_step(&doc, "Start"), "alice");
    assert!(said.contains(r#""identity":"alice""#), "{said}");
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
    drop(std::fs::remove_dir_all(&dir));
}

/// Plain tokens from a file of tokens, one per line (`tokens_file`), with an audit file in a
/// logs directory.
#[test]
fn tokens_come_from_a_file_of_tokens_and_the_audit_from_a_logs_directory() {
    let dir = std::env::temp_dir().join(format!("sqltunnel-credentials-{}", std::process::id()));
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).expect("dir");
    let tokens = dir.join("tokens");
    let example = std::fs::read_to_string(configs_dir().join("transport.example.yaml"))
        .expect("read example");
    let config = dir.join("transport.yaml");
    let with = |tokens_file: &std::path::Path| {
        let extra = format!(
            "tokens_file: {}\naudit:\n  path: {}\n",
            tokens_file.display(),
            logs.join("audit.jsonl").display()
        );
        std::fs::write(&config, format!("{example}{extra}")).expect("write");
    };
    std::fs::write(
        &tokens,
        "# the team's tokens\nfirst-T0ken-4Gh7Jk2Lm9Np5Qr8\n\nsecond-T0ken-6Vb3Nm8Xc1Zs4Df7\n",
    )
    .expect("tokens");
    with(&tokens);
    let (ok, output) = check("transport", &config);
    assert!(ok, "{output}");
    std::fs::write(&tokens, "# nobody yet\n").expect("tokens");
    let (ok, output) = check("transport", &config);
    assert!(!ok && output.contains("must let someone in"), "{output}");
    with(&dir.join("missing"));
    let (ok, output) = check("transport", &config);
    assert!(!ok && output.contains("tokens_file"), "{output}");
    drop(std::fs::remove_dir_all(&dir));
}

#[test]
fn check_rejects_a_malformed_token_hash_and_an_unknown_upstream() {
    let example = identities_example_with_hashes();
    let hash = example
        .lines()
        .find_map(|l| l.trim().strip_prefix("token_sha256: "))
        .expect("a token_sha256 in the example")
        .to_owned();
    let cases = [
        (example.replace(&hash, &hash[1..]), "64 hex digits"),
        (example.replace(&hash, &format!("{}x", &hash[1..])), "64 hex digits"),
        (example.replace("upstreams: [reporting]", "upstreams: [nowhere]"), "\"nowhere\""),
    ];
    for (i, (text, said)) in cases.into_iter().enumerate() {
        let bad = std::env::temp_dir()
            .join(format!("sqltunnel-bad-identity-{i}-{}.yaml", std::process::id()));
        std::fs::write(&bad, text).expect("write");
        let (ok, output) = check("transport", &bad);
        drop(std::fs::remove_file(&bad));
        assert!(!ok && output.contains(said), "case {i}: {output}");
    }
}

#[test]
fn version_names_the_commit_and_the_target() {
    let head = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    for bin in ["sidecar", "transport"] {
        let out = Command::new(bin_dir().join(bin)).arg("--version").output().expect("--version");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{said}");
        assert!(
            said.contains(env!("CARGO_PKG_VERSION")) && said.contains("x86_64-unknown-linux"),
            "{said}"
        );
        // A build from a git checkout names its commit (the binaries may be one commit behind
        // a test run that committed since; any 12 hex digits do then).
        let commit = said.split("commit ").nth(1).and_then(|r| r.split(',').next()).unwrap_or("");
        assert!(
            commit == head || (commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
            "{said}"
        );
    }
}

/// The launchd agent is a valid property list (Python's `plistlib`, the parser of Apple's
/// format; `plutil -lint` where it exists) that starts the sidecar with its config, at login,
/// again after a failure, with time to drain.
#[test]
fn the_launchd_agent_is_a_valid_property_list() {
    let path = configs_dir().join("launchd").join("com.sqltunnel.sidecar.plist");
    let script = r#"
import json, plistlib, sys
with open(sys.argv[1], "rb") as f:
    print(json.dumps(plistlib.load(f)))
"#;
    let out = Command::new("python3").arg("-c").arg(script).arg(&path).output().expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plist: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(plist["Label"], "com.sqltunnel.sidecar");
    let argv: Vec<&str> = plist["ProgramArguments"]
        .as_array()
        .expect("argv")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(argv[0].ends_with("/sidecar") && argv[1] == "--config", "{argv:?}");
    assert!(argv[2].ends_with("sqltunnel/sidecar.yaml"), "{argv:?}");
    assert_eq!(plist["RunAtLoad"], true);
    assert_eq!(plist["KeepAlive"]["SuccessfulExit"], false);
    assert!(plist["ExitTimeOut"].as_u64().is_some_and(|s| s >= 10));
    if let Ok(lint) = Command::new("plutil").arg("-lint").arg(&path).output() {
        assert!(lint.status.success(), "{}", String::from_utf8_lossy(&lint.stdout));
    }
}
