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
    // Later values win: a test may point REGISTRY_URL elsewhere (https).
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

/// With `--tls-cert` and `--auth required`: the registry speaks TLS with
/// the broker's certificate, takes `basic.auth.user.info` `<id>:<key>`,
/// and checks subject grants; Confluent's client with `ssl.ca.location`.
#[test]
fn confluents_client_over_tls_with_basic_auth_and_subject_grants() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = common::pki::server_files(dir.path(), "es registry test CA");
    let path = |n: &str| dir.path().join(n).display().to_string();
    let b = Broker::start_unready(2, &["--tls-cert", &cert, "--tls-key", &key, "--auth", "required"]);
    let https = |method: &str, url: &str, auth: &str, body: Option<&str>| -> (u16, String) {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-sS",
            "--max-time",
            "60",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "--cacert",
            &path("ca.pem"),
        ])
        .args(["-X", method, "-H", &format!("Authorization: {auth}"), url]);
        if let Some(b) = body {
            cmd.args(["-H", "Content-Type: application/json", "-d", b]);
        }
        let out = cmd.output().expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    };
    let admin_file = b.data_dir().join("admin.key");
    common::wait_for("the admin key", || admin_file.is_file());
    let admin = std::fs::read_to_string(&admin_file).unwrap().trim().to_string();
    let bearer = format!("Bearer {admin}");
    let registry = format!("https://127.0.0.1:{}", b.registry_addr().port());
    common::wait_for("the registry to answer over TLS", || {
        https("GET", &format!("{registry}/subjects"), &bearer, None).0 == 200
    });
    let api = format!("https://127.0.0.1:{}", b.addr().port());
    let grant = r#"{"name":"orders-service","grants":[{"resource":"subject","pattern":"prefixed","name":"orders-","operations":["read","write"]}]}"#;
    let (status, made) = https("POST", &format!("{api}/v1/keys"), &bearer, Some(grant));
    assert_eq!(status, 201, "{made}");
    let made: serde_json::Value = serde_json::from_str(&made).unwrap();
    let (id, key) = (made["id"].as_str().unwrap(), made["key"].as_str().unwrap());
    let wrong = format!(
        "{}{}",
        &key[..key.len() - 1],
        if key.ends_with('a') { 'b' } else { 'a' }
    );
    let out = run_script(
        &b,
        "confluent_tls_auth.py",
        &[
            ("REGISTRY_URL", &registry),
            ("CA_PEM", &path("ca.pem")),
            ("USER_INFO", &format!("{id}:{key}")),
            ("WRONG_USER_INFO", &format!("{id}:{wrong}")),
        ],
    );
    print!("{out}");
    assert!(out.contains("registry tls: 3 passed, 0 failed"), "{out}");
}
