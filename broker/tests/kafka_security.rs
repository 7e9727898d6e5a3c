//! The Kafka port with `--auth required` (docs/kafka.md, "Security"):
//! SASL/PLAIN with an es key (username the key id, password the key) in
//! kcat and confluent-kafka, over plaintext and over TLS; a wrong key
//! fails authentication; a topic outside the key's grant is
//! TOPIC_AUTHORIZATION_FAILED; a produce quota throttles (librdkafka's
//! `throttle_cb`) and holds the rate.

mod auth_common;
mod common;
mod kafka_common;

use auth_common::{call, grant, make_key};
use common::{free_port, pki, Broker};
use kafka_common::{kcat, py};
use serde_json::json;

fn sasl(id: &str, key: &str, protocol: &str) -> Vec<String> {
    vec![
        format!("security.protocol={protocol}"),
        "sasl.mechanisms=PLAIN".into(),
        format!("sasl.username={id}"),
        format!("sasl.password={key}"),
    ]
}

fn kcat_x<'a>(kafka: &'a str, conf: &'a [String], rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["-b", kafka];
    for c in conf {
        args.extend(["-X", c.as_str()]);
    }
    args.extend_from_slice(rest);
    args
}

/// A broker with `--auth required` and its Kafka port: it, the admin key,
/// the Kafka address.
fn start(extra: &[&str]) -> (Broker, String, String) {
    let kafka = format!("127.0.0.1:{}", free_port());
    let mut args = vec!["--kafka-addr", kafka.as_str()];
    args.extend_from_slice(extra);
    let (b, admin) = auth_common::start(&args);
    (b, admin, kafka)
}

#[test]
fn sasl_plain_with_an_es_key_and_its_grants() {
    let (b, admin, kafka) = start(&[]);
    for t in ["ok.orders", "secret"] {
        let a = call(
            &b,
            "POST",
            "/v1/topics",
            &admin,
            Some(&json!({"name": t, "partitions": 1})),
        );
        assert_eq!(a.status, 201, "{}", a.body);
    }
    let (id, key) = make_key(
        &b,
        &admin,
        "app",
        false,
        json!([grant("topic", "prefixed", "ok.", &["read", "write", "describe"])]),
    );
    let good = sasl(&id, &key, "SASL_PLAINTEXT");
    // kcat: metadata shows only what the key may describe; produce, consume.
    let (ok, out, err) = kcat(&kcat_x(&kafka, &good, &["-L", "-J"]), "");
    assert!(ok, "{err}");
    assert!(out.contains("ok.orders") && !out.contains("\"secret\""), "{out}");
    let (ok, _, err) = kcat(
        &kcat_x(&kafka, &good, &["-P", "-t", "ok.orders", "-p", "0"]),
        "a\nb\n",
    );
    assert!(ok, "{err}");
    let (ok, out, err) = kcat(
        &kcat_x(
            &kafka,
            &good,
            &["-C", "-t", "ok.orders", "-p", "0", "-o", "beginning", "-e"],
        ),
        "",
    );
    assert!(ok, "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["a", "b"]);
    // A wrong key: authentication fails.
    let (wrong_id, _) = make_key(&b, &admin, "other", false, json!([]));
    let bad = sasl(&wrong_id, &key, "SASL_PLAINTEXT");
    let (ok, _, err) = kcat(&kcat_x(&kafka, &bad, &["-L", "-m", "5"]), "");
    assert!(!ok, "a wrong key was accepted");
    assert!(
        err.contains("Authentication failed") || err.contains("SASL authentication error"),
        "{err}"
    );
    // confluent-kafka: a topic outside the grant.
    let mut args = vec![
        "produce".to_string(),
        kafka.clone(),
        "secret".into(),
        "1".into(),
        "1".into(),
    ];
    args.extend(good.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = py(&args);
    assert!(
        out.iter().any(|l| l["error"]
            .as_str()
            .is_some_and(|e| e.contains("TOPIC_AUTHORIZATION_FAILED"))),
        "{out:?}"
    );
    // And one inside it.
    let mut args = vec![
        "produce".to_string(),
        kafka.clone(),
        "ok.orders".into(),
        "10".into(),
        "1".into(),
    ];
    args.extend(good.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = py(&args);
    assert_eq!(out.iter().filter(|l| l.get("o").is_some()).count(), 10, "{out:?}");
}

#[test]
fn sasl_ssl_with_kcat_and_confluent_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = pki::server_files(dir.path(), "es kafka test CA");
    let path = |n: &str| dir.path().join(n).display().to_string();
    let kafka = format!("127.0.0.1:{}", free_port());
    let b = Broker::start_unready(
        2,
        &[
            "--auth",
            "required",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--kafka-addr",
            &kafka,
        ],
    );
    common::wait_for("admin.key", || b.data_dir().join("admin.key").exists());
    let admin = auth_common::admin_key(&b);
    let id = admin.split('_').nth(1).expect("a key's id").to_string();
    let mut conf = sasl(&id, &admin, "SASL_SSL");
    conf.push(format!("ssl.ca.location={}", path("ca.pem")));
    common::wait_for("kcat -L over SASL_SSL", || {
        kcat(&kcat_x(&kafka, &conf, &["-L", "-m", "5"]), "").0
    });
    // confluent-kafka: AdminClient creates a topic, a producer writes to it,
    // over TLS with the key.
    let with = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(conf.iter().cloned());
        py(&all.iter().map(String::as_str).collect::<Vec<_>>())
    };
    assert_eq!(
        with(&["create", &kafka, "tls-topic", "1"])[0]["created"],
        json!("tls-topic")
    );
    let out = with(&["produce", &kafka, "tls-topic", "100", "1"]);
    assert_eq!(
        out.iter().filter(|l| l.get("o").is_some()).count(),
        100,
        "{out:?}"
    );
    let (ok, out, err) = kcat(
        &kcat_x(
            &kafka,
            &conf,
            &[
                "-C",
                "-t",
                "tls-topic",
                "-p",
                "0",
                "-o",
                "beginning",
                "-e",
                "-f",
                "%s\n",
            ],
        ),
        "",
    );
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 100);
    // A wrong key over TLS fails too.
    let mut bad = sasl(&id, &format!("{admin}x"), "SASL_SSL");
    bad.push(format!("ssl.ca.location={}", path("ca.pem")));
    let (ok, _, err) = kcat(&kcat_x(&kafka, &bad, &["-L", "-m", "5"]), "");
    assert!(!ok, "a wrong key was accepted: {err}");
}

/// A key's produce quota: librdkafka, offering five times the quota, is
/// throttled (`throttle_cb`), and the rate it achieves stays under the
/// quota plus 10%. How far under depends on how fast the client and this
/// machine are, so only the bound the quota promises is the verdict
/// (broker/tests/quotas.rs judges the lower side where it can).
#[test]
fn a_produce_quota_throttles_kafka_clients_and_holds_the_rate() {
    const RATE: u64 = 1 << 20;
    let (b, admin, kafka) = start(&["--quota-burst-ms", "100"]);
    let a = call(
        &b,
        "POST",
        "/v1/topics",
        &admin,
        Some(&json!({"name": "q", "partitions": 1})),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    let (id, key) = make_key(
        &b,
        &admin,
        "slow",
        false,
        json!([grant("topic", "literal", "q", &["write", "describe"])]),
    );
    let a = call(
        &b,
        "PATCH",
        &format!("/v1/keys/{id}"),
        &admin,
        Some(&json!({"quota": {"produce_bytes_per_sec": RATE}})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let mut args = vec![
        "throttle".to_string(),
        kafka.clone(),
        "q".into(),
        "8".into(),
        (5 * RATE).to_string(),
    ];
    args.extend(sasl(&id, &key, "SASL_PLAINTEXT"));
    let out = py(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let r = &out[0];
    assert!(
        r["throttles"].as_u64().unwrap() > 0,
        "throttle_cb never fired: {r}"
    );
    let rate = r["acked"].as_f64().unwrap() / r["seconds"].as_f64().unwrap();
    let ratio = rate / RATE as f64;
    assert!(
        ratio <= 1.1,
        "achieved {rate:.0} B/s against a quota of {RATE}: {r}"
    );
    eprintln!("achieved {rate:.0} B/s against a quota of {RATE} ({ratio:.3})");
}
