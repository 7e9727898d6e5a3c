//! The schema registry over plain HTTP against a real es-broker: what
//! survives `kill -9` (ids, versions, soft deletes, compatibility
//! levels, ids never reused), hostile input answered with Confluent's
//! codes while the broker keeps serving, a damaged `_schemas` record
//! reported at start and skipped, and the registry's security (Basic
//! auth, grants on subjects, `_schemas` admin-only through the topic
//! API). Confluent's own client is registry_confluent.rs.

mod auth_common;
mod common;

use serde_json::{json, Value};

use common::{Broker, Client};

const V1: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#;
const V2: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}"#;
const OTHER: &str = r#"{"type":"record","name":"Shipment","fields":[{"name":"id","type":"long"}]}"#;

fn registry(b: &Broker) -> Client {
    Client::new(b.registry_addr())
}

fn register(r: &Client, subject: &str, schema: &str) -> u64 {
    let (status, body) = r.post(
        &format!("/subjects/{subject}/versions"),
        json!({"schema": schema}),
    );
    assert_eq!(status, 200, "{body}");
    body["id"].as_u64().expect("an id")
}

/// `(HTTP status, error_code)` of an answer.
fn code(got: &(u16, Value)) -> (u16, i64) {
    (got.0, got.1["error_code"].as_i64().unwrap_or(-1))
}

#[test]
fn ids_versions_and_configs_survive_kill_9() {
    let mut b = Broker::start(2);
    let r = registry(&b);
    assert_eq!(register(&r, "orders-value", V1), 1);
    assert_eq!(register(&r, "orders-value", V2), 2);
    assert_eq!(register(&r, "shipments-value", OTHER), 3);
    assert_eq!(register(&r, "audit-value", V1), 1, "the same schema, the same id");
    assert_eq!(register(&r, "gone-value", r#""string""#), 4);
    // Id 4 deleted for good: its records are tombstones.
    assert_eq!(r.delete("/subjects/gone-value").0, 200);
    assert_eq!(r.delete("/subjects/gone-value?permanent=true").0, 200);
    assert_eq!(r.delete("/subjects/shipments-value").0, 200, "soft only");
    assert_eq!(
        r.request("PUT", "/config", Some(br#"{"compatibility":"FULL"}"#))
            .0,
        200
    );
    assert_eq!(
        r.request(
            "PUT",
            "/config/orders-value",
            Some(br#"{"compatibility":"NONE"}"#)
        )
        .0,
        200
    );

    b.kill9();
    b.restart();
    let r = registry(&b);
    assert_eq!(r.get("/subjects/orders-value/versions").1, json!([1, 2]));
    assert_eq!(r.get("/subjects/audit-value/versions/1").1["id"], 1);
    assert_eq!(r.get("/subjects/orders-value/versions/2").1["id"], 2);
    assert_eq!(r.get("/schemas/ids/2").1["schema"], V2);
    assert_eq!(r.get("/subjects").1, json!(["audit-value", "orders-value"]));
    assert_eq!(
        r.get("/subjects?deleted=true").1,
        json!(["audit-value", "orders-value", "shipments-value"])
    );
    assert_eq!(
        r.get("/subjects/shipments-value/versions?deleted=true").1,
        json!([1])
    );
    assert_eq!(code(&r.get("/schemas/ids/4")), (404, 40403));
    assert_eq!(r.get("/config").1, json!({"compatibilityLevel": "FULL"}));
    assert_eq!(
        r.get("/config/orders-value").1,
        json!({"compatibilityLevel": "NONE"})
    );
    assert_eq!(
        register(&r, "new-value", r#"{"type":"enum","name":"E","symbols":["A"]}"#),
        5,
        "id 4 is never given again, even with its records deleted"
    );
    // A second restart after more changes still agrees.
    b.kill9();
    b.restart();
    let r = registry(&b);
    assert_eq!(r.get("/subjects/new-value/versions/latest").1["id"], 5);
    assert_eq!(register(&r, "newer-value", r#""bytes""#), 6);
}

#[test]
fn schemas_are_listed_in_pages_and_contexts_answer_the_default() {
    let b = Broker::start(1);
    let r = registry(&b);
    assert_eq!(
        r.request("PUT", "/config", Some(br#"{"compatibility":"NONE"}"#))
            .0,
        200
    );
    assert_eq!(register(&r, "orders-value", V1), 1);
    assert_eq!(register(&r, "orders-value", V2), 2);
    assert_eq!(register(&r, "shipments-value", OTHER), 3);
    assert_eq!(register(&r, "gone-value", r#""string""#), 4);
    assert_eq!(r.delete("/subjects/gone-value").0, 200, "soft deleted");

    let listed = |query: &str| -> Vec<(String, u64, u64)> {
        let (status, body) = r.get(&format!("/schemas{query}"));
        assert_eq!(status, 200, "{query}: {body}");
        body.as_array()
            .expect("an array")
            .iter()
            .map(|e| {
                let subject = e["subject"].as_str().unwrap().to_string();
                (subject, e["version"].as_u64().unwrap(), e["id"].as_u64().unwrap())
            })
            .collect()
    };
    let all = vec![
        ("orders-value".to_string(), 1, 1),
        ("orders-value".to_string(), 2, 2),
        ("shipments-value".to_string(), 1, 3),
    ];
    assert_eq!(listed(""), all);
    assert_eq!(r.get("/schemas").1[1]["schema"], V2);
    assert_eq!(listed("?subjectPrefix=orders"), all[..2]);
    assert_eq!(listed("?latestOnly=true"), vec![all[1].clone(), all[2].clone()]);
    assert_eq!(listed("?offset=1&limit=1"), all[1..2]);
    assert_eq!(listed("?offset=3"), vec![]);
    assert_eq!(
        listed("?deleted=true&subjectPrefix=gone"),
        vec![("gone-value".to_string(), 1, 4)]
    );
    assert_eq!(code(&r.get("/schemas?limit=abc")), (400, 400));
    assert_eq!(r.get("/contexts").1, json!(["."]));
}

#[test]
fn import_mode_keeps_the_ids_and_versions_it_is_given() {
    let mut b = Broker::start(2);
    let r = registry(&b);
    let put_mode = |r: &Client, query: &str, mode: &str| {
        r.request(
            "PUT",
            &format!("/mode{query}"),
            Some(format!(r#"{{"mode":"{mode}"}}"#).as_bytes()),
        )
    };
    let import =
        |r: &Client, subject: &str, body: Value| r.post(&format!("/subjects/{subject}/versions"), body);
    // Outside IMPORT mode a registration may not name its id.
    assert_eq!(
        code(&import(&r, "orders-value", json!({"schema": V1, "id": 100}))),
        (422, 42205)
    );
    assert_eq!(put_mode(&r, "", "IMPORT").0, 200, "an empty registry");
    assert_eq!(r.get("/mode").1, json!({"mode": "IMPORT"}));
    let (status, body) = import(&r, "orders-value", json!({"schema": V1, "id": 100, "version": 3}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["id"].as_u64(), body["version"].as_u64()),
        (Some(100), Some(3))
    );
    // Again: the same answer. Not compatibility-checked: OTHER is no
    // evolution of V1.
    assert_eq!(
        import(&r, "orders-value", json!({"schema": V1, "id": 100, "version": 3})).1["id"],
        100
    );
    assert_eq!(
        import(
            &r,
            "orders-value",
            json!({"schema": OTHER, "id": 7, "version": 4})
        )
        .0,
        200
    );
    // An id or version held by another schema is never overwritten.
    assert_eq!(
        code(&import(&r, "audit-value", json!({"schema": V2, "id": 100}))),
        (422, 42205)
    );
    assert_eq!(
        code(&import(
            &r,
            "orders-value",
            json!({"schema": V2, "id": 101, "version": 3})
        )),
        (422, 42205)
    );
    assert_eq!(
        code(&import(&r, "orders-value", json!({"schema": V2, "version": 0}))),
        (422, 42202)
    );
    assert_eq!(put_mode(&r, "", "READWRITE").0, 200);
    // Ids given afterwards start past every imported one.
    assert_eq!(register(&r, "fresh-value", r#""string""#), 101);

    b.kill9();
    b.restart();
    let r = registry(&b);
    assert_eq!(r.get("/subjects/orders-value/versions").1, json!([3, 4]));
    assert_eq!(r.get("/schemas/ids/100").1["schema"], V1);
    assert_eq!(r.get("/subjects/orders-value/versions/4").1["id"], 7);
    assert_eq!(
        register(&r, "later-value", r#""long""#),
        102,
        "the next id survives a restart"
    );
    // IMPORT into a registry holding subjects needs force.
    assert_eq!(code(&put_mode(&r, "", "IMPORT")), (422, 42205));
    assert_eq!(put_mode(&r, "?force=true", "IMPORT").0, 200);
}

#[test]
fn hostile_input_gets_confluents_codes_and_the_broker_keeps_serving() {
    let b = Broker::start(2);
    let r = registry(&b);
    assert_eq!(register(&r, "s", V1), 1);
    let post = |path: &str, body: &[u8]| r.request("POST", path, Some(body));
    // Invalid Avro, and bodies that hold no schema.
    for bad in [
        r#"{"schema":"{\"type\":\"record\"}"}"#,
        r#"{"schema":"{"}"#,
        r#"{"schema":""}"#,
        r#"{"schema":1}"#,
    ] {
        assert_eq!(
            code(&post("/subjects/s/versions", bad.as_bytes())),
            (422, 42201),
            "{bad}"
        );
    }
    assert_eq!(
        code(&post(
            "/subjects/s/versions",
            br#"{"schema":"\"int\"","schemaType":"XML"}"#
        )),
        (422, 42201)
    );
    // A 2 MiB schema: its field padded with a 2 MiB doc.
    let doc = "x".repeat(2 << 20);
    let big = json!({"schema": format!(r#"{{"type":"record","name":"Big","doc":"{doc}","fields":[]}}"#)});
    assert_eq!(
        code(&post("/subjects/s/versions", big.to_string().as_bytes())),
        (422, 42209)
    );
    // Versions that are not versions.
    for v in ["0", "abc", "-2", "99999999999"] {
        assert_eq!(
            code(&r.get(&format!("/subjects/s/versions/{v}"))),
            (422, 42202),
            "{v}"
        );
    }
    assert_eq!(code(&r.get("/subjects/s/versions/7")), (404, 40402));
    assert_eq!(code(&r.get("/subjects/nope/versions/1")), (404, 40401));
    // Unknown levels and modes.
    assert_eq!(
        code(&r.request("PUT", "/config", Some(br#"{"compatibility":"SIDEWAYS"}"#))),
        (422, 42203)
    );
    assert_eq!(
        code(&r.request("PUT", "/config/s", Some(br#"{"compatibility":"backward"}"#))),
        (422, 42203)
    );
    assert_eq!(
        code(&r.request("PUT", "/mode", Some(br#"{"mode":"SIDEWAYS"}"#))),
        (422, 42204)
    );
    // Subjects es refuses: a newline, too long, not UTF-8.
    assert_eq!(
        code(&post(
            "/subjects/a%0Ab/versions",
            format!("{{\"schema\":{:?}}}", V1).as_bytes()
        )),
        (422, 42208)
    );
    let long = "s".repeat(256);
    assert_eq!(code(&r.get(&format!("/subjects/{long}/versions"))), (422, 42208));
    assert_eq!(code(&r.get("/subjects/%FF/versions")), (422, 42208));
    // Bodies that are not JSON, or not objects.
    assert_eq!(post("/subjects/s/versions", b"{not json").0, 400);
    assert_eq!(post("/subjects/s/versions", b"[1,2]").0, 400);
    assert_eq!(code(&r.get("/no/such/path")), (404, 404));
    // References to nothing.
    let dangling = json!({"schema": V1, "references": [{"name": "X", "subject": "nope", "version": 1}]});
    assert_eq!(
        code(&post("/subjects/t/versions", dangling.to_string().as_bytes())),
        (422, 42201)
    );
    // Nothing was written by any of it, and the broker still serves.
    assert_eq!(r.get("/").1, json!({}));
    assert_eq!(r.get("/subjects").1, json!(["s"]));
    assert_eq!(register(&r, "s", V2), 2);
    assert_eq!(b.get("/ready").0, 200);
}

#[test]
fn a_damaged_schemas_record_is_reported_and_skipped_at_start() {
    let mut b = Broker::start(2);
    let r = registry(&b);
    assert_eq!(register(&r, "a-value", V1), 1);
    // With auth disabled the topic API may write `_schemas`: garbage, a
    // key of the wrong shape, and a SCHEMA record naming id 1 with another
    // schema.
    let (status, body) = b.post(
        "/v1/topics/_schemas/records",
        json!({"records": [
            {"key": "not json", "value": "x"},
            {"key": "{\"keytype\":\"SCHEMA\",\"subject\":\"b\",\"version\":0,\"magic\":1}", "value": "{}"},
            {"key": "{\"keytype\":\"SCHEMA\",\"subject\":\"c\",\"version\":1,\"magic\":1}",
             "value": "{\"subject\":\"c\",\"version\":1,\"id\":1,\"schema\":\"\\\"int\\\"\"}"},
        ]}),
    );
    assert_eq!(status, 200, "{body}");
    b.sigterm_and_wait();
    b.restart();
    let r = registry(&b);
    assert_eq!(r.get("/subjects").1, json!(["a-value"]));
    assert_eq!(r.get("/schemas/ids/1").1["schema"], V1);
    assert_eq!(b.metric("es_registry_damaged_records_total"), Some(3.0));
    let log = b.stderr_text();
    assert!(log.contains("a damaged registry record was skipped"), "{log}");
    assert_eq!(register(&r, "a-value", V2), 2, "the registry goes on past them");
}

#[test]
fn json_and_protobuf_schemas_are_stored_and_checked_levels_refused_loudly() {
    let b = Broker::start(1);
    let r = registry(&b);
    let json_schema = json!({"schema": r#"{"type":"object","properties":{"id":{"type":"integer"}}}"#, "schemaType": "JSON"});
    let (status, body) = r.post("/subjects/j-value/versions", json_schema.clone());
    assert_eq!(
        (status, body["error_code"].as_i64()),
        (409, Some(40901)),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("not implemented"),
        "{body}"
    );
    let (status, body) = r.post(
        "/compatibility/subjects/j-value/versions/latest?verbose=true",
        json_schema.clone(),
    );
    assert_eq!(status, 200);
    assert_eq!(body["is_compatible"], false, "{body}");
    assert!(
        body["messages"][0]
            .as_str()
            .unwrap()
            .contains("set compatibility NONE"),
        "{body}"
    );
    assert_eq!(
        r.request("PUT", "/config/j-value", Some(br#"{"compatibility":"NONE"}"#))
            .0,
        200
    );
    let (status, body) = r.post("/subjects/j-value/versions", json_schema);
    assert_eq!(status, 200, "{body}");
    let got = r.get(&format!("/schemas/ids/{}", body["id"])).1;
    assert_eq!(got["schemaType"], "JSON");
    assert_eq!(r.get("/schemas/types").1, json!(["AVRO", "JSON", "PROTOBUF"]));

    // PROTOBUF: compiled with its references (by import name), stored,
    // served; NONE only.
    let item = "syntax = \"proto3\";\npackage shop;\nmessage Item { string sku = 1; }\n";
    let order = "syntax = \"proto3\";\npackage shop;\nimport \"item.proto\";\nmessage Order { int64 id = 1; Item item = 2; }\n";
    let proto =
        |schema: &str, refs: Value| json!({"schema": schema, "schemaType": "PROTOBUF", "references": refs});
    let (status, body) = r.post("/subjects/item-value/versions", proto(item, json!([])));
    assert_eq!(
        (status, body["error_code"].as_i64()),
        (409, Some(40901)),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("PROTOBUF compatibility checking is not implemented"),
        "{body}"
    );
    assert_eq!(
        r.request("PUT", "/config", Some(br#"{"compatibility":"NONE"}"#))
            .0,
        200
    );
    let (status, item_id) = r.post("/subjects/item-value/versions", proto(item, json!([])));
    assert_eq!(status, 200, "{item_id}");
    let refs = json!([{"name": "item.proto", "subject": "item-value", "version": 1}]);
    let (status, body) = r.post("/subjects/order-value/versions", proto(order, refs.clone()));
    assert_eq!(status, 200, "{body}");
    let got = r.get(&format!("/schemas/ids/{}", body["id"])).1;
    assert_eq!(
        (got["schemaType"].as_str(), got["schema"].as_str()),
        (Some("PROTOBUF"), Some(order))
    );
    assert_eq!(got["references"], refs);
    // Without its import, and with a field number twice: 42201.
    assert_eq!(
        code(&r.post("/subjects/x-value/versions", proto(order, json!([])))),
        (422, 42201)
    );
    let twice = "syntax = \"proto3\"; message A { int32 x = 1; int32 y = 1; }";
    assert_eq!(
        code(&r.post("/subjects/x-value/versions", proto(twice, json!([])))),
        (422, 42201)
    );
    assert_eq!(
        r.get("/subjects/item-value/versions/1/referencedby").1,
        json!([body["id"]])
    );
}

#[test]
fn references_resolve_and_a_referenced_version_cannot_be_deleted() {
    let b = Broker::start(2);
    let r = registry(&b);
    let item =
        r#"{"type":"record","name":"Item","namespace":"shop","fields":[{"name":"sku","type":"string"}]}"#;
    assert_eq!(register(&r, "item-value", item), 1);
    let order = r#"{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"item","type":"shop.Item"}]}"#;
    let body = json!({"schema": order, "references": [{"name": "shop.Item", "subject": "item-value", "version": 1}]});
    let (status, got) = r.post("/subjects/order-value/versions", body);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["id"], 2);
    assert_eq!(
        r.get("/subjects/item-value/versions/1/referencedby").1,
        json!([2])
    );
    assert_eq!(
        r.get("/schemas/ids/2").1["references"][0]["subject"],
        "item-value"
    );
    assert_eq!(code(&r.delete("/subjects/item-value/versions/1")), (422, 42206));
    assert_eq!(code(&r.delete("/subjects/item-value")), (422, 42206));
    // Without the reference the named type is unknown.
    assert_eq!(
        code(&r.post("/subjects/x-value/versions", json!({"schema": order}))),
        (422, 42201)
    );
}

#[test]
fn basic_auth_and_subject_grants_guard_the_registry() {
    use auth_common::{grant, make_key};
    let (b, admin) = auth_common::start(&[]);
    let (id, key) = make_key(
        &b,
        &admin,
        "orders-service",
        false,
        json!([
            grant("subject", "prefixed", "orders-", &["read", "write"]),
            grant("topic", "literal", "*", &["all"]),
        ]),
    );
    let basic = |user: &str, key: &str| {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{key}"));
        format!("Basic {encoded}")
    };
    let call = |auth: Option<&str>, method: &str, path: &str, body: Option<&Value>| {
        let agent = ureq::AgentBuilder::new().build();
        let mut req = agent.request(method, &format!("http://{}{path}", b.registry_addr()));
        if let Some(a) = auth {
            req = req.set("Authorization", a);
        }
        let sent = match body {
            Some(v) => req.send_json(v.clone()),
            None => req.call(),
        };
        let resp = match sent {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let status = resp.status();
        let challenge = resp.header("www-authenticate").map(String::from);
        let v: Value = serde_json::from_str(&resp.into_string().unwrap()).unwrap_or(Value::Null);
        (status, v["error_code"].as_i64().unwrap_or(0), v, challenge)
    };
    let mine = basic(&id, &key);
    let schema = json!({"schema": V1});
    let (s, _, v, _) = call(
        Some(&mine),
        "POST",
        "/subjects/orders-value/versions",
        Some(&schema),
    );
    assert_eq!(s, 200, "{v}");
    let admin_basic = format!("Bearer {admin}");
    let (s, _, _, _) = call(
        Some(&admin_basic),
        "POST",
        "/subjects/secret-value/versions",
        Some(&json!({"schema": OTHER})),
    );
    assert_eq!(s, 200);
    // No key, a wrong key: 401 40101 with the registry's challenge.
    let (s, c, _, challenge) = call(None, "GET", "/subjects", None);
    assert_eq!((s, c), (401, 40101));
    assert_eq!(challenge.as_deref(), Some("Basic realm=\"es-registry\""));
    let wrong = basic(&id, &format!("{}x", &key[..key.len() - 1]));
    assert_eq!(call(Some(&wrong), "GET", "/subjects", None).1, 40101);
    // A subject outside the grant: 403 40301, before it is looked up.
    assert_eq!(
        call(Some(&mine), "GET", "/subjects/secret-value/versions", None).1,
        40301
    );
    assert_eq!(
        call(Some(&mine), "GET", "/subjects/nothing-here/versions", None).1,
        40301
    );
    assert_eq!(
        call(
            Some(&mine),
            "POST",
            "/subjects/secret-value/versions",
            Some(&schema)
        )
        .1,
        40301
    );
    // By id: only through a subject the key may read.
    assert_eq!(call(Some(&mine), "GET", "/schemas/ids/1", None).0, 200);
    assert_eq!(call(Some(&mine), "GET", "/schemas/ids/2", None).1, 40301);
    // Lists show only what the key may see; global config is not its.
    assert_eq!(
        call(Some(&mine), "GET", "/subjects", None).2,
        json!(["orders-value"])
    );
    assert_eq!(
        call(
            Some(&mine),
            "PUT",
            "/config",
            Some(&json!({"compatibility": "NONE"}))
        )
        .1,
        40301
    );
    assert_eq!(
        call(Some(&mine), "PUT", "/mode", Some(&json!({"mode": "READONLY"}))).1,
        40301
    );
    // `_schemas` through the topic API: reads follow grants, writes and
    // deletes are an admin's even with a grant on every topic.
    let topic = |method: &str, path: &str, body: Option<&Value>| {
        auth_common::call(&b, method, path, &key, body).status
    };
    assert_eq!(
        topic("GET", "/v1/topics/_schemas/partitions/0/records", None),
        200
    );
    let garbage = json!({"records": [{"key": "k", "value": "v"}]});
    assert_eq!(topic("POST", "/v1/topics/_schemas/records", Some(&garbage)), 403);
    assert_eq!(topic("DELETE", "/v1/topics/_schemas", None), 403);
    assert_eq!(
        topic(
            "PATCH",
            "/v1/topics/_schemas/config",
            Some(&json!({"segment_ms": 60000}))
        ),
        403
    );
    assert_eq!(
        r_status(&b, &admin),
        200,
        "an admin may read what the registry wrote"
    );
}

fn r_status(b: &Broker, admin: &str) -> u16 {
    auth_common::call(b, "GET", "/v1/topics/_schemas", admin, None).status
}

/// Compaction of `_schemas` keeps the live state: with small segments and
/// a quick cleanup, every superseded record (the first versions of soft-
/// deleted subjects, a schema deleted for good) is compacted away, and
/// after a `kill -9` the registry is whole and its next id is past the
/// deleted one, the highest ever given: only the NOOP record remembers it.
#[test]
fn compaction_of_schemas_keeps_the_live_state_and_the_next_id() {
    let mut b = Broker::start_with(&["--segment-bytes", "65536", "--cleanup-interval-ms", "100"]);
    let r = registry(&b);
    let doc = "d".repeat(8 << 10);
    let schema = |i: usize| format!(r#"{{"type":"record","name":"R{i}","doc":"{doc}","fields":[]}}"#);
    assert_eq!(
        r.request("PUT", "/config", Some(br#"{"compatibility":"NONE"}"#))
            .0,
        200
    );
    for i in 1..=20 {
        assert_eq!(register(&r, &format!("s{}-value", i % 4), &schema(i)), i as u64);
    }
    assert_eq!(register(&r, "doomed-value", &schema(21)), 21);
    assert_eq!(r.delete("/subjects/doomed-value").0, 200);
    assert_eq!(r.delete("/subjects/doomed-value?permanent=true").0, 200);
    // Soft deletes rewrite every version (8 KiB each): the segments that
    // hold the first records close, and compaction drops those records.
    for s in 0..2 {
        assert_eq!(r.delete(&format!("/subjects/s{s}-value")).0, 200);
    }
    // Until no record of `_schemas` names id 21 (the tombstone names
    // none).
    common::wait_for("compaction to drop every record naming id 21", || {
        let (status, got) =
            b.get("/v1/topics/_schemas/partitions/0/records?offset=0&max_records=10000&max_bytes=16777216");
        assert_eq!(status, 200, "{got}");
        let records = got["records"].as_array().expect("records");
        !records
            .iter()
            .any(|r| r["value"].as_str().is_some_and(|v| v.contains(r#""id":21"#)))
    });
    b.kill9();
    b.restart();
    let r = registry(&b);
    assert_eq!(r.get("/subjects").1, json!(["s2-value", "s3-value"]));
    for s in 0..4 {
        let versions = r.get(&format!("/subjects/s{s}-value/versions?deleted=true")).1;
        assert_eq!(versions.as_array().map(Vec::len), Some(5), "s{s}: {versions}");
    }
    assert_eq!(code(&r.get("/schemas/ids/21")), (404, 40403));
    assert_eq!(r.get("/schemas/ids/20").1["schema"], schema(20));
    assert_eq!(r.get("/config").1["compatibilityLevel"], "NONE");
    assert_eq!(
        register(&r, "after-value", r#""string""#),
        22,
        "id 21 is never given again"
    );
}
