//! `es` over TLS (`--tls`, `--tls-ca`, `ES_TLS_CA`) against a real broker
//! started with `--tls-cert`/`--tls-key` on certificates made here
//! (rcgen): topics, produce and consume work with the broker's CA, by
//! address and by name; without TLS, with another CA, or by a name the
//! certificate does not carry, `es` fails saying what failed and what to
//! do. Every wait polls, bounded only by the hang guard.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// A CA's certificate, written to `dir/<name>-ca.pem`, and the CA.
fn ca(dir: &Path, name: &str) -> (PathBuf, CertifiedIssuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let path = dir.join(format!("{name}-ca.pem"));
    std::fs::write(&path, ca.pem()).unwrap();
    (path, ca)
}

/// A broker speaking TLS with a certificate for `localhost` (only: so
/// that 127.0.0.1 is a name it does not carry) signed by a CA of its own;
/// that CA's file.
fn tls_broker(dir: &Path) -> (Broker, PathBuf) {
    let (ca_path, ca) = ca(dir, "es-test");
    let params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let b = Broker::start_unready(&[
        "--tls-cert",
        cert_path.to_str().unwrap(),
        "--tls-key",
        key_path.to_str().unwrap(),
    ]);
    let ca_arg = ca_path.to_str().unwrap();
    wait_until("the TLS broker to answer es topic list", || {
        es(&b, &["--tls-ca", ca_arg, "topic", "list"], b"")
            .status
            .success()
            .then_some(())
    });
    (b, ca_path)
}

/// `es --broker localhost:PORT ARGS` (the name in the broker's certificate).
fn es(b: &Broker, args: &[&str], input: &[u8]) -> std::process::Output {
    let port = b.addr.rsplit_once(':').unwrap().1;
    let broker = format!("localhost:{port}");
    let mut all = vec!["--broker", broker.as_str()];
    all.extend_from_slice(args);
    run_es(&all, input, &[])
}

#[test]
fn es_produces_and_consumes_over_tls_and_says_what_failed_otherwise() {
    let dir = temp_dir();
    let (b, ca_path) = tls_broker(&dir);
    let ca_arg = ca_path.to_str().unwrap();

    ok(es(
        &b,
        &[
            "--tls-ca",
            ca_arg,
            "topic",
            "create",
            "secure",
            "--partitions",
            "2",
        ],
        b"",
    ));
    ok(es(
        &b,
        &["--tls-ca", ca_arg, "produce", "secure", "--partition", "1"],
        b"one\ntwo\nthree\n",
    ));
    let consume = [
        "--tls-ca",
        ca_arg,
        "consume",
        "secure",
        "--partition",
        "1",
        "--from-beginning",
        "--max",
        "3",
    ];
    assert_eq!(stdout(&ok(es(&b, &consume, b""))), "one\ntwo\nthree\n");

    // The CA from the environment, with --tls.
    let port = b.addr.rsplit_once(':').unwrap().1;
    let out = run_es(
        &["--broker", &format!("localhost:{port}"), "--tls", "topic", "list"],
        b"",
        &[("ES_TLS_CA", ca_arg)],
    );
    assert!(stdout(&ok(out)).contains("secure"));

    // Plaintext to a TLS broker: what to add.
    let e = fails(&es(&b, &["topic", "list"], b""), 1);
    assert!(e.contains("--tls-ca"), "{e}");

    // Another CA: the certificate is unknown; give its CA.
    let (other, _) = ca(&dir, "other");
    let out = es(
        &b,
        &["--json", "--tls-ca", other.to_str().unwrap(), "topic", "list"],
        b"",
    );
    let e = fails(&out, 1);
    assert!(e.contains("unknown issuer") && e.contains("--tls-ca FILE"), "{e}");
    assert!(e.contains("\"code\":\"tls_error\""), "{e}");

    // 127.0.0.1, which the certificate does not carry.
    let e = fails(&b.es(&["--tls-ca", ca_arg, "topic", "list"]), 1);
    assert!(e.contains("name mismatch") && e.contains("\"127.0.0.1\""), "{e}");

    // --tls-ca naming no file.
    let missing = dir.join("missing.pem");
    let e = fails(
        &es(&b, &["--tls-ca", missing.to_str().unwrap(), "topic", "list"], b""),
        1,
    );
    assert!(e.contains("--tls-ca") && e.contains("missing.pem"), "{e}");
}
