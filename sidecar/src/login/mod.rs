//! `sidecar login` and `sidecar logout`: a person's single sign-on, built in. The person logs in
//! at the team's OpenID Provider through the system browser (`flows::with_browser`) or, with
//! `--device` (SSH, no browser), on any other device (`flows::with_device`); the refresh token
//! is kept (`store.rs`), and the running sidecar gets each access token from it
//! ([`Refresher`]), silently, until the provider ends the login: then a client gets a MySQL
//! error that says to run `sidecar login`.

mod browser;
mod flows;
mod idp;
mod store;

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

pub use crate::login_config::LoginConfig;

use crate::Error;
use crate::config::SidecarConfig;
use crate::tunnel::jwt_claims;

/// The running sidecar's source of access tokens: a refresh of the kept login.
#[derive(Debug)]
pub struct Refresher {
    config: LoginConfig,
    idp: idp::Idp,
}

impl Refresher {
    /// The refresher of the login `config` names.
    pub fn new(config: &LoginConfig) -> Result<Self, Error> {
        Ok(Self { config: config.clone(), idp: idp::Idp::new(&config.issuer)? })
    }

    /// A new access token; a rotated refresh token is kept. [`Error::LoginNeeded`] when only a
    /// new `sidecar login` helps, [`Error::LoginFailed`] when the provider cannot give one now.
    pub async fn access_token(&self) -> Result<String, Error> {
        let issuer = self.idp.issuer();
        let saved = store::load(&self.config)
            .map_err(|e| Error::LoginNeeded(e.to_string()))?
            .ok_or_else(|| Error::LoginNeeded(format!("nobody is logged in at {issuer}")))?;
        let endpoints = self.idp.discover().await.map_err(|e| Error::LoginFailed(e.to_string()))?;
        match flows::refresh(&self.config, &self.idp, &endpoints, &saved.refresh_token).await {
            Ok(tokens) => {
                if let Some(rotated) = tokens.refresh.filter(|r| *r != saved.refresh_token) {
                    let saved = store::Saved { refresh_token: rotated, ..saved };
                    store::save(&self.config, &saved)
                        .map_err(|e| Error::LoginFailed(e.to_string()))?;
                }
                Ok(tokens.access)
            }
            Err(flows::RefreshFailed::Refused(why)) => Err(Error::LoginNeeded(format!(
                "the login of {} at {issuer} has ended ({why})",
                saved.who
            ))),
            Err(flows::RefreshFailed::Unreachable(why)) => Err(Error::LoginFailed(why)),
        }
    }
}

/// `sidecar login [--device]`.
pub fn login_command(config: SidecarConfig, flags: &[&str]) -> ExitCode {
    let device = flags.contains(&"device");
    finish("login", config, |login| async move {
        let idp = idp::Idp::new(&login.issuer)?;
        let endpoints = idp.discover().await?;
        let tokens = if device {
            flows::with_device(&login, &idp, &endpoints).await?
        } else {
            flows::with_browser(&login, &idp, &endpoints).await?
        };
        let Some(refresh_token) = tokens.refresh else {
            return Err(Error::Login("the provider gave no refresh token: add `offline_access` to transport.login.scopes (or allow refresh tokens for this client)".into()));
        };
        let who = who(&tokens.access);
        let since = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let kept = store::save(&login, &store::Saved { refresh_token, who: who.clone(), since })?;
        Ok(format!(
            "Logged in as {who} at {}; the login is kept in {kept}. The sidecar renews its token until the provider ends the login.",
            login.issuer
        ))
    })
}

/// `sidecar logout`.
pub fn logout_command(config: SidecarConfig, _flags: &[&str]) -> ExitCode {
    finish("logout", config, |login| async move {
        Ok(match store::forget(&login)? {
            true => format!("Logged out of {}.", login.issuer),
            false => format!("Nobody was logged in at {}.", login.issuer),
        })
    })
}

/// Who is logged in for `config`, for `sidecar check`: a line, or why nobody is.
pub fn status(config: &LoginConfig) -> Result<String, Error> {
    let saved = store::load(config)?.ok_or_else(|| {
        Error::Login(format!("nobody is logged in at {}: run `sidecar login`", config.issuer))
    })?;
    Ok(format!(
        "logged in as {} at {} since {} (the provider decides until when)",
        saved.who,
        config.issuer,
        since(saved.since)
    ))
}

/// Runs `task` for the configured login on a runtime of its own; prints its outcome.
fn finish<F, Fut>(what: &str, config: SidecarConfig, task: F) -> ExitCode
where
    F: FnOnce(LoginConfig) -> Fut,
    Fut: std::future::Future<Output = Result<String, Error>>,
{
    let Some(login) = config.transport.login.clone() else {
        eprintln!(
            "sidecar {what}: transport.login is not set (the provider's issuer and this sidecar's client id there): see docs/connect.md"
        );
        return ExitCode::FAILURE;
    };
    let outcome = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(task(login)),
        Err(e) => Err(Error::Login(format!("cannot start a runtime: {e}"))),
    };
    match outcome {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sidecar {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Who an access token names: its `email`, `preferred_username` or `sub` claim.
fn who(access_token: &str) -> String {
    let claims = jwt_claims(access_token).unwrap_or_default();
    ["email", "preferred_username", "sub"]
        .iter()
        .find_map(|name| claims.get(*name).and_then(serde_json::Value::as_str))
        .unwrap_or("(a person the token does not name)")
        .to_owned()
}

/// A time in seconds since the Unix epoch, as UTC text.
fn since(seconds: u64) -> String {
    let at =
        i64::try_from(seconds).ok().and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok());
    at.map_or_else(
        || seconds.to_string(),
        |at| format!("{} {:02}:{:02} UTC", at.date(), at.hour(), at.minute()),
    )
}

#[cfg(test)]
mod tests {
    use super::since;

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(since(0), "1970-01-01 00:00 UTC");
        assert_eq!(since(1_795_857_419), "2026-11-28 09:16 UTC");
        assert_eq!(since(951_782_400), "2000-02-29 00:00 UTC");
    }
}
