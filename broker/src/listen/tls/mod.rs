//! TLS to clients (docs/security.md): with `--tls-cert` and `--tls-key`,
//! every client listener speaks TLS only (rustls on ring).
//!
//! [`Tls`] is built on the main thread before the shards run and shared by
//! all of them: one rustls `ServerConfig` per listener (HTTP offers ALPN
//! `http/1.1`), both presenting the certificate of one [`cert::Reloading`]
//! resolver, which SIGHUP swaps (main thread's signal handler, never a
//! shard: reading the PEM files blocks). A shard only runs handshakes
//! ([`handshake::Acceptor`]), each bounded by `--tls-handshake-timeout-ms`.

mod cert;
mod der;
mod handshake;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::operate::config::Config;

pub use handshake::Acceptor;

/// ALPN protocol ids the HTTP listener offers.
const HTTP_ALPN: &[&[u8]] = &[b"http/1.1"];

/// What every shard's client listeners need to speak TLS: shared, `Send +
/// Sync`, built once at start.
#[derive(Debug)]
pub struct Tls {
    cert: Arc<cert::Reloading>,
    http: Arc<ServerConfig>,
    binary: Arc<ServerConfig>,
    handshake_timeout: Duration,
}

impl Tls {
    /// The TLS setup `config` asks for (`None` without `--tls-cert`): reads
    /// the certificate, its key and the client CA, or says which file is
    /// wrong and why. Main thread, before the shards run.
    pub fn from_config(config: &Config) -> Result<Option<Arc<Tls>>, String> {
        let (Some(cert_path), Some(key_path)) = (&config.tls_cert, &config.tls_key) else {
            return Ok(None);
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        crate::operate::metrics_help::install_tls();
        let cert = Arc::new(cert::Reloading::load(cert_path, key_path, provider.clone())?);
        let roots = match &config.tls_client_ca {
            Some(path) => Some(Arc::new(client_roots(path)?)),
            None => None,
        };
        let server_config = |alpn: &[&[u8]]| -> Result<Arc<ServerConfig>, String> {
            let builder = ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS: {e}"))?;
            let builder = match &roots {
                Some(roots) => {
                    let verifier =
                        WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                            .build()
                            .map_err(|e| format!("--tls-client-ca: {e}"))?;
                    builder.with_client_cert_verifier(verifier)
                }
                None => builder.with_no_client_auth(),
            };
            let mut server = builder.with_cert_resolver(cert.clone());
            server.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            Ok(Arc::new(server))
        };
        let tls = Tls {
            http: server_config(HTTP_ALPN)?,
            binary: server_config(&[])?,
            cert,
            handshake_timeout: Duration::from_millis(config.tls_handshake_timeout_ms),
        };
        tracing::info!(
            cert = %cert_path.display(),
            client_certificates = if config.tls_client_ca.is_some() { "required" } else { "not asked for" },
            "client listeners speak TLS only"
        );
        Ok(Some(Arc::new(tls)))
    }

    /// Re-reads the certificate and key files: new handshakes present the
    /// new certificate, sessions already open keep theirs. On failure the
    /// certificate in use stays, and the error says which file and why.
    /// Blocks on file reads: never on a shard.
    pub fn reload(&self) -> Result<String, String> {
        self.cert.reload()
    }

    /// The handshake of `listener` (`http`, `registry` or `binary`), for
    /// one shard.
    pub fn acceptor(&self, listener: &'static str) -> Acceptor {
        // The registry speaks HTTP too (listen/registry/).
        let config = if listener == "http" || listener == "registry" {
            self.http.clone()
        } else {
            self.binary.clone()
        };
        Acceptor::new(config, self.handshake_timeout, listener)
    }
}

/// The CA certificates of `--tls-client-ca`, or why they cannot be used.
fn client_roots(path: &Path) -> Result<RootCertStore, String> {
    let what = |e: &dyn std::fmt::Display| format!("--tls-client-ca {}: {e}", path.display());
    // blocking-ok: main thread, before the shards run (pem_file_iter reads the file)
    let certs = CertificateDer::pem_file_iter(path).map_err(|e| what(&e))?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        let cert = cert.map_err(|e| what(&e))?;
        roots.add(cert).map_err(|e| what(&e))?;
    }
    if roots.is_empty() {
        return Err(what(&"no CERTIFICATE block in it"));
    }
    Ok(roots)
}
