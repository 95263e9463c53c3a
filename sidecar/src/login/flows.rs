//! The OAuth 2.0 grants of `sidecar login`: the authorization code with PKCE (RFC 7636)
//! through the system browser and a loopback redirect (RFC 8252), the device authorization
//! grant (RFC 8628) where no browser is at hand, and the refresh token grant the running
//! sidecar uses to get each new access token.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::LoginConfig;
use super::browser;
use super::idp::{Endpoints, Idp};
use crate::Error;

/// Longest a device code is polled for, whatever the provider says.
const DEVICE_LIMIT: Duration = Duration::from_secs(15 * 60);
/// The device grant's type.
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// What a grant gave. Its `Debug` shows no token.
pub struct Tokens {
    /// The access token the transport checks.
    pub access: String,
    /// The refresh token, when one was issued (a rotated one replaces the old).
    pub refresh: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens(***)")
    }
}

/// Why a refresh failed.
#[derive(Debug)]
pub enum RefreshFailed {
    /// The provider refused the refresh token (expired, revoked): a new login is needed.
    Refused(String),
    /// The provider could not be asked, or answered nonsense.
    Unreachable(String),
}

/// The parameters every request of the login names.
fn common<'a>(config: &'a LoginConfig, scope: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut form = vec![("client_id", config.client_id.as_str()), ("scope", scope)];
    if let Some(resource) = &config.resource {
        form.push(("resource", resource.as_str()));
    }
    form
}

/// `n` random bytes, base64url: a PKCE verifier, a state.
fn random_text(n: usize) -> Result<String, Error> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| Error::Login(format!("no randomness: {e}")))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Logs in through the system browser: the provider's page opens, the person logs in there,
/// and the provider sends the browser back to a port on this machine with a code.
pub async fn with_browser(
    config: &LoginConfig,
    idp: &Idp,
    ep: &Endpoints,
) -> Result<Tokens, Error> {
    // The page the system's opener is given: a provider's `file:` or program path would be
    // opened or run.
    idp.check(&ep.authorization_endpoint)?;
    let verifier = random_text(32)?;
    let challenge =
        URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()));
    let state = random_text(16)?;
    let listener = browser::Loopback::bind().await?;
    let redirect = listener.redirect_uri();
    let scope = config.scopes.join(" ");
    let mut query = common(config, &scope);
    query.extend([
        ("response_type", "code"),
        ("redirect_uri", redirect.as_str()),
        ("state", state.as_str()),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ]);
    let query = form_urlencoded::Serializer::new(String::new()).extend_pairs(&query).finish();
    let separator = if ep.authorization_endpoint.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}{query}", ep.authorization_endpoint);
    println!(
        "Log in at {} in your browser. If it does not open, open this address:\n\n  {url}\n",
        idp.issuer()
    );
    if let Err(e) = browser::open(&url) {
        println!(
            "(the browser could not be started: {e}; `sidecar login --device` needs no browser here)"
        );
    }
    let code = listener.code(&state).await?;
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("client_id", config.client_id.as_str()),
        ("code_verifier", verifier.as_str()),
    ];
    if let Some(resource) = &config.resource {
        form.push(("resource", resource.as_str()));
    }
    let (status, answer) = idp.post_form(&ep.token_endpoint, &form).await?;
    tokens(status, &answer)
        .map_err(|e| Error::Login(format!("the provider did not give tokens for the code: {e}")))
}

/// Logs in with the device grant: the person opens an address on any device, enters the code
/// shown, and logs in there, while this polls the provider.
pub async fn with_device(config: &LoginConfig, idp: &Idp, ep: &Endpoints) -> Result<Tokens, Error> {
    let Some(start) = &ep.device_authorization_endpoint else {
        return Err(Error::Login(format!(
            "the provider at {} has no device flow (no device_authorization_endpoint): log in with the browser (`sidecar login`)",
            idp.issuer()
        )));
    };
    let scope = config.scopes.join(" ");
    let (status, answer) = idp.post_form(start, &common(config, &scope)).await?;
    let text = |name: &str| answer.get(name).and_then(Value::as_str).map(str::to_owned);
    let (Some(device_code), Some(user_code), Some(verify)) =
        (text("device_code"), text("user_code"), text("verification_uri"))
    else {
        return Err(Error::Login(format!(
            "the device flow did not start (HTTP {status}): {}",
            describe(&answer)
        )));
    };
    println!("To log in, open {verify} on any device and enter the code\n\n  {user_code}\n");
    if let Some(complete) = text("verification_uri_complete") {
        println!("(or open {complete})\n");
    }
    let seconds =
        |name: &str, default: u64| answer.get(name).and_then(Value::as_u64).unwrap_or(default);
    let mut interval = Duration::from_secs(seconds("interval", 5).clamp(1, 60));
    let deadline = tokio::time::Instant::now()
        + Duration::from_secs(seconds("expires_in", 600)).min(DEVICE_LIMIT);
    let form = [
        ("grant_type", DEVICE_GRANT),
        ("device_code", device_code.as_str()),
        ("client_id", config.client_id.as_str()),
    ];
    loop {
        tokio::time::sleep(interval).await;
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Login(
                "the code expired before the login was done: run `sidecar login --device` again"
                    .into(),
            ));
        }
        let (status, answer) = idp.post_form(&ep.token_endpoint, &form).await?;
        match answer.get("error").and_then(Value::as_str) {
            Some("authorization_pending") => {}
            Some("slow_down") => interval += Duration::from_secs(5),
            Some(_) => {
                return Err(Error::Login(format!("the login was not done: {}", describe(&answer))));
            }
            None => return tokens(status, &answer),
        }
    }
}

/// A new access token for `refresh_token`.
pub async fn refresh(
    config: &LoginConfig,
    idp: &Idp,
    ep: &Endpoints,
    refresh_token: &str,
) -> Result<Tokens, RefreshFailed> {
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", config.client_id.as_str()),
    ];
    if let Some(resource) = &config.resource {
        form.push(("resource", resource.as_str()));
    }
    let (status, answer) = idp
        .post_form(&ep.token_endpoint, &form)
        .await
        .map_err(|e| RefreshFailed::Unreachable(e.to_string()))?;
    match answer.get("error").and_then(Value::as_str) {
        Some("invalid_grant" | "invalid_client" | "unauthorized_client") => {
            Err(RefreshFailed::Refused(describe(&answer)))
        }
        Some(_) => Err(RefreshFailed::Unreachable(describe(&answer))),
        None => tokens(status, &answer).map_err(|e| RefreshFailed::Unreachable(e.to_string())),
    }
}

/// The tokens of a token endpoint's answer.
fn tokens(status: u16, answer: &Value) -> Result<Tokens, Error> {
    let text = |name: &str| answer.get(name).and_then(Value::as_str).map(str::to_owned);
    match (status, text("access_token")) {
        (200, Some(access)) => Ok(Tokens { access, refresh: text("refresh_token") }),
        _ => Err(Error::Login(format!("HTTP {status}: {}", describe(answer)))),
    }
}

/// An OAuth error answer in a line: its code and description.
fn describe(answer: &Value) -> String {
    // The provider's words, without control characters (a terminal's escapes).
    let text = |name: &str| {
        let said = answer.get(name).and_then(Value::as_str).unwrap_or("");
        said.chars().filter(|c| !c.is_control()).take(300).collect::<String>()
    };
    match (text("error"), text("error_description")) {
        (error, _) if error.is_empty() => "no OAuth answer".into(),
        (error, description) if description.is_empty() => error,
        (error, description) => format!("{error}: {description}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_providers_words_lose_their_control_characters_and_tokens_their_debug() {
        let answer = serde_json::json!({"error": "invalid_grant", "error_description": "gone\u{1b}[2J\nnow"});
        assert_eq!(describe(&answer), "invalid_grant: gone[2Jnow");
        assert_eq!(describe(&serde_json::json!({})), "no OAuth answer");
        let tokens = Tokens { access: "secret-a".into(), refresh: Some("secret-r".into()) };
        assert!(!format!("{tokens:?}").contains("secret"));
    }
}
