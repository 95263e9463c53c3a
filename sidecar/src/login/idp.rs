//! The OpenID Provider as `sidecar login` speaks to it: its discovery document, and form
//! posts to its endpoints answered in JSON, over the sidecar's own HTTP/1.1 client (TLS with
//! the system's roots for `https://`; plain `http://` only to this machine, and only when the
//! issuer itself is there). Each exchange is bounded in time and size as a whole.

use std::sync::OnceLock;
use std::time::Duration;

use http::Uri;
use serde::Deserialize;
use serde_json::Value;
use tokio_rustls::TlsConnector;

use crate::Error;
use crate::http::{AnswerBody, HttpConn};

/// Longest a whole exchange with the provider may take: connecting, asking, and its answer to
/// the last byte (a provider that trickles its answer would otherwise hold a renewal, and with
/// it every request waiting for a token).
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
    /// True when the issuer is `https://`: then so must every endpoint be.
    secure: bool,
    /// TLS with the system's roots, made at the first `https://` exchange.
    tls: OnceLock<TlsConnector>,
    /// [`TIMEOUT`] (shorter in tests).
    limit: Duration,
}

impl std::fmt::Debug for Idp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idp").field("issuer", &self.issuer).finish_non_exhaustive()
    }
}

impl Idp {
    /// The provider of `issuer`: `https://`, or `http://` to this machine only (a token over
    /// plain HTTP to another host could be read on the way).
    pub fn new(issuer: &str) -> Result<Self, Error> {
        let issuer = issuer.trim_end_matches('/').to_owned();
        let uri: Uri =
            issuer.parse().map_err(|e| Error::Login(format!("login.issuer {issuer:?}: {e}")))?;
        let secure = match uri.scheme_str() {
            Some("https") => true,
            Some("http") if uri.host().is_some_and(crate::tunnel::is_loopback) => false,
            _ => {
                return Err(Error::Login(format!(
                    "login.issuer {issuer:?} must be an https:// URL (http:// only to this machine)"
                )));
            }
        };
        let idp = Self { issuer, secure, tls: OnceLock::new(), limit: TIMEOUT };
        if secure {
            idp.tls()?;
        }
        Ok(idp)
    }

    /// TLS with the system's roots.
    fn tls(&self) -> Result<&TlsConnector, Error> {
        if let Some(tls) = self.tls.get() {
            return Ok(tls);
        }
        let config = common::tls::ClientTls::default()
            .build()
            .map_err(|e| Error::Login(format!("TLS for the identity provider: {e}")))?;
        Ok(self.tls.get_or_init(|| TlsConnector::from(config)))
    }

    /// Checks an address the provider named (an endpoint, the page the browser is sent to):
    /// `https://`, or `http://` to this machine when the issuer is there too. Anything else
    /// (another scheme, which the system's opener might run as a program; plain HTTP to
    /// another host, where a code or a token could be read on the way) is refused.
    pub fn check(&self, url: &str) -> Result<Uri, Error> {
        let uri: Uri = url.parse().map_err(|e| Error::Login(format!("{url:?}: {e}")))?;
        let local = uri.host().is_some_and(crate::tunnel::is_loopback);
        match uri.scheme_str() {
            Some("https") if uri.host().is_some() => Ok(uri),
            Some("http") if local && !self.secure => Ok(uri),
            _ => Err(Error::Login(format!(
                "the provider at {} named {url:?}, which is not an https:// address",
                self.issuer
            ))),
        }
    }

    /// The issuer URL, as configured.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The provider's endpoints (`/.well-known/openid-configuration`).
    pub async fn discover(&self) -> Result<Endpoints, Error> {
        let url = format!("{}/.well-known/openid-configuration", self.issuer);
        let (status, answer) = self.exchange("GET", &url, "").await?;
        if status != 200 {
            return Err(Error::Login(format!("{url} answered HTTP {status}")));
        }
        serde_json::from_value(answer)
            .map_err(|e| Error::Login(format!("{url}: not a discovery document: {e}")))
    }

    /// Posts `form` (URL-encoded) to `url`; the status and the JSON answer.
    pub async fn post_form(&self, url: &str, form: &[(&str, &str)]) -> Result<(u16, Value), Error> {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        self.exchange("POST", url, &body).await
    }

    /// One request on a new connection (the provider is asked rarely), within [`TIMEOUT`] in
    /// all.
    async fn exchange(&self, method: &str, url: &str, body: &str) -> Result<(u16, Value), Error> {
        let uri = self.check(url)?;
        let tls = if uri.scheme_str() == Some("https") { Some(self.tls()?) } else { None };
        tokio::time::timeout(self.limit, self.exchange_with(method, url, &uri, tls, body))
            .await
            .unwrap_or_else(|_| {
                Err(Error::Login(format!(
                    "the identity provider at {url} gave no whole answer within {} s",
                    self.limit.as_secs_f32()
                )))
            })
    }

    async fn exchange_with(
        &self,
        method: &str,
        url: &str,
        uri: &Uri,
        tls: Option<&TlsConnector>,
        body: &str,
    ) -> Result<(u16, Value), Error> {
        let host = uri.host().ok_or_else(|| Error::Login(format!("{url}: no host")))?;
        let port = uri.port_u16().unwrap_or(if tls.is_some() { 443 } else { 80 });
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = uri.authority().map_or(host, |a| a.as_str());
        let fail = |e: std::io::Error| {
            Error::Login(format!("cannot reach the identity provider at {url}: {e}"))
        };
        let mut conn = HttpConn::connect(host, port, self.limit, tls, None).await.map_err(fail)?;
        conn.set_silence_limit(self.limit);
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn only_https_addresses_are_taken_and_plain_http_only_to_a_local_issuer() {
        let secure = Idp::new("https://idp.example.test/realm/").expect("https issuer");
        assert!(secure.check("https://login.example.test/authorize?x=1").is_ok());
        let local = Idp::new("http://127.0.0.1:9").expect("a local issuer");
        assert!(local.check("http://localhost:3/token").is_ok());
        assert!(local.check("https://idp.example.test/token").is_ok());
        for idp in [&secure, &local] {
            // Handed to the system's opener, these would open a file or run a program.
            for bad in [
                "file:///etc/passwd",
                "C:\\Windows\\System32\\calc.exe",
                "/Applications/Calculator.app",
                "--help",
                "javascript:alert(1)",
                "smb://host/share/x.exe",
                "http://idp.example.test/token",
            ] {
                assert!(idp.check(bad).is_err(), "{bad}");
            }
        }
        assert!(
            secure.check("http://127.0.0.1:9/token").is_err(),
            "no plain HTTP for an https issuer"
        );
        assert!(Idp::new("http://idp.example.test").is_err());
    }

    /// A local issuer whose discovery names an `https://` token endpoint: the refresh token
    /// went there in clear (no TLS, port 443). Now it is spoken to over TLS.
    #[tokio::test]
    async fn an_https_endpoint_gets_tls_even_from_a_local_issuer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let heard = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut first = vec![0u8; 4096];
            let n = s.read(&mut first).await.expect("read");
            first.truncate(n);
            first
        });
        let idp = Idp::new("http://127.0.0.1:9").expect("a local issuer");
        let url = format!("https://127.0.0.1:{port}/token");
        let sent = idp.post_form(&url, &[("refresh_token", "rt-secret-5")]).await;
        assert!(sent.is_err(), "no TLS server there");
        let first = heard.await.expect("join");
        assert_eq!(first.first(), Some(&0x16), "a TLS handshake first: {first:?}");
        assert!(!first.windows(11).any(|w| w == b"rt-secret-5"), "the token in clear");
    }

    /// A provider that trickles its answer, a byte at a time, is given up once the whole
    /// exchange has taken its limit (each byte came well within the silence limit).
    #[tokio::test]
    async fn a_provider_that_trickles_its_answer_is_given_up() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut request = vec![0u8; 4096];
            drop(s.read(&mut request).await);
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n";
            drop(s.write_all(head.as_bytes()).await);
            while s.write_all(b" ").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let mut idp = Idp::new(&format!("http://127.0.0.1:{port}")).expect("a local issuer");
        idp.limit = Duration::from_millis(600);
        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(20), idp.discover()).await;
        let err = outcome.expect("given up by itself").expect_err("no discovery");
        assert!(err.to_string().contains("no whole answer"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        server.abort();
    }
}
