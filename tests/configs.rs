//! Every file in `configs/` is accepted by `--check` of the binary it configures, and an
//! unknown key is refused with its name and line.

use std::path::PathBuf;
use std::process::Command;

use e2e::processes::bin_dir;

fn configs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

fn check(bin: &str, path: &std::path::Path) -> (bool, String) {
    let out = Command::new(bin_dir().join(bin))
        .arg("--config")
        .arg(path)
        .arg("--check")
        .output()
        .expect("run --check");
    (
        out.status.success(),
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
    )
}

#[test]
fn check_accepts_every_example_config() {
    let mut checked = 0;
    for entry in std::fs::read_dir(configs_dir()).expect("configs dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let bin = match name.split('.').next() {
            Some("sidecar") if name.ends_with(".yaml") => "sidecar",
            Some("transport") if name.ends_with(".yaml") => "transport",
            _ => continue,
        };
        let (ok, output) = check(bin, &path);
        assert!(ok, "{name} rejected: {output}");
        checked += 1;
    }
    assert!(checked >= 2, "both example configs were checked");
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
            "tokens: [token-1234]\nupstreams:\n  - name: main\n    address: 'db:3306'\n    name: other\n",
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
        "tokens: [token-1234]\nupstreams: [{name: main, address: 'db:3306'}]\ntls:\n  cert_file: /nonexistent/cert.pem\n  key_file: /nonexistent/key.pem\n",
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

/// The shipped unit's way of passing tokens: a root-only file of tokens, one per line, named by
/// `tokens_file` (systemd's `LoadCredential=`), with an audit file in its logs directory.
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
        let text: String = example
            .lines()
            .filter(|l| !l.starts_with("tokens:") && *l != "  - change-me-please")
            .map(|l| format!("{l}\n"))
            .collect();
        let extra = format!(
            "tokens_file: {}\naudit:\n  path: {}\n",
            tokens_file.display(),
            logs.join("audit.jsonl").display()
        );
        std::fs::write(&config, format!("{text}{extra}")).expect("write");
    };
    std::fs::write(
        &tokens,
        "# the team's tokens\nfirst-token-0123456789\n\nsecond-token-0123456789\n",
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
    let example = std::fs::read_to_string(configs_dir().join("transport.identities.example.yaml"))
        .expect("read example");
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
