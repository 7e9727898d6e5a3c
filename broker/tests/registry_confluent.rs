//! The schema registry driven by Confluent's own Python client
//! (`SchemaRegistryClient`, `AvroSerializer`, `AvroDeserializer` from
//! confluent-kafka, installed by scripts/clients.sh) against a real
//! es-broker: tests/registry/confluent_client.py holds the steps; each
//! is an assert there. The Python interpreter is `ES_CLIENTS_PYTHON`
//! (scripts/test.sh sets it), else `<repo>/target/py-clients/bin/python`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::Broker;

/// The virtualenv's python, or a panic saying how to install it.
fn clients_python() -> PathBuf {
    let python = std::env::var_os("ES_CLIENTS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/py-clients/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import confluent_kafka.schema_registry.avro"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import confluent_kafka's schema registry client: run ./scripts/clients.sh \
         (or set ES_CLIENTS_PYTHON to a python with confluent-kafka[avro,schemaregistry])",
        python.display()
    );
    python
}

/// Runs tests/registry/`script` against `broker`; panics with its output
/// (and the broker's log) unless it passes.
pub fn run_script(broker: &Broker, script: &str, env: &[(&str, &str)]) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/registry")
        .join(script);
    let mut cmd = Command::new(clients_python());
    cmd.arg(&path)
        .env("REGISTRY_URL", format!("http://{}", broker.registry_addr()))
        .env("HTTP_URL", format!("http://{}", broker.addr()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("python runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{text}\n{}",
        out.status,
        broker.stderr_text()
    );
    text
}

#[test]
fn confluents_client_registers_evolves_deletes_and_serializes() {
    let broker = Broker::start(2);
    let out = run_script(&broker, "confluent_client.py", &[]);
    print!("{out}");
    assert!(out.contains("registry: 11 passed, 0 failed"), "{out}");
}
