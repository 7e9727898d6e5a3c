//! The schema registry through a backup: `es-tools dump` of a stopped
//! broker's data dir holds `_schemas`, and a broker on the restored dir
//! serves the same subjects, versions, ids and compatibility levels, and
//! gives the next new schema an id past every one given before, even one
//! whose versions were deleted for good.

mod common;

use common::broker::{http, Broker};
use common::*;
use serde_json::{json, Value};

const V1: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#;
const V2: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"n","type":"int","default":0}]}"#;

/// A broker on `data` with its registry on a port of its own.
fn start(data: &std::path::Path) -> (Broker, u16) {
    let port = port_free();
    let addr = format!("127.0.0.1:{port}");
    (Broker::start_with(data, None, &["--registry-addr", &addr]), port)
}

fn port_free() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

fn ok(port: u16, method: &str, path: &str, body: Option<Value>) -> Value {
    let (status, v) = http(port, method, path, body.as_ref());
    assert_eq!(status, 200, "{method} {path}: {v}");
    v
}

#[test]
fn dump_and_restore_keep_schema_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (mut b, r) = start(&data);
    let reg = |s: &str, schema: &str| {
        ok(
            r,
            "POST",
            &format!("/subjects/{s}/versions"),
            Some(json!({"schema": schema})),
        )["id"]
            .clone()
    };
    assert_eq!(reg("orders-value", V1), 1);
    assert_eq!(reg("orders-value", V2), 2);
    assert_eq!(reg("gone-value", r#""string""#), 3);
    assert_eq!(reg("audit-value", V1), 1);
    ok(r, "DELETE", "/subjects/gone-value", None);
    ok(r, "DELETE", "/subjects/gone-value?permanent=true", None);
    ok(
        r,
        "PUT",
        "/config/orders-value",
        Some(json!({"compatibility": "FULL"})),
    );
    b.stop();

    let archive = tmp.path().join("backup.tar");
    dump_to(&data, &archive, &[], 0);
    let new = tmp.path().join("restored");
    restore_to(&archive, &new, &[], 0);

    let (_b, r) = start(&new);
    assert_eq!(
        ok(r, "GET", "/subjects", None),
        json!(["audit-value", "orders-value"])
    );
    assert_eq!(
        ok(r, "GET", "/subjects/orders-value/versions", None),
        json!([1, 2])
    );
    assert_eq!(ok(r, "GET", "/subjects/orders-value/versions/2", None)["id"], 2);
    assert_eq!(ok(r, "GET", "/schemas/ids/1", None)["schema"], V1);
    assert_eq!(
        ok(r, "GET", "/config/orders-value", None)["compatibilityLevel"],
        "FULL"
    );
    assert_eq!(
        http(r, "GET", "/schemas/ids/3", None).0,
        404,
        "deleted for good stays deleted"
    );
    let next = ok(
        r,
        "POST",
        "/subjects/new-value/versions",
        Some(json!({"schema": r#""bytes""#})),
    );
    assert_eq!(next["id"], 4, "id 3 is never given again, after a restore too");
}
