//! Certificates made for tests (rcgen): a self-signed CA, and a server
//! certificate for 127.0.0.1 and localhost signed by it.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// A self-signed CA whose common name is `name`.
pub fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A CA named `ca_name` and a server certificate for 127.0.0.1 and
/// localhost signed by it, written to `dir` as `ca.pem`, `cert.pem` and
/// `key.pem`: the paths of the certificate and of its key.
pub fn server_files(dir: &Path, ca_name: &str) -> (String, String) {
    let ca = ca(ca_name);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let path = |n: &str| dir.join(n).display().to_string();
    std::fs::write(path("ca.pem"), ca.pem()).unwrap();
    std::fs::write(path("cert.pem"), leaf.pem()).unwrap();
    std::fs::write(path("key.pem"), leaf_key.serialize_pem()).unwrap();
    (path("cert.pem"), path("key.pem"))
}
