//! A client on TLS gets every byte of an answer even when its socket is full at the moment the
//! answer ends (rustls keeps what the socket cannot take until the stream is flushed).

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::AsyncReadExt;
use tokio::net::TcpSocket;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::PacketIo;

/// A TLS acceptor and a connector that trusts it, for `localhost`.
fn tls_pair() -> (TlsAcceptor, TlsConnector) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    let cert = generated.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .expect("server config");
    let mut roots = RootCertStore::empty();
    roots.add(cert).expect("root");
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    (TlsAcceptor::from(Arc::new(server)), TlsConnector::from(Arc::new(client)))
}

#[tokio::test]
async fn the_end_of_an_answer_reaches_a_tls_client_whose_socket_was_full() {
    // Small socket buffers on both sides: the answer below does not fit in them, but fits in
    // them and rustls's own buffer, so writing it completes before the client reads a byte.
    let listener = TcpSocket::new_v4().expect("socket");
    listener.set_send_buffer_size(4096).expect("sndbuf");
    listener.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let listener = listener.listen(1).expect("listen");
    let addr = listener.local_addr().expect("addr");
    let (acceptor, connector) = tls_pair();
    let client = tokio::spawn(async move {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("rcvbuf");
        let tcp = socket.connect(addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let mut tls = connector.connect(name, tcp).await.expect("handshake");
        // The sidecar writes its answer (and waits for the next command) before this reads.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut answer = vec![0u8; ANSWER];
        let read = tokio::time::timeout(Duration::from_secs(5), tls.read_exact(&mut answer)).await;
        (read.is_ok_and(|r| r.is_ok()), tls)
    });
    const ANSWER: usize = 48 * 1024;
    let (tcp, _) = listener.accept().await.expect("accept");
    let mut io = PacketIo::new(tcp, 1 << 20);
    io.upgrade_tls(&acceptor).await.expect("server handshake");
    io.write_raw(bytes::Bytes::from_static(&[7u8; ANSWER])).await.expect("write");
    io.flush().await.expect("flush");
    let (complete, _tls) = client.await.expect("client");
    assert!(complete, "the client got the whole answer");
}
