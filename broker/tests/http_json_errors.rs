//! JSON bodies that are not well-formed are `bad_json`, whatever the
//! endpoint: invalid UTF-8 (in a field the body needs, or past a field of
//! the wrong type) and nesting deeper than the parser's limit of 128, as
//! docs/api.md's error table says; well-formed JSON of the wrong shape
//! stays `invalid_request`. Nothing is created or written.

mod common;

use common::{assert_error, create_topic, Broker};
use serde_json::json;

#[test]
fn invalid_utf8_and_deep_nesting_are_bad_json() {
    let b = Broker::start(1);
    create_topic(&b, "t", 1);
    let config = b.get("/v1/topics/t").1["config"].clone();
    let deep = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));

    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("/v1/topics", b"{\"name\":\"a\xff\",\"partitions\":1}".to_vec()),
        // A shape error first, invalid UTF-8 after it.
        ("/v1/topics", b"{\"name\":1,\"partitions\":\"\xc3\x28\"}".to_vec()),
        (
            "/v1/topics",
            format!("{{\"name\":\"n\",\"partitions\":{}}}", deep(5000)).into_bytes(),
        ),
        (
            "/v1/topics/t/records",
            b"{\"records\":[{\"value\":\"\xfe\xff\"}]}".to_vec(),
        ),
        (
            "/v1/topics/t/records",
            format!("{{\"records\":{}}}", deep(200)).into_bytes(),
        ),
        // Free-form bodies (parsed as any JSON value).
        (
            "/v1/groups/g/commits",
            b"{\"offsets\":[],\"x\":\"\xff\"}".to_vec(),
        ),
        (
            "/v1/groups/g/commits",
            format!("{{\"offsets\":{}}}", deep(200)).into_bytes(),
        ),
        (
            "/v1/producers",
            format!("{{\"producer_id\":{}}}", deep(200)).into_bytes(),
        ),
    ];
    for (path, body) in &bad {
        let got = b.post_bytes(path, body);
        assert_error(&got, 400, "bad_json");
    }
    let got = b.patch_raw(
        "/v1/topics/t/config",
        &format!("{{\"retention_ms\":{}}}", deep(300)),
    );
    assert_error(&got, 400, "bad_json");
    let got = b.request(
        "PATCH",
        "/v1/topics/t/config",
        Some(b"{\"retention_ms\":\"\xff\"}"),
    );
    assert_error(&got, 400, "bad_json");
    let got = b.patch_raw(
        "/v1/topics/t/config",
        "{\"retention_ms\":1000,\"x\":\"\u{fffd}\"}",
    );
    assert_error(&got, 400, "invalid_request");

    // Well-formed, wrong shape: invalid_request, nested ones included.
    let got = b.post("/v1/topics", json!({"name": 1, "partitions": 1}));
    assert_error(&got, 400, "invalid_request");
    let got = b.post_raw(
        "/v1/topics",
        &format!("{{\"name\":\"n\",\"partitions\":{}}}", deep(100)),
    );
    assert_error(&got, 400, "invalid_request");

    // Nothing was created or written.
    let (_, topics) = b.get("/v1/topics");
    assert_eq!(topics["topics"], json!([{"name": "t", "partitions": 1}]));
    let (_, desc) = b.get("/v1/topics/t");
    assert_eq!(desc["partitions"][0]["high_watermark"], 0);
    assert_eq!(desc["config"], config, "the config is as it was");
    let (status, _) = b.get("/v1/groups/g");
    assert_eq!(status, 404, "no group was made");
}
