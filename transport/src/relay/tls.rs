//! TLS on the upstream leg: the server's chain checked against the configured CAs (or the
//! operating system's trusted roots), its name optionally not (a database reached by IP address).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{SignatureScheme, crypto::ring};
use tokio_rustls::TlsConnector;

use super::link::UpstreamTlsLink;
use crate::Error;
use crate::config::{UpstreamConfig, UpstreamTls};

/// The TLS link settings for an upstream configured with TLS.
pub fn upstream_tls(upstream: &UpstreamConfig) -> Result<Option<UpstreamTlsLink>, Error> {
    let Some(tls) = &upstream.tls else { return Ok(None) };
    let invalid = |m: String| Error::Config(common::Error::ConfigInvalid(m));
    let host = upstream.address.rsplit_once(':').map_or(upstream.address.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let name = ServerName::try_from(host)
        .map_err(|e| invalid(format!("upstream {:?}: {e}", upstream.name)))?;
    let config = client_config(&upstream.name, tls)?;
    Ok(Some(UpstreamTlsLink { connector: TlsConnector::from(config), name }))
}

/// The TLS client configuration of upstream `name`'s `tls` section.
fn client_config(name: &str, tls: &UpstreamTls) -> Result<Arc<ClientConfig>, Error> {
    let invalid = |e: &dyn std::fmt::Display| {
        Error::Config(common::Error::ConfigInvalid(format!("upstream {name:?} TLS: {e}")))
    };
    let provider = Arc::new(ring::default_provider());
    let mut roots = RootCertStore::empty();
    match &tls.ca_file {
        Some(path) => {
            let in_file = |e: &dyn std::fmt::Display| invalid(&format!("{}: {e}", path.display()));
            let certs = CertificateDer::pem_file_iter(path).map_err(|e| in_file(&e))?;
            for cert in certs {
                roots.add(cert.map_err(|e| in_file(&e))?).map_err(|e| in_file(&e))?;
            }
        }
        None => roots.extend(webpki_roots_from_native()),
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid(&e))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(&e))?;
    let config = if tls.skip_domain_validation {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NameNotChecked(verifier)))
            .with_no_client_auth()
    } else {
        builder.with_webpki_verifier(verifier).with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// The system's roots (the default when no CA file is configured).
fn webpki_roots_from_native() -> Vec<rustls::pki_types::TrustAnchor<'static>> {
    let mut store = RootCertStore::empty();
    store.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    store.roots
}

/// Checks the chain and signatures, not the name (`skip_domain_validation`).
#[derive(Debug)]
struct NameNotChecked(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for NameNotChecked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
