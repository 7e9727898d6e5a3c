//! `es schema ...` against a real es-broker's schema registry: register,
//! get, list, versions, check, config and delete, as tables and as JSON
//! lines, and the registry's errors with their codes.

mod common;

use common::{free_port, ok, stderr, stdout, temp_dir, Broker};
use serde_json::Value;

const V1: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#;
const V2: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}"#;
const BAD: &str =
    r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int"}]}"#;

fn json_lines(out: &std::process::Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn schema_commands_against_a_real_registry() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let b = Broker::start_with(&["--registry-addr", &addr]);
    let url = format!("http://{addr}");
    let dir = temp_dir();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let (v1, v2, bad) = (file("v1.avsc", V1), file("v2.avsc", V2), file("bad.avsc", BAD));
    let es = |args: &[&str]| {
        let mut all = vec!["schema", "--registry", url.as_str()];
        all.extend_from_slice(args);
        b.es(&all)
    };
    let out = ok(es(&["register", "orders-value", "--file", &v1]));
    assert_eq!(stdout(&out), "registered orders-value version 1 (schema id 1)\n");
    let out = ok(es(&["--json", "register", "orders-value", "--file", &v1]));
    assert_eq!(json_lines(&out)[0]["id"], 1, "the same schema keeps its id");
    assert_eq!(json_lines(&out)[0]["version"], 1);
    ok(es(&["register", "orders-value", "--file", &v2]));

    // check: compatible, and not (exit code 1, the reason printed).
    let out = ok(es(&["check", "orders-value", "--file", &v2]));
    assert!(
        stdout(&out).contains("compatible with orders-value"),
        "{}",
        stdout(&out)
    );
    let out = es(&["check", "orders-value", "--file", &bad]);
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("NOT compatible") && stdout(&out).contains("qty"),
        "{}",
        stdout(&out)
    );
    let refused = es(&["register", "orders-value", "--file", &bad]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("error_code 40901"),
        "{}",
        stderr(&refused)
    );
    let refused = es(&["--json", "register", "orders-value", "--file", &bad]);
    let e: Value = serde_json::from_str(stderr(&refused).trim()).unwrap();
    assert_eq!(e["error"]["code"], "incompatible_schema");

    // config: global, a subject's own (set, then read).
    assert_eq!(stdout(&ok(es(&["config"]))), "global: BACKWARD\n");
    assert_eq!(
        stdout(&ok(es(&["config", "orders-value", "NONE"]))),
        "orders-value: NONE\n"
    );
    assert_eq!(
        stdout(&ok(es(&["config", "orders-value"]))),
        "orders-value: NONE\n"
    );
    ok(es(&["register", "orders-value", "--file", &bad]));
    let bad_level = es(&["config", "orders-value", "SIDEWAYS"]);
    assert!(stderr(&bad_level).contains("42203"), "{}", stderr(&bad_level));

    // list, versions, get: tables and JSON lines.
    ok(es(&["register", "audit-value", "--file", &v1]));
    let out = ok(es(&["list"]));
    let table = stdout(&out);
    assert!(table.starts_with("SUBJECT"), "{table}");
    assert!(
        table.contains("orders-value") && table.contains("audit-value"),
        "{table}"
    );
    let rows = json_lines(&ok(es(&["--json", "list", "ord"])));
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0]["subject"].as_str(), rows[0]["version"].as_u64()),
        (Some("orders-value"), Some(3))
    );
    assert_eq!(rows[0]["compatibility"], "NONE");
    let versions = json_lines(&ok(es(&["--json", "versions", "orders-value"])));
    let ids: Vec<u64> = versions.iter().map(|v| v["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [1, 2, 3]);
    let got = stdout(&ok(es(&["get", "1"])));
    assert!(
        got.contains("type:     AVRO") && got.contains("audit-value v1") && got.contains("\"Order\""),
        "{got}"
    );
    let got = json_lines(&ok(es(&["--json", "get", "2"])));
    assert_eq!(got[0]["schema"], V2);

    // delete: soft, permanent; errors carry the registry's code.
    let early = es(&["delete", "audit-value", "--permanent"]);
    assert!(stderr(&early).contains("40405"), "{}", stderr(&early));
    assert_eq!(
        stdout(&ok(es(&["delete", "audit-value"]))),
        "soft-deleted audit-value version(s) 1\n"
    );
    let out = ok(es(&["delete", "audit-value", "--permanent"]));
    assert_eq!(stdout(&out), "permanently deleted audit-value version(s) 1\n");
    let out = ok(es(&["--json", "delete", "orders-value", "--version", "3"]));
    assert_eq!(json_lines(&out)[0]["deleted"], serde_json::json!([3]));
    let missing = es(&["--json", "versions", "nope"]);
    let e: Value = serde_json::from_str(stderr(&missing).trim()).unwrap();
    assert_eq!(e["error"]["code"], "subject_not_found");

    // No registry there: said so.
    let gone = b.es(&[
        "schema",
        "--registry",
        &format!("http://127.0.0.1:{}", free_port()),
        "list",
    ]);
    assert!(
        stderr(&gone).contains("cannot reach the schema registry"),
        "{}",
        stderr(&gone)
    );
}
