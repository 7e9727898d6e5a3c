//! Idempotent producers against the real broker: a retried batch (same
//! producer id, epoch and sequence) is stored once and answered with its
//! original offsets, before and after kill -9; a gap is refused; a new epoch
//! fences the old one.

mod common;

use common::Broker;
use serde_json::{json, Value};

fn produce(b: &Broker, id: i64, epoch: i64, seq: i64, values: &[&str]) -> (u16, Value) {
    let records: Vec<Value> = values
        .iter()
        .map(|v| json!({"value": v, "partition": 1}))
        .collect();
    b.post(
        "/v1/topics/idem/records",
        json!({"records": records, "producer_id": id, "epoch": epoch, "sequence": seq}),
    )
}

fn values(b: &Broker) -> Vec<String> {
    let (_, v) = b.get("/v1/topics/idem/partitions/1/records?offset=0");
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn retries_are_written_once_across_kill9_and_epochs_fence() {
    let mut b = Broker::start(2);
    assert_eq!(
        b.post("/v1/topics", json!({"name": "idem", "partitions": 2})).0,
        201
    );
    let (status, p) = b.post("/v1/producers", json!({}));
    assert_eq!(status, 200);
    let id = p["producer_id"].as_i64().unwrap();
    assert_eq!(p["epoch"], 0);
    let (_, other) = b.post("/v1/producers", json!({}));
    assert_ne!(other["producer_id"], p["producer_id"], "ids are unique");

    let (status, first) = produce(&b, id, 0, 0, &["a", "b"]);
    assert_eq!(status, 200, "{first}");
    let (status, retry) = produce(&b, id, 0, 0, &["a", "b"]);
    assert_eq!(status, 200);
    assert_eq!(retry, first, "a retry gets the original offsets");
    assert_eq!(values(&b), vec!["a", "b"]);
    let (status, gap) = produce(&b, id, 0, 5, &["c"]);
    assert_eq!(status, 409);
    assert_eq!(gap["error"]["code"], "out_of_order_sequence");
    let (status, mixed) = b.post(
        "/v1/topics/idem/records",
        json!({"records": [{"value": "x", "partition": 0}, {"value": "y", "partition": 1}], "producer_id": id, "epoch": 0, "sequence": 2}),
    );
    assert_eq!(status, 400, "{mixed}");

    // kill -9, then the same retry: still written once.
    b.kill9();
    b.restart();
    let (status, after) = produce(&b, id, 0, 0, &["a", "b"]);
    assert_eq!(status, 200, "{after}");
    assert_eq!(after, first);
    let (status, next) = produce(&b, id, 0, 2, &["c"]);
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["offsets"][0]["offset"], 2);
    assert_eq!(values(&b), vec!["a", "b", "c"]);

    // A clean restart (snapshot path) keeps the window too.
    assert!(b.sigterm_and_wait().success());
    b.restart();
    assert_eq!(produce(&b, id, 0, 2, &["c"]).1, next);

    // A new epoch fences the old instance everywhere, even before it writes.
    let (status, bumped) = b.post("/v1/producers", json!({"producer_id": id}));
    assert_eq!(status, 200);
    assert_eq!(bumped["epoch"], 1);
    let (status, fenced) = produce(&b, id, 0, 3, &["zombie"]);
    assert_eq!(status, 409);
    assert_eq!(fenced["error"]["code"], "producer_fenced");
    let (status, _) = produce(&b, id, 1, 0, &["d"]);
    assert_eq!(status, 200);
    assert_eq!(values(&b), vec!["a", "b", "c", "d"]);
    let (status, unknown) = b.post("/v1/producers", json!({"producer_id": 999}));
    assert_eq!(status, 404, "{unknown}");
    let (status, invented) = produce(&b, 999, 0, 0, &["x"]);
    assert_eq!(status, 404, "{invented}");
    assert_eq!(invented["error"]["code"], "unknown_producer_id");
    let (status, future) = produce(&b, id, 5, 0, &["x"]);
    assert_eq!(status, 400, "an epoch never issued: {future}");
    let (status, keyless) = b.post(
        "/v1/topics/idem/records",
        json!({"records": [{"value": "k"}], "producer_id": id, "epoch": 1, "sequence": 1}),
    );
    assert_eq!(
        status, 400,
        "an idempotent record needs a partition or a key: {keyless}"
    );
    assert_eq!(
        values(&b),
        vec!["a", "b", "c", "d"],
        "nothing refused was written"
    );
}
