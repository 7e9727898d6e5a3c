//! `PeerTls`: mutual TLS between raft peers (rustls on ring).
//!
//! Every node's certificate names it `es-node-<id>` (a DNS name), signed by
//! the cluster's peer CA (`--peer-ca`). A connecting node checks that the
//! peer it dialled presents `es-node-<target>`; an accepting node verifies
//! the client certificate against the CA (`WebPkiClientVerifier`) and then
//! that it names `es-node-<source>` for the node id the preamble claims, so
//! a node cannot speak for another. Names, not addresses: loopback tests
//! with shared IPs work, and an address change needs no new certificate.
//! TLS starts after the plaintext preamble, on the shard that owns the
//! connection.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_rustls::{client, server, TlsAcceptor, TlsConnector};
use glommio::net::TcpStream;
use rustls::client::WebPkiServerVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::runtime::GlommioRuntime;
use crate::types::NodeId;

/// The name a node's certificate carries.
pub fn node_name(id: NodeId) -> String {
    format!("es-node-{id}")
}

/// The TLS configs of a node's raft peers: `Send + Sync`, built once at
/// start and shared by every shard.
#[derive(Debug)]
pub struct PeerTls {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

/// Why an accepted connection's TLS was refused.
#[derive(Debug)]
pub(crate) enum TlsRefusal {
    /// The handshake failed (no client certificate, an unknown CA, ...).
    Handshake(std::io::Error),
    /// The handshake did not finish in time.
    Timeout,
    /// The certificate does not name the node the preamble claims.
    Name(String),
}

impl PeerTls {
    /// From this node's certificate chain and key, and the peer CA's
    /// certificates.
    pub fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        ca: Vec<CertificateDer<'static>>,
    ) -> Result<PeerTls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        for c in ca {
            roots.add(c).map_err(|e| format!("--peer-ca: {e}"))?;
        }
        if roots.is_empty() {
            return Err("--peer-ca: no certificate in it".into());
        }
        let roots = Arc::new(roots);
        let client_verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| format!("--peer-ca: {e}"))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| format!("--peer-cert/--peer-key: {e}"))?;
        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| format!("--peer-ca: {e}"))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_webpki_verifier(server_verifier)
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("--peer-cert/--peer-key: {e}"))?;
        Ok(PeerTls::from_configs(Arc::new(server), Arc::new(client)))
    }

    /// From the PEM files of `--peer-cert`, `--peer-key` and `--peer-ca`.
    /// Reads files: on the main thread, before the shards run.
    pub fn from_pem_files(cert: &Path, key: &Path, ca: &Path) -> Result<PeerTls, String> {
        let certs = |path: &Path, flag: &str| -> Result<Vec<CertificateDer<'static>>, String> {
            let what = |e: &dyn std::fmt::Display| format!("{flag} {}: {e}", path.display());
            // blocking-ok: main thread, before the shards run
            let list = CertificateDer::pem_file_iter(path)
                .map_err(|e| what(&e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| what(&e))?;
            if list.is_empty() {
                return Err(what(&"no CERTIFICATE block in it"));
            }
            Ok(list)
        };
        let chain = certs(cert, "--peer-cert")?;
        let ca = certs(ca, "--peer-ca")?;
        // blocking-ok: main thread, before the shards run
        let key =
            PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--peer-key {}: {e}", key.display()))?;
        PeerTls::new(chain, key, ca)
    }

    /// From rustls configs as they are (tests build refused ones).
    pub fn from_configs(server: Arc<ServerConfig>, client: Arc<ClientConfig>) -> PeerTls {
        PeerTls { server, client }
    }

    /// The client side of the handshake with node `target`, whose
    /// certificate must name `es-node-<target>`.
    pub(crate) async fn connect(
        &self,
        target: NodeId,
        stream: TcpStream,
        timeout: Duration,
    ) -> std::io::Result<client::TlsStream<TcpStream>> {
        let name = ServerName::try_from(node_name(target))
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let handshake = TlsConnector::from(self.client.clone()).connect(name, stream);
        GlommioRuntime::within(timeout, handshake)
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out"))?
    }

    /// The server side of the handshake with a connection whose preamble
    /// claims node `source`: its certificate must be valid under the peer
    /// CA and name `es-node-<source>`.
    pub(crate) async fn accept(
        &self,
        source: NodeId,
        stream: TcpStream,
        timeout: Duration,
    ) -> Result<server::TlsStream<TcpStream>, TlsRefusal> {
        let handshake = TlsAcceptor::from(self.server.clone()).accept(stream);
        let tls = GlommioRuntime::within(timeout, handshake)
            .await
            .map_err(|_| TlsRefusal::Timeout)?
            .map_err(TlsRefusal::Handshake)?;
        let want = node_name(source);
        let (_, conn) = tls.get_ref();
        let leaf = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| TlsRefusal::Name("no client certificate".into()))?;
        let cert = webpki::EndEntityCert::try_from(leaf)
            .map_err(|e| TlsRefusal::Name(format!("an unreadable certificate: {e}")))?;
        let name = ServerName::try_from(want.as_str()).map_err(|e| TlsRefusal::Name(e.to_string()))?;
        cert.verify_is_valid_for_subject_name(&name)
            .map_err(|e| TlsRefusal::Name(format!("the certificate does not name {want}: {e}")))?;
        Ok(tls)
    }
}
