//! TLS on the client → sidecar leg (MySQL SSLRequest): a configured certificate, or one
//! generated at start for `localhost` and `127.0.0.1`.

use std::path::PathBuf;
use std::sync::Arc;

use common::tls::ServerTls;
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde::Deserialize;
use tokio_rustls::TlsAcceptor;

use crate::Error;

/// The `client_tls` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientLegTls {
    /// Offer TLS to clients (they choose: `--ssl`, `ssl-mode=REQUIRED`, `useSSL=true`).
    pub enabled: bool,
    /// PEM certificate chain; without it a self-signed certificate is generated at start.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

impl ClientLegTls {
    /// The acceptor for upgraded client connections, or `None` when TLS is off.
    pub fn acceptor(&self) -> Result<Option<TlsAcceptor>, Error> {
        if !self.enabled {
            return Ok(None);
        }
        let config = match (&self.cert_file, &self.key_file) {
            (Some(cert_file), Some(key_file)) => ServerTls {
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
                client_ca_file: None,
            }
            .build()?,
            (None, None) => self_signed()?,
            _ => {
                return Err(invalid(
                    "client_tls.cert_file and client_tls.key_file go together".into(),
                ));
            }
        };
        Ok(Some(TlsAcceptor::from(config)))
    }
}

fn invalid(message: String) -> Error {
    Error::Config(common::Error::ConfigInvalid(message))
}

/// A fresh self-signed certificate for this run.
fn self_signed() -> Result<Arc<ServerConfig>, Error> {
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let generated = rcgen::generate_simple_self_signed(names)
        .map_err(|e| invalid(format!("cannot generate a certificate: {e}")))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()));
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_no_client_auth().with_single_cert(vec![generated.cert.der().clone()], key)
            })
            .map_err(|e| invalid(format!("client TLS: {e}")))?;
    Ok(Arc::new(config))
}
