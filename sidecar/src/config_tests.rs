//! The sidecar configuration's parsing, defaults and validation.

use common::config::parse_yaml;

use super::*;

const MINIMAL: &str = "listen: 127.0.0.1:3306\ntransport:\n  url: http://127.0.0.1:8080/\n  token: change-me\nusers:\n  - name: app\n    password: app-pw\n    upstream: main\n";

#[test]
fn minimal_config_parses() {
    let c: SidecarConfig = parse_yaml(MINIMAL).expect("parses");
    assert!(c.validate().is_ok());
    let u = c.user("app").expect("user");
    assert_eq!(u.upstream_user(), "app");
    assert_eq!(u.upstream_password().expose(), "app-pw");
    assert_eq!(c.heartbeat_interval, Duration::from_secs(5));
}

#[test]
fn auth_mode_defaults_follow_users() {
    let c: SidecarConfig = parse_yaml(MINIMAL).expect("parses");
    assert!(!c.passthrough());
    let without_users = MINIMAL.split("users:").next().unwrap_or_default();
    let c: SidecarConfig = parse_yaml(without_users).expect("parses");
    assert!(c.passthrough() && c.validate().is_ok());
    let c: SidecarConfig =
        parse_yaml(&format!("{without_users}auth:\n  mode: users\n")).expect("parses");
    assert!(c.validate().is_err());
    let both = format!("{MINIMAL}auth:\n  mode: passthrough\n  upstream: other\n");
    let c: SidecarConfig = parse_yaml(&both).expect("parses");
    assert!(c.passthrough());
    assert_eq!(c.passthrough_upstream(), "other");
    assert_eq!(c.default_upstream(), "main");
}

#[test]
fn unknown_nested_key_is_named() {
    let err = parse_yaml::<SidecarConfig>(&MINIMAL.replace("  token:", "  tokn:"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("tokn"), "{err}");
}

#[test]
fn an_empty_local_password_is_refused() {
    let yaml = MINIMAL.replace("password: app-pw", "password: \"\"");
    let c: SidecarConfig = parse_yaml(&yaml).expect("parses");
    let e = c.validate().expect_err("refused").to_string();
    assert!(e.contains("users[0] (\"app\"): `password` is empty"), "{e}");
    // An empty upstream password is the upstream's business.
    let yaml = format!("{MINIMAL}    upstream_password: \"\"\n");
    let c: SidecarConfig = parse_yaml(&yaml).expect("parses");
    assert!(c.validate().is_ok());
}
