//! Topic administration over HTTP.
//!
//! Contract proven here (docs/api.md, "Topics"):
//! - `POST /v1/topics` creates a topic (201) and echoes name, partitions,
//!   replication factor and the full config (every key, `segment_ms` null when
//!   unset; `segment_bytes` defaults to `--segment-bytes`); a second create of
//!   the same name is 409 `topic_exists` and changes nothing.
//! - `GET /v1/topics` lists `{name, partitions}` sorted by name.
//! - `GET /v1/topics/{t}` describes every partition: log start offset, hot
//!   and cold start offsets, high watermark, leader 1, replicas `[1]`.
//! - `PATCH /v1/topics/{t}/config` changes only the given keys (`null` clears
//!   `segment_ms`) and answers like describe; an unknown key is
//!   `invalid_request` and changes nothing.
//! - `DELETE /v1/topics/{t}` answers `{"name","deleted":true}`; afterwards the
//!   topic is 404 `topic_not_found` everywhere and the name can be created
//!   again, empty. Its directory is gone when the answer comes; its files
//!   are freed in the background from `<data-dir>/trash/`, and a restart
//!   removes whatever the trash still holds.
//! - Names are 1-249 characters of `[A-Za-z0-9._-]` and not `.` or `..`; any
//!   other is 400 `invalid_topic_name`. Partitions must be 1..=1024,
//!   replication factor 1; config values are checked (the cleanup keys in
//!   detail in http_cleanup.rs). Bad input is a 400 that creates nothing.
//! - `--partitions-max` bounds every topic's partitions together: a create
//!   past it is 409 `too_many_partitions` and creates nothing.
//! - Every error is `{"error":{"code","message"}}` with the documented status.

mod common;

use common::*;
use serde_json::{json, Value};

/// The full config a topic reports: these two keys as given, every other
/// key at its default.
fn cfg(segment_bytes: Value, segment_ms: Value) -> Value {
    json!({
        "segment_bytes": segment_bytes,
        "segment_ms": segment_ms,
        "cleanup_policy": "delete",
        "retention_ms": null,
        "retention_bytes": null,
        "delete_retention_ms": 86400000,
        "tiered": false,
        "cold_retention_ms": null,
        "cold_retention_bytes": null
    })
}

fn topic_list(b: &Broker) -> Value {
    let (status, body) = b.get("/v1/topics");
    assert_eq!(status, 200, "GET /v1/topics: {body}");
    body
}

#[test]
fn topic_lifecycle_create_list_describe_patch_delete_recreate() {
    let b = Broker::start(2);

    assert_eq!(topic_list(&b), json!({ "topics": [] }));

    // Create with every field.
    let got = b.post(
        "/v1/topics",
        json!({
            "name": "orders",
            "partitions": 3,
            "replication_factor": 1,
            "config": { "segment_bytes": 1048576, "segment_ms": 600000 }
        }),
    );
    assert_eq!(got.0, 201, "create orders: {}", got.1);
    assert_eq!(
        got.1,
        json!({
            "name": "orders",
            "partitions": 3,
            "replication_factor": 1,
            "config": cfg(json!(1048576), json!(600000))
        })
    );

    // Create with the minimum: replication factor 1 and the default config.
    let got = b.post("/v1/topics", json!({ "name": "alpha", "partitions": 1 }));
    assert_eq!(got.0, 201, "create alpha: {}", got.1);
    assert_eq!(
        got.1,
        json!({
            "name": "alpha",
            "partitions": 1,
            "replication_factor": 1,
            "config": cfg(json!(1073741824u64), json!(null))
        })
    );

    // Listed, sorted by name.
    assert_eq!(
        topic_list(&b),
        json!({ "topics": [ { "name": "alpha", "partitions": 1 }, { "name": "orders", "partitions": 3 } ] })
    );

    // Described: every partition empty, led by node 1.
    let empty_partitions: Vec<Value> = (0..3)
        .map(|p| {
            json!({ "partition": p, "log_start_offset": 0, "hot_start_offset": 0, "cold_start_offset": null,
                    "high_watermark": 0, "leader": 1, "replicas": [1] })
        })
        .collect();
    assert_eq!(
        describe(&b, "orders"),
        json!({
            "name": "orders",
            "replication_factor": 1,
            "config": cfg(json!(1048576), json!(600000)),
            "partitions": empty_partitions
        })
    );

    // Two records on partition 1 move its high watermark only.
    produce_values(&b, "orders", 1, &["a".to_string(), "b".to_string()]);
    assert_eq!(high_watermarks(&b, "orders"), vec![0, 2, 0]);

    // A second create of the same name: 409, nothing changes.
    let got = b.post("/v1/topics", json!({ "name": "orders", "partitions": 5 }));
    assert_error(&got, 409, "topic_exists");
    assert_eq!(high_watermarks(&b, "orders"), vec![0, 2, 0]);
    assert_eq!(
        describe(&b, "orders")["config"],
        json!(cfg(json!(1048576), json!(600000)))
    );

    // PATCH changes only the given key and answers like describe.
    let got = b.patch("/v1/topics/orders/config", json!({ "segment_bytes": 2097152 }));
    assert_eq!(got.0, 200, "patch: {}", got.1);
    assert_eq!(got.1["name"], "orders");
    assert_eq!(got.1["replication_factor"], 1);
    assert_eq!(got.1["config"], json!(cfg(json!(2097152), json!(600000))));
    assert_eq!(got.1["partitions"].as_array().map(Vec::len), Some(3), "{}", got.1);
    assert_eq!(got.1["partitions"][1]["high_watermark"], 2, "{}", got.1);
    assert_eq!(
        describe(&b, "orders")["config"],
        json!(cfg(json!(2097152), json!(600000)))
    );

    // `null` clears segment_ms.
    let got = b.patch("/v1/topics/orders/config", json!({ "segment_ms": null }));
    assert_eq!(got.0, 200, "patch: {}", got.1);
    assert_eq!(got.1["config"], json!(cfg(json!(2097152), json!(null))));

    // Both keys at once.
    let got = b.patch(
        "/v1/topics/orders/config",
        json!({ "segment_bytes": 4194304, "segment_ms": 60000 }),
    );
    assert_eq!(got.0, 200, "patch: {}", got.1);
    assert_eq!(got.1["config"], json!(cfg(json!(4194304), json!(60000))));

    // Bad patches change nothing.
    for bad in [
        json!({ "max_message_bytes": 1000 }),
        json!({ "retention_ms": 0 }),
        json!({ "cleanup_policy": "shred" }),
        json!({ "tiered": "yes" }),
        json!({ "segment_bytes": 2097152, "bogus": true }),
        json!({ "segment_bytes": 0 }),
        json!({ "segment_bytes": -1 }),
        json!({ "segment_ms": 0 }),
        json!({ "segment_ms": -5 }),
    ] {
        let got = b.patch("/v1/topics/orders/config", bad.clone());
        assert_error(&got, 400, "invalid_request");
        assert_eq!(
            describe(&b, "orders")["config"],
            json!(cfg(json!(4194304), json!(60000))),
            "after the refused patch {bad}"
        );
    }
    let got = b.patch_raw("/v1/topics/orders/config", "{\"segment_bytes\":");
    assert_error(&got, 400, "bad_json");
    let got = b.patch("/v1/topics/nope/config", json!({ "segment_bytes": 2097152 }));
    assert_error(&got, 404, "topic_not_found");

    // Delete.
    let got = b.delete("/v1/topics/orders");
    assert_eq!(got.0, 200, "delete: {}", got.1);
    assert_eq!(got.1, json!({ "name": "orders", "deleted": true }));
    assert_eq!(
        topic_list(&b),
        json!({ "topics": [ { "name": "alpha", "partitions": 1 } ] })
    );
    assert_error(&b.get("/v1/topics/orders"), 404, "topic_not_found");
    assert_error(&b.delete("/v1/topics/orders"), 404, "topic_not_found");
    assert_error(&fetch(&b, "orders", 1, "offset=0"), 404, "topic_not_found");
    assert_error(
        &b.post(
            "/v1/topics/orders/records",
            json!({ "records": [ { "value": "x" } ] }),
        ),
        404,
        "topic_not_found",
    );
    assert_error(
        &b.patch("/v1/topics/orders/config", json!({ "segment_bytes": 2097152 })),
        404,
        "topic_not_found",
    );

    // Recreated under the same name: a new, empty topic.
    let got = b.post("/v1/topics", json!({ "name": "orders", "partitions": 2 }));
    assert_eq!(got.0, 201, "recreate: {}", got.1);
    assert_eq!(got.1["partitions"], 2);
    assert_eq!(got.1["config"], json!(cfg(json!(1073741824u64), json!(null))));
    assert_eq!(high_watermarks(&b, "orders"), vec![0, 0]);
    let (status, body) = fetch(&b, "orders", 1, "offset=0");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({ "records": [], "next_offset": 0, "high_watermark": 0 })
    );
    assert_error(&fetch(&b, "orders", 2, "offset=0"), 404, "partition_not_found");
    assert_eq!(
        topic_list(&b),
        json!({ "topics": [ { "name": "alpha", "partitions": 1 }, { "name": "orders", "partitions": 2 } ] })
    );

    // The new incarnation takes records from offset 0.
    assert_eq!(produce_values(&b, "orders", 1, &["fresh".to_string()]), vec![0]);
    assert_eq!(values_of(&b, "orders", 1), vec!["fresh".to_string()]);
}

#[test]
fn bad_topic_names_are_refused_and_create_nothing() {
    let b = Broker::start(1);

    let long_250 = "a".repeat(250);
    for name in [
        ".",
        "..",
        "a/b",
        "/",
        "../etc",
        long_250.as_str(),
        "",
        "has space",
        "tab\there",
        "naïve",
        "a\\b",
        "a:b",
        "a*",
        "a\u{0}b",
        "\u{1F680}",
    ] {
        let got = b.post("/v1/topics", json!({ "name": name, "partitions": 1 }));
        assert_error(&got, 400, "invalid_topic_name");
    }
    assert_eq!(
        topic_list(&b),
        json!({ "topics": [] }),
        "a refused name must create nothing"
    );
    assert!(
        !b.data_dir().join("topics").join("a").exists(),
        "\"a/b\" must not create a directory"
    );

    // The edges of the rule are accepted.
    let long_249 = "b".repeat(249);
    for name in [long_249.as_str(), "A-Za-z0-9._-", "...", ".hidden", "x", "_", "-"] {
        let got = b.post("/v1/topics", json!({ "name": name, "partitions": 1 }));
        assert_eq!(got.0, 201, "a valid name {name:?} was refused: {}", got.1);
        assert_eq!(got.1["name"], name);
    }
    let names: Vec<String> = topic_list(&b)["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "GET /v1/topics must be sorted by name");
    assert_eq!(names.len(), 7);
    assert_eq!(high_watermarks(&b, &long_249), vec![0]);
}

#[test]
fn partition_count_replication_and_config_are_validated() {
    let b = Broker::start(1);

    for body in [
        json!({ "name": "t", "partitions": 0 }),
        json!({ "name": "t", "partitions": -1 }),
        json!({ "name": "t", "partitions": 1025 }),
        json!({ "name": "t" }),
        json!({ "partitions": 1 }),
        json!({ "name": "t", "partitions": 1, "replication_factor": 2 }),
        json!({ "name": "t", "partitions": 1, "replication_factor": 0 }),
        json!({ "name": "t", "partitions": 1, "replication_factor": -1 }),
        json!({ "name": "t", "partitions": 1, "config": { "max_message_bytes": 1000 } }),
        json!({ "name": "t", "partitions": 1, "config": { "retention_bytes": 0 } }),
        json!({ "name": "t", "partitions": 1, "config": { "tiered": true, "cleanup_policy": "compact" } }),
        json!({ "name": "t", "partitions": 1, "config": { "segment_bytes": 0 } }),
        json!({ "name": "t", "partitions": 1, "config": { "segment_bytes": -1 } }),
        json!({ "name": "t", "partitions": 1, "config": { "segment_ms": 0 } }),
        json!({ "name": "t", "partitions": 1, "config": { "segment_ms": -1 } }),
    ] {
        let got = b.post("/v1/topics", body.clone());
        assert_error(&got, 400, "invalid_request");
    }
    // Wrong JSON types: a 400 either way.
    for body in [
        json!({ "name": "t", "partitions": "3" }),
        json!({ "name": "t", "partitions": 1.5 }),
        json!({ "name": 7, "partitions": 1 }),
        json!({ "name": null, "partitions": 1 }),
        json!({ "name": "t", "partitions": 1, "config": "big" }),
        json!(["t", 1]),
    ] {
        let got = b.post("/v1/topics", body.clone());
        assert_400_one_of(&got, &["bad_json", "invalid_request"]);
    }
    // Malformed JSON.
    for raw in [
        "",
        "{",
        "{\"name\":\"t\",\"partitions\":1",
        "name=t&partitions=1",
        "{\"name\":\"t\",}",
    ] {
        let got = b.post_raw("/v1/topics", raw);
        assert_error(&got, 400, "bad_json");
    }
    assert_eq!(
        topic_list(&b),
        json!({ "topics": [] }),
        "refused creates must create nothing"
    );

    // The accepted edges.
    let got = b.post(
        "/v1/topics",
        json!({ "name": "one", "partitions": 1, "replication_factor": 1 }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "many", "partitions": 64, "config": {} }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    assert_eq!(got.1["config"], json!(cfg(json!(1073741824u64), json!(null))));
    assert_eq!(high_watermarks(&b, "many"), vec![0; 64]);
}

#[test]
fn segment_bytes_flag_sets_the_default_for_new_topics() {
    let b = Broker::start_with(&["--segment-bytes", "65536", "--shards", "1"]);
    let got = b.post("/v1/topics", json!({ "name": "small", "partitions": 1 }));
    assert_eq!(got.0, 201, "{}", got.1);
    assert_eq!(got.1["config"], json!(cfg(json!(65536), json!(null))));
    let got = b.post(
        "/v1/topics",
        json!({ "name": "explicit", "partitions": 1, "config": { "segment_bytes": 1048576 } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    assert_eq!(got.1["config"], json!(cfg(json!(1048576), json!(null))));
}

#[test]
fn unknown_topics_and_partitions_are_404() {
    let b = Broker::start(2);
    assert_error(&b.get("/v1/topics/ghost"), 404, "topic_not_found");
    assert_error(&b.delete("/v1/topics/ghost"), 404, "topic_not_found");
    assert_error(&fetch(&b, "ghost", 0, ""), 404, "topic_not_found");

    create_topic(&b, "real", 2);
    assert_error(&fetch(&b, "real", 2, "offset=0"), 404, "partition_not_found");
    assert_error(&fetch(&b, "real", 1000, ""), 404, "partition_not_found");
    assert_error(
        &b.post(
            "/v1/topics/real/records",
            json!({ "records": [ { "value": "x", "partition": 2 } ] }),
        ),
        404,
        "partition_not_found",
    );
    assert_eq!(high_watermarks(&b, "real"), vec![0, 0]);
}

#[test]
fn data_layout_follows_the_documented_paths() {
    let b = Broker::start(2);
    create_topic(&b, "layout", 2);
    produce_values(&b, "layout", 0, &["x".to_string()]);
    produce_values(&b, "layout", 1, &["y".to_string()]);
    let topic_dir = b.data_dir().join("topics").join("layout");
    assert!(
        topic_dir.join("meta.json").is_file(),
        "no {:?}",
        topic_dir.join("meta.json")
    );
    for p in 0..2 {
        let seg = last_segment(&b.partition_dir("layout", p));
        assert_eq!(
            seg.file_name().and_then(|n| n.to_str()),
            Some("00000000000000000000.log")
        );
    }
}

fn trash_entries(b: &Broker) -> usize {
    match std::fs::read_dir(b.data_dir().join("trash")) {
        Ok(entries) => entries.count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => panic!("listing the trash: {e}"),
    }
}

#[test]
fn a_deleted_topic_is_freed_in_the_background_and_a_restart_empties_the_trash() {
    let mut b = Broker::start(2);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "big", "partitions": 2, "config": { "segment_bytes": 8388608 } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    // ~3 MiB per partition: segments larger than one freeing step.
    let value = "v".repeat(256 << 10);
    for p in 0..2 {
        for _ in 0..12 {
            let got = b.post(
                "/v1/topics/big/records",
                json!({ "records": [ { "value": value, "partition": p } ] }),
            );
            assert_eq!(got.0, 200, "{}", got.1);
        }
    }
    let got = b.delete("/v1/topics/big");
    assert_eq!(got.0, 200, "{}", got.1);
    assert!(
        !b.data_dir().join("topics").join("big").exists(),
        "the topic's directory is gone"
    );
    wait_for("the trash to be freed", || trash_entries(&b) == 0);
    // The name is free: created again, empty.
    let got = b.post("/v1/topics", json!({ "name": "big", "partitions": 2 }));
    assert_eq!(got.0, 201, "{}", got.1);
    assert_eq!(high_watermarks(&b, "big"), vec![0, 0]);

    // What a crash left in the trash goes at the next start; topics stay.
    produce_values(&b, "big", 1, &["kept".to_string()]);
    b.kill9();
    let left = b.data_dir().join("trash").join("1-0-0");
    std::fs::create_dir_all(&left).unwrap();
    std::fs::write(left.join("00000000000000000000.log"), vec![1u8; 1 << 20]).unwrap();
    b.restart();
    assert_eq!(trash_entries(&b), 0, "the restart emptied the trash");
    assert_eq!(high_watermarks(&b, "big"), vec![0, 1]);
}

/// `--partitions-max` counts every topic's partitions: a create that would
/// pass it is 409 `too_many_partitions` and leaves nothing behind (not
/// listed, no directory, the name free); one that fits is created; a
/// delete makes room again; a restart keeps counting the same way.
#[test]
fn partitions_max_refuses_a_create_that_would_pass_it() {
    let mut b = Broker::start_with(&["--partitions-max", "10"]);
    create_topic(&b, "six", 6);
    let got = b.post("/v1/topics", json!({ "name": "five", "partitions": 5 }));
    assert_error(&got, 409, "too_many_partitions");
    let message = got.1["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--partitions-max"), "{message}");
    assert_eq!(
        topic_list(&b),
        json!({ "topics": [ { "name": "six", "partitions": 6 } ] })
    );
    assert!(
        !b.data_dir().join("topics").join("five").exists(),
        "a refused create left its directory"
    );
    assert_error(&b.get("/v1/topics/five"), 404, "topic_not_found");

    create_topic(&b, "four", 4);
    assert_error(
        &b.post("/v1/topics", json!({ "name": "one", "partitions": 1 })),
        409,
        "too_many_partitions",
    );

    assert!(b.sigterm_and_wait().success());
    b.restart();
    assert_error(
        &b.post("/v1/topics", json!({ "name": "one", "partitions": 1 })),
        409,
        "too_many_partitions",
    );
    let (status, body) = b.delete("/v1/topics/six");
    assert_eq!(status, 200, "{body}");
    create_topic(&b, "five", 5);
    produce_values(&b, "five", 4, &["x".to_string()]);
    assert_eq!(high_watermarks(&b, "five"), vec![0, 0, 0, 0, 1]);
}
