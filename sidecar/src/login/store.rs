//! Where a login is kept between runs: its refresh token, who logged in and when. In the
//! system's credential store on macOS (Keychain) and Windows (Credential Manager); elsewhere,
//! and wherever that store cannot be used, in a file only its owner may read
//! (`$XDG_CONFIG_HOME/sqltunnel/logins/`, or `~/.config/…`; `%APPDATA%\sqltunnel\logins\` on
//! Windows). One login per issuer and client id.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::LoginConfig;
use crate::Error;

/// The credential store's service name.
#[cfg(any(target_os = "macos", windows))]
const SERVICE: &str = "sqltunnel";

/// A login as kept.
#[derive(Serialize, Deserialize)]
pub struct Saved {
    /// The refresh token.
    pub refresh_token: String,
    /// Who logged in (the access token's `email`, `preferred_username` or `sub`).
    pub who: String,
    /// When (seconds since the Unix epoch).
    pub since: u64,
}

impl std::fmt::Debug for Saved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Saved")
            .field("who", &self.who)
            .field("since", &self.since)
            .finish_non_exhaustive()
    }
}

/// The key of a login: its issuer and client id.
fn key(config: &LoginConfig) -> String {
    format!("{} {}", config.issuer.trim_end_matches('/'), config.client_id)
}

/// The file a login is kept in, when it is kept in a file.
fn file(config: &LoginConfig) -> Result<PathBuf, Error> {
    let base = if cfg!(windows) {
        std::env::var_os("APPDATA").map(PathBuf::from)
    } else {
        std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
    };
    let nowhere = "no place to keep the login (neither XDG_CONFIG_HOME nor HOME is set)";
    let base = base.ok_or_else(|| Error::Login(nowhere.into()))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, key(config).as_bytes());
    let name: String = digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(base.join("sqltunnel").join("logins").join(format!("{name}.json")))
}

/// Keeps `saved`; answers where.
pub fn save(config: &LoginConfig, saved: &Saved) -> Result<String, Error> {
    let text = serde_json::to_string(saved).map_err(|e| Error::Login(e.to_string()))?;
    #[cfg(any(target_os = "macos", windows))]
    {
        let kept = keyring::Entry::new(SERVICE, &key(config)).and_then(|e| e.set_password(&text));
        match kept {
            Ok(()) => return Ok("the system's credential store".into()),
            Err(e) => {
                tracing::warn!(error = %e, "the credential store cannot keep the login: a file keeps it")
            }
        }
    }
    let path = file(config)?;
    write_private(&path, text.as_bytes())
        .map_err(|e| Error::Login(format!("cannot write {}: {e}", path.display())))?;
    Ok(path.display().to_string())
}

/// The login kept for `config`, if any.
pub fn load(config: &LoginConfig) -> Result<Option<Saved>, Error> {
    #[cfg(any(target_os = "macos", windows))]
    {
        if let Ok(text) = keyring::Entry::new(SERVICE, &key(config)).and_then(|e| e.get_password())
        {
            return serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| Error::Login(format!("the kept login is unreadable: {e}")));
        }
    }
    let path = file(config)?;
    match std::fs::read(&path) {
        Ok(text) => serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| Error::Login(format!("{} is unreadable: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Login(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Forgets the login kept for `config`; true when there was one.
pub fn forget(config: &LoginConfig) -> Result<bool, Error> {
    #[cfg(any(target_os = "macos", windows))]
    let forgot =
        keyring::Entry::new(SERVICE, &key(config)).and_then(|e| e.delete_credential()).is_ok();
    #[cfg(not(any(target_os = "macos", windows)))]
    let forgot = false;
    let path = file(config)?;
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(forgot),
        Err(e) => Err(Error::Login(format!("cannot remove {}: {e}", path.display()))),
    }
}

/// Writes `bytes` to `path` readable by its owner only (0600 where modes exist), replacing it
/// whole (a temporary file renamed over it).
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        // The folder its owner's only too (0700), so nobody else lists the logins kept.
        let mut folder = std::fs::DirBuilder::new();
        folder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut folder, 0o700);
        folder.create(dir)?;
    }
    let temporary = path.with_extension("json.new");
    drop(std::fs::remove_file(&temporary));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&temporary)?;
    out.write_all(bytes)?;
    out.sync_all()?;
    drop(out);
    std::fs::rename(&temporary, path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_login_is_kept_in_a_file_only_its_owner_reads_and_forgotten() {
        let dir = std::env::temp_dir().join(format!("sqltunnel-store-{}", std::process::id()));
        let path = dir.join("sqltunnel").join("logins").join("x.json");
        write_private(&path, b"{}").expect("write");
        write_private(&path, b"{\"a\":1}").expect("replace");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).expect("meta").permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        let folder = std::fs::metadata(path.parent().expect("folder")).expect("meta");
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&folder.permissions()) & 0o777, 0o700);
        assert_eq!(std::fs::read(&path).expect("read"), b"{\"a\":1}");
        drop(std::fs::remove_dir_all(&dir));
    }
}
