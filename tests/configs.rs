//! No example config in `configs/` lets anyone in as shipped: `--check` refuses each and says
//! how to make a token, and accepts it once a token is supplied the way its comments say. An
//! unknown key is refused with its name and line. (The systemd units: `systemd.rs`.)

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

/// `--check` refuses the logging start-up would refuse, wherever it comes from: `RUST_LOG`,
/// `--log-level`, a `log.file` in a folder that does not exist; and names it.
#[test]
fn check_refuses_the_logging_start_up_would_refuse() {
    let good =
        "tokens: [T0ken-1234-5Ab8Cd3Ef6Gh9Ij2Kl]\nupstreams: [{name: main, address: 'db:3306'}]\n";
    let missing = "log:\n  file: /nonexistent/sqltunnel/transport.log\n";
    for (yaml, env, flags, named) in [
        (good.to_owned(), Some("transport=loud"), &[][..], "RUST_LOG"),
        (good.to_owned(), None, &["--log-level", "verbose"][..], "log.level"),
        (format!("{good}{missing}"), None, &[][..], "/nonexistent/sqltunnel"),
    ] {
        let path = std::env::temp_dir().join(format!("sqltunnel-logs-{}.yaml", std::process::id()));
        std::fs::write(&path, &yaml).expect("write");
        let mut command = Command::new(bin_dir().join("transport"));
        command.arg("--config").arg(&path).arg("--check").args(flags).env_remove("RUST_LOG");
        if let Some(filter) = env {
            command.env("RUST_LOG", filter);
        }
        let out = command.output().expect("--check");
        drop(std::fs::remove_file(&path));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{named} passed --check");
        assert!(said.contains(named) && said.contains("transport:"), "{said}");
    }
    let (ok, said) = check_text("transport", "logs-ok", good, &[]);
    assert!(ok, "{said}");
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
