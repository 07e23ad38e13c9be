//! A cluster CA and an API server certificate, made fresh for every stand-in.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The CA (what DescribeCluster hands out) and a server config presenting a leaf it signed.
pub struct ClusterTls {
    pub ca_pem: String,
    pub server_config: rustls::ServerConfig,
}

/// `names` go into the leaf's subject alternative names: IP addresses or DNS names.
pub fn cluster_tls(names: &[&str]) -> Result<ClusterTls, rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kubernetes");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let leaf_key = KeyPair::generate()?;
    let mut leaf_params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let leaf = leaf_params.signed_by(&leaf_key, &ca)?;

    let chain = vec![CertificateDer::from(leaf.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let mut server_config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|_| rcgen::Error::CouldNotParseCertificate)?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|_| rcgen::Error::CouldNotParseKeyPair)?;
    server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ClusterTls {
        ca_pem: ca.pem(),
        server_config,
    })
}

/// A TLS server on loopback presenting a leaf for `names` only, signed by a CA of its own:
/// its address and that CA. It completes handshakes and answers nothing, which is all a test
/// of the client's certificate checks needs (a client that accepted the certificate would
/// then time out instead of failing the handshake).
pub async fn serve_handshakes(names: &[&str]) -> std::io::Result<(std::net::SocketAddr, String)> {
    let tls = cluster_tls(names).map_err(std::io::Error::other)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(tls.server_config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(stream) = acceptor.accept(socket).await {
                    // Hold the connection open, silent, until the client gives up.
                    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                    drop(stream);
                }
            });
        }
    });
    Ok((address, tls.ca_pem))
}
