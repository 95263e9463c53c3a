//! What a configuration leaves exposed (security review F18), said as a warning once at
//! start-up and as a `warn` line of `sidecar check`: a plain `http://` transport on another
//! machine (the token, `users` passwords and every result cross the network in clear), and
//! secrets in files other users of this machine may read (Unix).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::config::SidecarConfig;
use crate::tunnel::is_loopback;

/// One thing the configuration leaves exposed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// `transport.url` is plain `http://` to a host that is not this machine.
    PlainHttp {
        /// The URL.
        url: String,
    },
    /// A file holding secrets that its group or everyone may read.
    ReadableSecrets {
        /// Which file: `the config file` or `transport.token_file`.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

impl fmt::Display for Exposure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exposure::PlainHttp { url } => write!(
                f,
                "transport.url {url} is plain http:// to another machine: the transport token, `users` passwords and every query and result cross the network unencrypted; use https://"
            ),
            Exposure::ReadableSecrets { what, path, mode } => write!(
                f,
                "{what} {} holds secrets and other users of this machine may read it (mode {:o}): chmod 600 {}",
                path.display(),
                mode & 0o777,
                path.display()
            ),
        }
    }
}

/// Everything `config` leaves exposed.
pub fn exposures(config: &SidecarConfig) -> Vec<Exposure> {
    let mut found = Vec::new();
    let url = &config.transport.url;
    if plain_http_elsewhere(url) {
        found.push(Exposure::PlainHttp { url: url.clone() });
    }
    let files = [
        ("the config file", config.loaded_from.clone().filter(|_| holds_secrets(config))),
        ("transport.token_file", config.transport.token_file.as_ref().map(PathBuf::from)),
    ];
    for (what, path) in files {
        let Some(path) = path else { continue };
        if let Some(mode) = readable_by_others(&path) {
            found.push(Exposure::ReadableSecrets { what, path, mode });
        }
    }
    found
}

/// True for an `http://` URL whose host is not this machine.
fn plain_http_elsewhere(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else { return false };
    let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    uri.scheme_str() == Some("http") && !is_loopback(host)
}

/// True when the config file itself holds a secret: an inline token, `users` passwords, or a
/// proxy's credentials.
fn holds_secrets(config: &SidecarConfig) -> bool {
    let t = &config.transport;
    let inline_token = t.token.is_some() && t.token_env.is_none() && t.token_file.is_none();
    let proxy_password = t.proxy.as_deref().is_some_and(|p| p.contains('@'));
    inline_token || proxy_password || !config.users.is_empty()
}

/// The permission bits of `path` when its group or others may read it.
#[cfg(unix)]
fn readable_by_others(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o044 != 0).then_some(mode)
}

/// Elsewhere, file permissions are not checked.
#[cfg(not(unix))]
fn readable_by_others(_path: &Path) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use common::config::parse_yaml;

    use super::*;

    fn config(url: &str, extra: &str) -> SidecarConfig {
        let yaml = format!("transport:\n  url: {url}\n  token: t0ken-t0ken\n{extra}");
        parse_yaml(&yaml).expect("config")
    }

    #[test]
    fn plain_http_to_another_machine_is_named() {
        for url in ["http://10.0.0.5:8080/", "http://transport.example/db/", "http://[fd00::1]:80/"]
        {
            assert_eq!(exposures(&config(url, "")), [Exposure::PlainHttp { url: url.into() }]);
        }
        for url in [
            "https://transport.example/",
            "http://127.0.0.1:8080/",
            "http://LOCALHOST:8080/",
            "http://[::1]:8080/",
        ] {
            assert!(exposures(&config(url, "")).is_empty(), "{url}");
        }
        let text = Exposure::PlainHttp { url: "http://db-gw/".into() }.to_string();
        assert!(text.contains("plain http://") && text.ends_with("use https://"), "{text}");
    }

    #[cfg(unix)]
    #[test]
    fn secret_files_others_may_read_are_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sqltunnel-exposure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (token, file) = (dir.join("token"), dir.join("sidecar.yaml"));
        for path in [&token, &file] {
            std::fs::write(path, "x").expect("write");
        }
        let set = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        };
        let https = "https://transport.example/";
        let mut with_users = config(https, "users:\n  - {name: a, password: p, upstream: main}\n");
        with_users.loaded_from = Some(file.clone());
        let mut token_only = config(https, "");
        token_only.transport.token_file = Some(token.to_string_lossy().into_owned());
        token_only.loaded_from = Some(file.clone());
        set(&file, 0o644);
        set(&token, 0o640);
        let named = exposures(&with_users);
        assert!(matches!(&named[..], [Exposure::ReadableSecrets { what: "the config file", .. }]));
        assert!(named[0].to_string().contains("(mode 644): chmod 600"), "{}", named[0]);
        // The file holds no secret of its own here: only the token file is named.
        let named = exposures(&token_only);
        assert!(
            matches!(&named[..], [Exposure::ReadableSecrets { what: "transport.token_file", mode, .. }] if mode & 0o777 == 0o640)
        );
        set(&file, 0o600);
        set(&token, 0o600);
        assert!(exposures(&with_users).is_empty());
        assert!(exposures(&token_only).is_empty());
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
