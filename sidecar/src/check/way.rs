//! The way to the transport: DNS, TCP or the proxy's CONNECT, TLS and the certificate.

use tokio::net::TcpStream;

use super::line::{Line, fail, ok};
use crate::http::HttpConn;
use crate::tunnel::Target;

/// The name to resolve: the proxy's when one is used, else the transport's.
pub async fn resolve(target: &Target<'_>) -> Line {
    let (name, port, whose) = match target.proxy {
        Some(proxy) => {
            let (host, port) = proxy.host_port();
            (host, port, "the proxy's host name (transport.proxy or HTTPS_PROXY)")
        }
        None => (target.host, target.port, "the host name in transport.url"),
    };
    if name.parse::<std::net::IpAddr>().is_ok() {
        return ok("dns", format!("{name} is an address, nothing to resolve"));
    }
    let lookup = tokio::net::lookup_host((name, port));
    match tokio::time::timeout(target.connect_timeout, lookup).await {
        Ok(Ok(mut addrs)) => match addrs.next() {
            Some(addr) => ok("dns", format!("{name} resolves to {}", addr.ip())),
            None => fail("dns", format!("{name} resolves to no address. Fix: check {whose}")),
        },
        Ok(Err(e)) => fail(
            "dns",
            format!(
                "cannot resolve {name} ({e}). Fix: check {whose}, your DNS, or the VPN that serves it"
            ),
        ),
        Err(_) => fail(
            "dns",
            format!(
                "no DNS answer for {name} within {} s. Fix: check your DNS server or VPN",
                target.connect_timeout.as_secs()
            ),
        ),
    }
}

/// The TCP leg, directly or through the proxy.
pub async fn reach(target: &Target<'_>) -> (Line, Option<TcpStream>) {
    let open = HttpConn::open_tcp(target.host, target.port, target.proxy);
    let there = format!("{}:{}", target.host, target.port);
    let secs = target.connect_timeout.as_secs_f32();
    let result = tokio::time::timeout(target.connect_timeout, open).await;
    match (target.proxy, result) {
        (Some(proxy), Ok(Ok(tcp))) => (
            ok("proxy", format!("{} opened a tunnel to {there} (CONNECT)", proxy.address())),
            Some(tcp),
        ),
        (None, Ok(Ok(tcp))) => (ok("connect", format!("TCP to {there}")), Some(tcp)),
        (Some(proxy), Ok(Err(e))) => (
            fail(
                "proxy",
                format!(
                    "{e}. Fix: check transport.proxy or HTTPS_PROXY ({}), or list {} in NO_PROXY if it is reached without the proxy",
                    proxy.address(),
                    target.host
                ),
            ),
            None,
        ),
        (Some(proxy), Err(_)) => (
            fail(
                "proxy",
                format!(
                    "no tunnel through {} within {secs} s. Fix: check the proxy address, and that it allows CONNECT to port {}",
                    proxy.address(),
                    target.port
                ),
            ),
            None,
        ),
        (None, Ok(Err(e))) if e.kind() == std::io::ErrorKind::ConnectionRefused => (
            fail(
                "connect",
                format!(
                    "{there} refused the connection. Fix: start the transport (or the nginx in front of it), or correct the port in transport.url"
                ),
            ),
            None,
        ),
        (None, Ok(Err(e))) => (
            fail(
                "connect",
                format!(
                    "cannot connect to {there} ({e}). Fix: check the host and port in transport.url, and your network or VPN"
                ),
            ),
            None,
        ),
        (None, Err(_)) => (
            fail(
                "connect",
                format!(
                    "no answer from {there} within {secs} s: a firewall drops the packets, or the host or port is wrong. Fix: check transport.url, the VPN, or a corporate proxy (HTTPS_PROXY)"
                ),
            ),
            None,
        ),
    }
}

/// TLS for `https://` (and the certificate's checks), or the plain connection.
pub async fn secure(target: &Target<'_>, tcp: TcpStream) -> (Line, Option<HttpConn>) {
    let Some(tls) = target.tls else {
        return match HttpConn::over(tcp, target.host, None).await {
            Ok(conn) => (
                ok("tls", "none (http://): the token and data travel in clear text".into()),
                Some(conn),
            ),
            Err(e) => (fail("tls", e.to_string()), None),
        };
    };
    let handshake = HttpConn::over(tcp, target.host, Some(tls));
    match tokio::time::timeout(target.connect_timeout, handshake).await {
        Ok(Ok(conn)) => (ok("tls", format!("certificate valid for {}", target.host)), Some(conn)),
        Ok(Err(e)) => (tls_failure(target.host, &e), None),
        Err(_) => (
            fail(
                "tls",
                format!(
                    "no TLS handshake within {} s. Fix: the port in transport.url may not serve TLS: try http://",
                    target.connect_timeout.as_secs()
                ),
            ),
            None,
        ),
    }
}

/// One line naming what TLS refused, with its fix.
fn tls_failure(host: &str, e: &std::io::Error) -> Line {
    use rustls::CertificateError as C;
    let cause = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let (step, text) = match cause {
        Some(rustls::Error::InvalidCertificate(C::UnknownIssuer | C::BadSignature)) => (
            "certificate",
            format!(
                "{host}'s certificate is not signed by a CA this machine trusts ({e}). Fix: set transport.tls.ca_file to the CA's PEM file"
            ),
        ),
        Some(rustls::Error::InvalidCertificate(
            C::NotValidForName | C::NotValidForNameContext { .. },
        )) => (
            "certificate",
            format!(
                "the certificate is not valid for the name {host} ({e}). Fix: use in transport.url the name the certificate was issued for"
            ),
        ),
        Some(rustls::Error::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        )) => (
            "certificate",
            format!(
                "the certificate is outside its validity dates ({e}). Fix: renew the transport's (or nginx's) certificate, or check this machine's clock"
            ),
        ),
        Some(rustls::Error::InvalidCertificate(_)) => (
            "certificate",
            format!(
                "the certificate was refused ({e}). Fix: check the certificate the transport (or nginx) serves, and transport.tls.ca_file"
            ),
        ),
        Some(rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. }) => (
            "tls",
            format!(
                "the server does not speak TLS ({e}). Fix: use http:// in transport.url, or the port that serves TLS"
            ),
        ),
        _ => (
            "tls",
            format!(
                "TLS handshake failed ({e}). Fix: check that transport.url's port serves TLS, and transport.tls"
            ),
        ),
    };
    fail(step, text)
}
