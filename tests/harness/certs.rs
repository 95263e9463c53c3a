//! Certificates generated for a test: a CA, a server certificate for 127.0.0.1, a client
//! certificate, and a second CA nobody trusts.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

/// Paths of the PEM files.
pub struct TestPki {
    /// The CA that signed the server and client certificates.
    pub ca: PathBuf,
    /// Server certificate (SANs 127.0.0.1 and localhost) and key.
    pub server_cert: PathBuf,
    /// Server key.
    pub server_key: PathBuf,
    /// Client certificate and key, for mTLS.
    pub client_cert: PathBuf,
    /// Client key.
    pub client_key: PathBuf,
    /// A CA that signed nothing here.
    pub other_ca: PathBuf,
    /// A server certificate (and key) from the CA for another name only (`other.example`).
    pub wrong_name: (PathBuf, PathBuf),
    /// A server certificate (and key) from the CA for 127.0.0.1, expired in 2001.
    pub expired: (PathBuf, PathBuf),
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

impl TestPki {
    /// Generates everything under a fresh temp dir named after `tag`.
    pub fn new(tag: &str) -> TestPki {
        let dir = std::env::temp_dir().join(format!("sqltunnel-pki-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("pki dir");
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write pem");
            path
        };
        let issuer = ca("sqltunnel test CA");
        let other = ca("some other CA");
        let server_key = KeyPair::generate().expect("key");
        let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("params")
            .signed_by(&server_key, &issuer)
            .expect("server cert");
        let wrong_key = KeyPair::generate().expect("key");
        let wrong = CertificateParams::new(vec!["other.example".to_owned()])
            .expect("params")
            .signed_by(&wrong_key, &issuer)
            .expect("wrong-name cert");
        let expired_key = KeyPair::generate().expect("key");
        let mut expired = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
        expired.not_before = rcgen::date_time_ymd(2000, 1, 1);
        expired.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let expired = expired.signed_by(&expired_key, &issuer).expect("expired cert");
        let client_key = KeyPair::generate().expect("key");
        let mut client_params = CertificateParams::new(Vec::<String>::new()).expect("params");
        client_params.distinguished_name.push(rcgen::DnType::CommonName, "sidecar");
        let client = client_params.signed_by(&client_key, &issuer).expect("client cert");
        TestPki {
            ca: write("ca.pem", issuer.pem()),
            server_cert: write("server.pem", server.pem()),
            server_key: write("server.key", server_key.serialize_pem()),
            client_cert: write("client.pem", client.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            other_ca: write("other-ca.pem", other.pem()),
            wrong_name: (
                write("wrong-name.pem", wrong.pem()),
                write("wrong-name.key", wrong_key.serialize_pem()),
            ),
            expired: (
                write("expired.pem", expired.pem()),
                write("expired.key", expired_key.serialize_pem()),
            ),
        }
    }
}
