//! Idempotent produce on a 3-node cluster of real brokers: a producer id
//! issued through a follower is known at the partition's leader; a retried
//! batch (same id, epoch, sequence) is answered with its first offsets and
//! stored once — also when the retry goes to a new leader after the old
//! one was killed with -9, on every replica once the old leader rejoins; a
//! gap in the sequence, an id never issued and a fenced epoch are refused
//! with the standalone broker's codes, and write nothing.

mod cluster;
mod common;

use common::{wait_for, Broker, Client};
use serde_json::{json, Value};

const TOPIC: &str = "idem";

fn produce(c: &Client, id: i64, epoch: i64, seq: i64, values: &[&str]) -> (u16, Value) {
    let records: Vec<Value> = values
        .iter()
        .map(|v| json!({"value": v, "partition": 0}))
        .collect();
    c.try_post(
        &format!("/v1/topics/{TOPIC}/records"),
        &json!({"records": records, "producer_id": id, "epoch": epoch, "sequence": seq}),
    )
    .unwrap_or((0, Value::Null))
}

/// Sends the batch to whichever running node leads the partition until one
/// answers other than "not the leader now" (421, 503, no answer).
fn produce_at_leader(
    nodes: &[Option<&Broker>],
    id: i64,
    epoch: i64,
    seq: i64,
    values: &[&str],
) -> (u16, Value) {
    let mut answer = (0, Value::Null);
    wait_for(&format!("sequence {seq} answered by a leader"), || {
        let leader = cluster::wait_leader(nodes, TOPIC, 0);
        let b = nodes[leader as usize - 1].expect("the leader runs");
        answer = produce(b, id, epoch, seq, values);
        eprintln!("sequence {seq} at node {leader}: {} {}", answer.0, answer.1);
        !matches!(answer.0, 0 | 421 | 503)
    });
    answer
}

fn values_of(b: &Client) -> Option<Vec<String>> {
    cluster::records(b, TOPIC, 0).map(|l| l.into_iter().map(|(_, v)| v).collect())
}

#[test]
fn a_retry_across_a_leader_failover_is_written_once() {
    let mut nodes = cluster::start(3);
    let (status, body) = cluster::create(&nodes[0], TOPIC, 1, Some(3));
    assert_eq!(status, 201, "{body}");
    let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
    let leader = cluster::wait_leader(&running, TOPIC, 0);
    let l = leader as usize - 1;
    let follower = (l + 1) % 3;

    // An id issued through a follower (forwarded to the controller's
    // leader); ids are unique.
    let (status, p) = nodes[follower].post("/v1/producers", json!({}));
    assert_eq!(status, 200, "{p}");
    let id = p["producer_id"].as_i64().unwrap();
    assert_eq!(p["epoch"], 0);
    let (status, other) = nodes[l].post("/v1/producers", json!({}));
    assert_eq!(status, 200, "{other}");
    assert_ne!(other["producer_id"], p["producer_id"], "ids are unique");

    let (status, first) = produce_at_leader(&running, id, 0, 0, &["a", "b"]);
    assert_eq!(status, 200, "{first}");
    let (status, retry) = produce_at_leader(&running, id, 0, 0, &["a", "b"]);
    assert_eq!(status, 200, "{retry}");
    assert_eq!(retry, first, "a retry gets the first write's offsets");
    let (status, gap) = produce_at_leader(&running, id, 0, 5, &["gap"]);
    assert_eq!(status, 409, "{gap}");
    assert_eq!(gap["error"]["code"], "out_of_order_sequence");
    let (status, invented) = produce_at_leader(&running, 999, 0, 0, &["x"]);
    assert_eq!(status, 404, "{invented}");
    assert_eq!(invented["error"]["code"], "unknown_producer_id");

    // The leader goes with kill -9; the retry goes to the new one.
    nodes[l].kill9();
    let survivors: Vec<Option<&Broker>> = nodes
        .iter()
        .enumerate()
        .map(|(i, b)| (i != l).then_some(b))
        .collect();
    let (status, after) = produce_at_leader(&survivors, id, 0, 0, &["a", "b"]);
    assert_eq!(status, 200, "{after}");
    assert_eq!(
        after, first,
        "the new leader answers the retry from the replicated window"
    );
    let (status, next) = produce_at_leader(&survivors, id, 0, 2, &["c"]);
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["offsets"][0]["offset"], 2, "{next}");

    // A new epoch, issued through any node, fences the old one.
    let (status, bumped) = nodes[follower].post("/v1/producers", json!({"producer_id": id}));
    assert_eq!(status, 200, "{bumped}");
    assert_eq!(bumped["epoch"], 1);
    let (status, fenced) = produce_at_leader(&survivors, id, 0, 3, &["zombie"]);
    assert_eq!(status, 409, "{fenced}");
    assert_eq!(fenced["error"]["code"], "producer_fenced");
    let (status, d) = produce_at_leader(&survivors, id, 1, 0, &["d"]);
    assert_eq!(status, 200, "{d}");

    // The old leader rejoins: every replica holds each batch once.
    nodes[l].restart();
    let want = vec!["a", "b", "c", "d"];
    for (i, b) in nodes.iter().enumerate() {
        let mut seen = Vec::new();
        wait_for(
            &format!("node {} to serve the 4 records", i + 1),
            || match values_of(b) {
                Some(v) if v.len() >= want.len() => {
                    seen = v;
                    true
                }
                _ => false,
            },
        );
        assert_eq!(seen, want, "node {}: each batch once, nothing refused", i + 1);
    }
}
