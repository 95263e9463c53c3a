//! TLS settings shared by both binaries (rustls with the `ring` provider): the transport's
//! server side (optionally requiring client certificates) and the sidecar's client side
//! (system roots or a CA file, optional client certificate, and a loudly logged opt-out).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use serde::Deserialize;

use crate::Error;

/// `tls` section of the transport: serve HTTPS.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTls {
    /// PEM certificate chain.
    pub cert_file: PathBuf,
    /// PEM private key.
    pub key_file: PathBuf,
    /// PEM CA certificates; when set, clients must present a certificate it signed (mTLS).
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
}

/// `transport.tls` section of the sidecar: how to trust the transport's HTTPS.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientTls {
    /// PEM CA certificates to trust instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate chain, presented when the transport asks (mTLS).
    pub client_cert_file: Option<PathBuf>,
    /// PEM private key of the client certificate.
    pub client_key_file: Option<PathBuf>,
    /// Accept any server certificate. Dangerous; logged loudly at start.
    pub insecure_skip_verify: bool,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

fn tls_err(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::ConfigInvalid(format!("{what} {}: {e}", path.display()))
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| tls_err("cannot read certificates from", path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| tls_err("bad certificate in", path, e))?;
    if certs.is_empty() {
        return Err(tls_err("no certificate in", path, "empty"));
    }
    Ok(certs)
}

fn key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| tls_err("cannot read a private key from", path, e))
}

fn roots(path: &Path) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    for cert in certs(path)? {
        roots.add(cert).map_err(|e| tls_err("unusable CA certificate in", path, e))?;
    }
    Ok(roots)
}

impl ServerTls {
    /// The rustls server configuration (HTTP/1.1 only).
    pub fn build(&self) -> Result<Arc<ServerConfig>, Error> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::ConfigInvalid(format!("TLS: {e}")))?;
        let builder = match &self.client_ca_file {
            Some(ca) => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                        .build()
                        .map_err(|e| tls_err("client CA", ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(certs(&self.cert_file)?, key(&self.key_file)?)
            .map_err(|e| tls_err("certificate and key do not fit:", &self.cert_file, e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ClientTls {
    /// The rustls client configuration.
    pub fn build(&self) -> Result<Arc<ClientConfig>, Error> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::ConfigInvalid(format!("TLS: {e}")))?;
        let builder = if self.insecure_skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider())))
        } else {
            let roots = match &self.ca_file {
                Some(ca) => roots(ca)?,
                None => system_roots()?,
            };
            builder.with_root_certificates(roots)
        };
        let mut config = match (&self.client_cert_file, &self.client_key_file) {
            (Some(cert), Some(k)) => builder
                .with_client_auth_cert(certs(cert)?, key(k)?)
                .map_err(|e| tls_err("client certificate and key do not fit:", cert, e))?,
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(Error::ConfigInvalid(
                    "client_cert_file and client_key_file go together".into(),
                ));
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The operating system's trusted roots.
fn system_roots() -> Result<RootCertStore, Error> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(Error::ConfigInvalid(
            "no system root certificates found; set transport.tls.ca_file".into(),
        ));
    }
    Ok(roots)
}

/// The verifier behind `insecure_skip_verify`: signatures are still checked, identities not.
#[derive(Debug)]
struct AcceptAnything(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
