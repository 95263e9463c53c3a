//! The issuer's public keys (a JWKS), from `jwks_file` or fetched from `jwks_url`: fetched when
//! a token names a key not seen yet (so a key rotation needs no restart), at most once per
//! `jwks_min_interval`, with a bounded wait and a bounded body.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use jsonwebtoken::jwk::Jwk;
use tokio::net::TcpStream;
use tracing::{info, warn};

use super::OidcConfig;
use super::config::invalid;
use crate::Error;

/// Largest JWKS read.
const MAX_JWKS_BYTES: usize = 1 << 20;
/// Longest wait for a fetch, connection to last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Keys older than this are fetched again at the next token (a withdrawn key stops counting).
const MAX_AGE: Duration = Duration::from_secs(3600);

/// Where the keys come from.
#[derive(Debug)]
enum Source {
    File,
    Url { uri: http::Uri, tls: Option<Arc<rustls::ClientConfig>> },
}

/// The issuer's keys, as last read.
#[derive(Debug)]
pub struct KeySet {
    source: Source,
    keys: RwLock<Arc<Vec<Jwk>>>,
    /// When the last fetch was tried; one fetch at a time.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    /// When keys were last fetched.
    fetched: std::sync::Mutex<Option<Instant>>,
    /// Counts the key sets fetched.
    generation: std::sync::atomic::AtomicU64,
    min_interval: Duration,
}

impl KeySet {
    /// The key set of `config`: a file is read now, a URL at the first token.
    pub fn new(config: &OidcConfig) -> Result<Self, Error> {
        let (source, keys) = match (&config.jwks_file, &config.jwks_url) {
            (Some(path), _) => {
                let text = std::fs::read(path)
                    .map_err(|e| invalid(format!("oidc.jwks_file {path}: {e}")))?;
                let keys =
                    parse(&text).map_err(|e| invalid(format!("oidc.jwks_file {path}: {e}")))?;
                (Source::File, keys)
            }
            (None, Some(url)) => {
                let uri: http::Uri =
                    url.parse().map_err(|e| invalid(format!("oidc.jwks_url {url:?}: {e}")))?;
                let tls = if uri.scheme_str() == Some("https") {
                    let client = common::tls::ClientTls {
                        ca_file: config.jwks_ca_file.clone(),
                        ..common::tls::ClientTls::default()
                    };
                    Some(client.build().map_err(|e| invalid(format!("oidc.jwks_ca_file: {e}")))?)
                } else {
                    None
                };
                (Source::Url { uri, tls }, Vec::new())
            }
            (None, None) => return Err(invalid("oidc: set jwks_url or jwks_file".into())),
        };
        Ok(Self {
            source,
            keys: RwLock::new(Arc::new(keys)),
            fetching: tokio::sync::Mutex::new(None),
            fetched: std::sync::Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(0),
            min_interval: config.jwks_min_interval,
        })
    }

    /// The keys known now.
    pub fn current(&self) -> Arc<Vec<Jwk>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Which key set is in force (it changes with each fetch).
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Fetches the keys again in the background when they are older than [`MAX_AGE`]: a key
    /// the issuer withdrew stops counting, and no request waits for the fetch.
    pub fn refresh_if_old(self: &Arc<Self>) {
        let fetched = *self.fetched.lock().unwrap_or_else(|p| p.into_inner());
        if fetched.is_none_or(|at| at.elapsed() <= MAX_AGE) {
            return;
        }
        if let Ok(mut last) = self.fetching.try_lock() {
            if last.is_some_and(|at| at.elapsed() < self.min_interval) {
                return;
            }
            // Marked as tried now, so the requests until the fetch ends do not start another.
            *last = Some(Instant::now());
            drop(last);
            let keys = self.clone();
            tokio::spawn(async move { keys.fetch_now().await });
        }
    }

    /// Fetches the keys again, unless that was tried less than `jwks_min_interval` ago (or a
    /// fetch running meanwhile brought new ones); false when the keys could not be had.
    pub async fn refresh(&self, seen: &Arc<Vec<Jwk>>) -> bool {
        if !matches!(self.source, Source::Url { .. }) {
            return true;
        }
        let mut last = self.fetching.lock().await;
        if !Arc::ptr_eq(seen, &self.current()) {
            return true;
        }
        if last.is_some_and(|at| at.elapsed() < self.min_interval) {
            return !seen.is_empty();
        }
        *last = Some(Instant::now());
        self.fetch_now().await || !seen.is_empty()
    }

    /// One fetch; true when it brought keys.
    async fn fetch_now(&self) -> bool {
        let Source::Url { uri, tls } = &self.source else { return false };
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, fetch(uri, tls.clone())).await;
        let no_answer = || Err(Error::IssuerKeys(format!("no answer within {FETCH_TIMEOUT:?}")));
        match fetched.unwrap_or_else(|_| no_answer()) {
            Ok(keys) => {
                info!(url = %uri, keys = keys.len(), "fetched the OpenID issuer's keys");
                *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
                *self.fetched.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                true
            }
            Err(e) => {
                warn!(url = %uri, error = %e, "could not fetch the OpenID issuer's keys");
                false
            }
        }
    }
}

/// The signing keys of a JWKS document; keys of a type this transport cannot use are skipped.
fn parse(text: &[u8]) -> Result<Vec<Jwk>, Error> {
    #[derive(serde::Deserialize)]
    struct Document {
        keys: Vec<serde_json::Value>,
    }
    let document: Document = serde_json::from_slice(text)
        .map_err(|e| Error::IssuerKeys(format!("not a JWKS document: {e}")))?;
    let keys: Vec<Jwk> =
        document.keys.into_iter().filter_map(|k| serde_json::from_value(k).ok()).collect();
    if keys.is_empty() {
        return Err(Error::IssuerKeys("the JWKS has no key this transport can use".into()));
    }
    Ok(keys)
}

/// GET `uri` (HTTP/1.1, TLS for https) and parse the answer.
async fn fetch(uri: &http::Uri, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Vec<Jwk>, Error> {
    let host = uri.host().ok_or_else(|| Error::IssuerKeys("no host in the URL".into()))?;
    let host = host.trim_matches(['[', ']']).to_owned();
    let port = uri.port_u16().unwrap_or(if tls.is_some() { 443 } else { 80 });
    let tcp = TcpStream::connect((host.as_str(), port)).await?;
    let request = http::Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(http::header::HOST, uri.authority().map_or(host.as_str(), |a| a.as_str()))
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())
        .map_err(|e| Error::IssuerKeys(e.to_string()))?;
    let response = match tls {
        Some(tls) => {
            let name = rustls_pki_types::ServerName::try_from(host.clone())
                .map_err(|e| Error::IssuerKeys(format!("{host}: {e}")))?;
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await
                .map_err(|e| Error::IssuerKeys(format!("TLS: {e}")))?;
            send(stream, request).await?
        }
        None => send(tcp, request).await?,
    };
    if !response.status().is_success() {
        return Err(Error::IssuerKeys(format!("HTTP {}", response.status())));
    }
    let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
        .collect()
        .await
        .map_err(|e| Error::IssuerKeys(format!("reading the answer: {e}")))?
        .to_bytes();
    parse(&body)
}

/// Sends one request on a new connection.
async fn send<S>(
    stream: S,
    request: http::Request<Empty<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| Error::IssuerKeys(e.to_string()))?;
    // The connection ends with its answer, or at the fetch's own deadline.
    tokio::spawn(tokio::time::timeout(FETCH_TIMEOUT, connection));
    sender.send_request(request).await.map_err(|e| Error::IssuerKeys(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_keys_it_cannot_use_and_refuses_a_set_without_any() {
        let jwks = br#"{"keys":[
            {"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"ed","alg":"EdDSA","use":"sig"},
            {"kty":"weird","kid":"w"}]}"#;
        let keys = parse(jwks).expect("one usable key");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].common.key_id.as_deref(), Some("ed"));
        assert!(parse(br#"{"keys":[{"kty":"weird"}]}"#).is_err());
        assert!(parse(b"<html>").is_err());
    }
}
