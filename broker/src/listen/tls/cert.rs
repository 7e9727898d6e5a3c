//! The certificate the client listeners present, reloadable: a rustls
//! `ResolvesServerCert` over an `ArcSwap`. A handshake takes the current
//! `CertifiedKey` (one atomic load); a reload builds a new one from the
//! files and swaps it in, so new handshakes get it while sessions already
//! open keep the one they started with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::der;

/// `--tls-cert` and `--tls-key`, and the certificate built from them last.
#[derive(Debug)]
pub struct Reloading {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
}

impl Reloading {
    /// Reads the files once (start-up), or says which one is wrong.
    pub fn load(
        cert_path: &Path,
        key_path: &Path,
        provider: Arc<CryptoProvider>,
    ) -> Result<Reloading, String> {
        let loaded = read(cert_path, key_path, &provider)?;
        tracing::info!("{}", loaded.describe(cert_path));
        loaded.publish();
        Ok(Reloading {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            provider,
            current: ArcSwap::from(loaded.key),
        })
    }

    /// Reads the files again and swaps the new certificate in; on failure
    /// keeps the one in use. What was loaded, or why not.
    pub fn reload(&self) -> Result<String, String> {
        match read(&self.cert_path, &self.key_path, &self.provider) {
            Ok(loaded) => {
                let said = loaded.describe(&self.cert_path);
                loaded.publish();
                self.current.store(loaded.key);
                metrics::counter!("es_tls_cert_reloads_total", "outcome" => "ok").increment(1);
                Ok(said)
            }
            Err(e) => {
                metrics::counter!("es_tls_cert_reloads_total", "outcome" => "failed").increment(1);
                Err(format!("{e}; still serving the certificate loaded before"))
            }
        }
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// A certificate read from the files, with what its leaf says.
struct Loaded {
    key: Arc<CertifiedKey>,
    serial: String,
    not_after_s: Option<i64>,
}

impl Loaded {
    fn describe(&self, cert_path: &Path) -> String {
        let until = match self.not_after_s {
            Some(s) => format!("valid until unix time {s}"),
            None => "its expiry could not be read".to_string(),
        };
        format!(
            "TLS certificate {} loaded: serial {}, {until}",
            cert_path.display(),
            self.serial
        )
    }

    /// Sets `es_tls_cert_not_after_seconds` to its leaf's expiry.
    fn publish(&self) {
        if let Some(s) = self.not_after_s {
            metrics::gauge!("es_tls_cert_not_after_seconds").set(s as f64);
        }
    }
}

/// Reads the chain (leaf first) and the key, and checks that the key is
/// the leaf's. The main thread or the signal thread only: this blocks on
/// file reads.
fn read(cert_path: &Path, key_path: &Path, provider: &CryptoProvider) -> Result<Loaded, String> {
    let in_cert = |e: &dyn std::fmt::Display| format!("--tls-cert {}: {e}", cert_path.display());
    // blocking-ok: main or signal thread (pem_file_iter reads the file)
    let chain = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| in_cert(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| in_cert(&e))?;
    let Some(leaf) = chain.first() else {
        return Err(in_cert(&"no CERTIFICATE block in it"));
    };
    let (serial, not_after_s) = match der::leaf_facts(leaf) {
        Some((serial, not_after)) => (serial, Some(not_after)),
        None => ("unknown".to_string(), None),
    };
    // blocking-ok: main or signal thread (from_pem_file reads the file)
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| format!("--tls-key {}: {e}", key_path.display()))?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => format!(
            "--tls-key {} is not the private key of the certificate in --tls-cert {}",
            key_path.display(),
            cert_path.display()
        ),
        other => format!("--tls-key {}: {other}", key_path.display()),
    })?;
    Ok(Loaded {
        key: Arc::new(key),
        serial,
        not_after_s,
    })
}
