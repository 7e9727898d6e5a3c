//! es-bench over TLS (`--tls-ca`) against an es-broker started here with
//! `--tls-cert`/`--tls-key` on certificates made with rcgen: produce, e2e
//! and consume run, through the client library, and count records. No
//! timed assertions; every wait polls, bounded only by the hang guard.

#[path = "../../broker/tests/common/broker_bin.rs"]
mod broker_bin;
mod common;
#[path = "../../broker/tests/common/port.rs"]
mod port;
#[path = "../../broker/tests/common/wait.rs"]
mod wait;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use es_protocol::client::tls::TlsOptions;
use es_protocol::client::{Client, Options};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde_json::Value;

/// Kills the broker when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        wait::unwatch(self.0.id());
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A CA (`ca.pem`) and a certificate for 127.0.0.1 it signed (`cert.pem`,
/// `key.pem`) in `dir`.
fn certificates(dir: &Path) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "es-bench test CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
}

fn bench(args: &[&str]) -> Value {
    common::json_of(
        Command::new(env!("CARGO_BIN_EXE_es-bench"))
            .args(args)
            .args(["--json", "--quiet"])
            .env_remove("ES_TLS")
            .env_remove("ES_TLS_CA"),
        &format!("{args:?}"),
    )
}

#[test]
fn produce_e2e_and_consume_over_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    certificates(dir);
    let binary = format!("127.0.0.1:{}", port::free_port());
    let log = dir.join("broker.log");
    let child = Command::new(broker_bin::broker_bin())
        .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--http-addr", &format!("127.0.0.1:{}", port::free_port())])
        .args(["--binary-addr", &binary, "--shards", "2"])
        .arg("--tls-cert")
        .arg(dir.join("cert.pem"))
        .arg("--tls-key")
        .arg(dir.join("key.pem"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start es-broker");
    wait::watch(child.id(), &log);
    let _broker = Running(child);
    let ca = dir.join("ca.pem");
    wait::wait_for("the TLS broker to take a connection", || {
        let options = Options {
            tls: Some(TlsOptions::new(Some(&ca)).unwrap()),
            ..Options::default()
        };
        Client::connect(&binary, options).is_ok()
    });
    let ca = ca.to_str().unwrap();
    for mode in ["produce", "e2e"] {
        let doc = bench(&[
            mode,
            "--broker",
            &binary,
            "--tls-ca",
            ca,
            "--duration",
            "1",
            "--partitions",
            "2",
        ]);
        assert_eq!(doc["config"]["tls"], true, "{doc}");
        let phase = &doc["phases"][0];
        assert!(phase["records"].as_u64().unwrap() > 0, "{doc}");
    }
    let doc = bench(&[
        "consume",
        "--broker",
        &binary,
        "--tls-ca",
        ca,
        "--duration",
        "1",
        "--partitions",
        "2",
        "--prefill-mb",
        "2",
    ]);
    assert!(doc["phases"][0]["records"].as_u64().unwrap() > 0, "{doc}");
}
