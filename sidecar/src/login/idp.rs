//! The OpenID Provider as `sidecar login` speaks to it: its discovery document, and form
//! posts to its endpoints answered in JSON, over the sidecar's own HTTP/1.1 client (TLS with
//! the system's roots for `https://`; plain `http://` only to this machine).

use std::time::Duration;

use http::Uri;
use serde::Deserialize;
use serde_json::Value;
use tokio_rustls::TlsConnector;

use crate::http::HttpConn;

/// Longest wait for the provider to connect and answer.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from it.
const MAX_ANSWER: usize = 256 * 1024;

/// The provider's endpoints, from its discovery document.
#[derive(Debug, Clone, Deserialize)]
pub struct Endpoints {
    /// Where the browser is sent to log in.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged for tokens.
    pub token_endpoint: String,
    /// Where a device flow starts (RFC 8628), when the provider has one.
    #[serde(default)]
    pub device_authorization_endpoint: Option<String>,
}

/// An OpenID Provider.
pub struct Idp {
    issuer: String,
    tls: Option<TlsConnector>,
}

impl std::fmt::Debug for Idp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idp").field("issuer", &self.issuer).finish_non_exhaustive()
    }
}

impl Idp {
    /// The provider of `issuer`: `https://`, or `http://` to this machine only (a token over
    /// plain HTTP to another host could be read on the way).
    pub fn new(issuer: &str) -> Result<Self, String> {
        let issuer = issuer.trim_end_matches('/').to_owned();
        let uri: Uri = issuer.parse().map_err(|e| format!("login.issuer {issuer:?}: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("https") => {
                let config = common::tls::ClientTls::default()
                    .build()
                    .map_err(|e| format!("TLS for the identity provider: {e}"))?;
                Some(TlsConnector::from(config))
            }
            Some("http") if uri.host().is_some_and(crate::tunnel::is_loopback) => None,
            _ => {
                return Err(format!(
                    "login.issuer {issuer:?} must be an https:// URL (http:// only to this machine)"
                ));
            }
        };
        Ok(Self { issuer, tls })
    }

    /// The issuer URL, as configured.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The provider's endpoints (`/.well-known/openid-configuration`).
    pub async fn discover(&self) -> Result<Endpoints, String> {
        let url = format!("{}/.well-known/openid-configuration", self.issuer);
        let (status, answer) = self.exchange("GET", &url, "").await?;
        if status != 200 {
            return Err(format!("{url} answered HTTP {status}"));
        }
        serde_json::from_value(answer).map_err(|e| format!("{url}: not a discovery document: {e}"))
    }

    /// Posts `form` (URL-encoded) to `url`; the status and the JSON answer.
    pub async fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
    ) -> Result<(u16, Value), String> {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        self.exchange("POST", url, &body).await
    }

    /// One request on a new connection (the provider is asked rarely).
    async fn exchange(&self, method: &str, url: &str, body: &str) -> Result<(u16, Value), String> {
        let uri: Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
        let https = uri.scheme_str() == Some("https");
        if !https && self.tls.is_some() {
            return Err(format!("{url}: the provider named a plain http:// endpoint"));
        }
        let host = uri.host().ok_or_else(|| format!("{url}: no host"))?;
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = uri.authority().map_or(host, |a| a.as_str());
        let tls = if https { self.tls.as_ref() } else { None };
        let fail = |e: std::io::Error| format!("cannot reach the identity provider at {url}: {e}");
        let mut conn = HttpConn::connect(host, port, TIMEOUT, tls, None).await.map_err(fail)?;
        conn.set_silence_limit(TIMEOUT);
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let answer = conn.request(head.as_bytes(), body.as_bytes()).await.map_err(fail)?;
        let text = conn.body_to_end(MAX_ANSWER).await.map_err(fail)?;
        let json = serde_json::from_slice(&text).unwrap_or(Value::Null);
        Ok((answer.status, json))
    }
}
