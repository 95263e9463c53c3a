//! Reaching the transport through an HTTP forward proxy (a corporate proxy): a tunnel opened
//! with `CONNECT host:port`, over which the sidecar speaks HTTP or HTTPS as it would directly.
//! The proxy comes from `transport.proxy`, else from `HTTPS_PROXY` / `HTTP_PROXY` (by the
//! transport URL's scheme) unless `NO_PROXY` names the transport's host.

use std::io;

use base64::Engine;
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Error;

/// Largest answer head a proxy may send to CONNECT.
const MAX_HEAD: usize = 8 * 1024;

/// A forward proxy.
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    host: String,
    port: u16,
    /// `Basic …` for a proxy URL with `user:password@`.
    authorization: Option<String>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.address())
    }
}

impl Proxy {
    /// Parses `http://[user:password@]host[:port]` (port 80 by default; `https://` proxies,
    /// which need TLS to the proxy itself, are refused).
    pub fn parse(url: &str) -> Result<Proxy, Error> {
        let refused = |why: String| {
            let message = format!("transport.proxy: proxy {url:?}{why}");
            Error::Config(common::Error::ConfigInvalid(message))
        };
        let rest = url
            .strip_prefix("http://")
            .or_else(|| (!url.contains("://")).then_some(url))
            .ok_or_else(|| refused(": only http:// proxies (with CONNECT) are supported".into()))?;
        let rest = rest.trim_end_matches('/');
        let (credentials, address) = match rest.rsplit_once('@') {
            Some((c, a)) => (Some(c), a),
            None => (None, rest),
        };
        let (host, port) = match address.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || address.starts_with('[') => {
                (h, p.parse().map_err(|_| refused(format!(": bad port {p:?}")))?)
            }
            _ => (address, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(refused(" has no host".into()));
        }
        let authorization = credentials
            .map(|c| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(c)));
        Ok(Proxy { host: host.to_owned(), port, authorization })
    }

    /// The proxy to use for `target_host`: `configured` (`direct` for none), else the
    /// environment as `env` reads it.
    pub fn choose(
        configured: Option<&str>,
        https: bool,
        target_host: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Proxy>, Error> {
        if let Some(value) = configured {
            return if value == "direct" { Ok(None) } else { Proxy::parse(value).map(Some) };
        }
        let var = |names: [&str; 2]| names.iter().find_map(|n| env(n)).filter(|v| !v.is_empty());
        let from_env = if https {
            var(["HTTPS_PROXY", "https_proxy"])
        } else {
            var(["HTTP_PROXY", "http_proxy"])
        };
        let Some(url) = from_env else { return Ok(None) };
        let no_proxy = var(["NO_PROXY", "no_proxy"]).unwrap_or_default();
        if bypassed(&no_proxy, target_host) {
            return Ok(None);
        }
        Proxy::parse(&url).map(Some)
    }

    /// The proxy's host and port.
    pub fn host_port(&self) -> (&str, u16) {
        (&self.host, self.port)
    }

    /// `host:port` of the proxy, for messages.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// A TCP stream to `host:port` through the proxy.
    pub async fn connect(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        let fail = |why: String| io::Error::other(format!("proxy {}: {why}", self.address()));
        let mut tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| fail(format!("cannot connect ({e})")))?;
        tcp.set_nodelay(true)?;
        let target =
            if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some(auth) = &self.authorization {
            request.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
        }
        request.push_str("\r\n");
        tcp.write_all(request.as_bytes()).await?;
        // Read the answer head byte by byte: nothing after it may be consumed here.
        let mut head = BytesMut::with_capacity(256);
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() >= MAX_HEAD {
                return Err(fail("answered CONNECT with an oversized head".into()));
            }
            if tcp.read_u8().await.map(|b| head.extend_from_slice(&[b])).is_err() {
                return Err(fail("closed the connection instead of answering CONNECT".into()));
            }
        }
        let text = String::from_utf8_lossy(&head);
        let status_line = text.lines().next().unwrap_or_default().trim().to_owned();
        match status_line.split(' ').nth(1) {
            Some(code) if code.starts_with('2') => Ok(tcp),
            Some("407") => Err(fail(format!(
                "wants credentials ({status_line}): put them in the proxy URL, http://user:password@host:port"
            ))),
            _ => Err(fail(format!("refused CONNECT {target}: {status_line}"))),
        }
    }
}

/// True when `NO_PROXY` (comma-separated hosts, `.domain` suffixes, `*`) covers `host`.
fn bypassed(no_proxy: &str, host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    no_proxy.split(',').map(|e| e.trim().to_ascii_lowercase()).filter(|e| !e.is_empty()).any(
        |entry| {
            let entry = entry.split(':').next().unwrap_or_default().trim_start_matches('*');
            entry.is_empty()
                || host == entry.trim_start_matches('.')
                || host.ends_with(&format!(".{}", entry.trim_start_matches('.')))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn proxy_urls_parse() {
        let p = Proxy::parse("http://proxy.corp:3128").ok();
        assert_eq!(p.map(|p| p.address()), Some("proxy.corp:3128".into()));
        let p = Proxy::parse("http://u:p%20w@10.0.0.1:8080/").ok();
        assert_eq!(p.as_ref().map(Proxy::address), Some("10.0.0.1:8080".into()));
        assert_eq!(p.and_then(|p| p.authorization), Some("Basic dTpwJTIwdw==".into()));
        assert_eq!(Proxy::parse("proxy:80").ok().map(|p| p.address()), Some("proxy:80".into()));
        assert!(Proxy::parse("https://proxy:443").is_err());
        let bad_port = Proxy::parse("http://proxy:notaport").err().map(|e| e.to_string());
        let said =
            "invalid configuration: transport.proxy: proxy \"http://proxy:notaport\": bad port";
        assert_eq!(bad_port, Some(format!("{said} \"notaport\"")));
    }

    #[test]
    fn the_environment_and_no_proxy_choose() {
        let vars = [
            ("HTTPS_PROXY", "http://p:3128"),
            ("http_proxy", "http://q:8080"),
            ("NO_PROXY", "localhost,.internal, 10.1.2.3"),
        ];
        let pick = |https, host| {
            Proxy::choose(None, https, host, env(&vars)).ok().flatten().map(|p| p.address())
        };
        assert_eq!(pick(true, "gw.example.com"), Some("p:3128".into()));
        assert_eq!(pick(false, "gw.example.com"), Some("q:8080".into()));
        assert_eq!(pick(true, "db.internal"), None);
        assert_eq!(pick(true, "internal"), None);
        assert_eq!(pick(true, "10.1.2.3"), None);
        assert_eq!(pick(true, "notinternal"), Some("p:3128".into()));
        assert!(matches!(Proxy::choose(Some("direct"), true, "x", env(&vars)), Ok(None)));
        let all = [("HTTPS_PROXY", "http://p:3128"), ("NO_PROXY", "*")];
        assert!(matches!(Proxy::choose(None, true, "x", env(&all)), Ok(None)));
    }
}
