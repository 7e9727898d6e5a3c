//! Producer state snapshots on segment roll, against the real broker
//! (docs/groups.md, "State rebuilt at start").
//!
//! Contract: each segment roll snapshots the partition's producer state, so
//! after a kill -9 the next start reads only the batches after the last
//! snapshot (`es_recovery_producer_batches_scanned_total`), never every
//! batch written since the previous start; and the state it rebuilds is
//! the same: retries of the last batches, in sealed segments and in the
//! active one, are answered with their original offsets, an older retry is
//! `duplicate_sequence`, and the next sequence is appended.

mod common;

use common::{values_of, wait_for, Broker};
use serde_json::{json, Value};

const TOPIC: &str = "snap";
/// Small segments (the least a topic may have had while these were
/// written), so that a few dozen batches roll several.
const SEGMENT_BYTES: u64 = 65_536;
/// One record of this many bytes per batch: about 16 batches a segment.
const VALUE_BYTES: usize = 4_000;
const BATCHES: i64 = 60;

fn value(seq: i64) -> String {
    format!("{seq:04}-{}", "v".repeat(VALUE_BYTES))
}

fn produce(b: &Broker, id: i64, seq: i64) -> (u16, Value) {
    b.post(
        &format!("/v1/topics/{TOPIC}/records"),
        json!({"records": [{"value": value(seq), "partition": 0}],
               "producer_id": id, "epoch": 0, "sequence": seq}),
    )
}

/// Base offsets of the partition's segments, from its file names.
fn segment_bases(b: &Broker) -> Vec<u64> {
    let mut bases: Vec<u64> = std::fs::read_dir(b.partition_dir(TOPIC, 0))
        .expect("list the partition")
        .filter_map(|e| {
            let name = e.expect("entry").file_name().into_string().ok()?;
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort();
    bases
}

/// The offset the partition's producer snapshot covers.
fn snapshot_offset(b: &Broker) -> Option<u64> {
    let path = b.data_dir().join("producers").join(TOPIC).join("0.json");
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice::<Value>(&bytes).ok()?["offset"].as_u64()
}

#[test]
fn after_kill9_only_the_batches_since_the_last_roll_are_read_and_the_window_holds() {
    let mut b = Broker::start(2);
    let (status, body) = b.post(
        "/v1/topics",
        json!({"name": TOPIC, "partitions": 1, "config": {"segment_bytes": SEGMENT_BYTES}}),
    );
    assert_eq!(status, 201, "{body}");
    let (_, p) = b.post("/v1/producers", json!({}));
    let id = p["producer_id"].as_i64().expect("producer_id");
    for seq in 0..BATCHES {
        let (status, body) = produce(&b, id, seq);
        assert_eq!(status, 200, "seq {seq}: {body}");
        assert_eq!(body["offsets"][0]["offset"], seq, "one record a batch: {body}");
    }
    let bases = segment_bases(&b);
    assert!(bases.len() >= 3, "the batches rolled segments: {bases:?}");
    let last_base = *bases.last().expect("a segment");
    // The last roll's snapshot is written once the batch that rolled is
    // durable, in a task of its own: wait for it rather than race it.
    wait_for("the snapshot of the last roll", || {
        snapshot_offset(&b).is_some_and(|o| o > last_base)
    });
    let covered = snapshot_offset(&b).expect("a snapshot");

    b.kill9();
    b.restart();
    let scanned = b
        .metric("es_recovery_producer_batches_scanned_total")
        .expect("the scan is counted");
    assert_eq!(
        scanned,
        (BATCHES as u64 - covered) as f64,
        "start-up read the batches after the snapshot at {covered}, no more"
    );
    assert!(
        scanned < (BATCHES as u64 - last_base) as f64 + 1.0,
        "at most the active segment's batches were read ({scanned}), not the {BATCHES} since the start"
    );

    // The window of the last five batches spans the snapshot and the scan.
    for seq in BATCHES - 5..BATCHES {
        let (status, body) = produce(&b, id, seq);
        assert_eq!(status, 200, "retry of seq {seq}: {body}");
        assert_eq!(body["offsets"][0]["offset"], seq, "the original offset: {body}");
    }
    let (status, body) = produce(&b, id, BATCHES - 6);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "duplicate_sequence", "{body}");
    let (status, body) = produce(&b, id, BATCHES);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["offsets"][0]["offset"], BATCHES,
        "the sequence continues: {body}"
    );
    let values = values_of(&b, TOPIC, 0);
    let want: Vec<String> = (0..=BATCHES).map(value).collect();
    assert_eq!(values.len(), want.len(), "each batch written once");
    assert!(
        values == want,
        "the partition reads back every batch once, in order"
    );

    // A clean stop leaves nothing to read.
    assert!(b.sigterm_and_wait().success());
    b.restart();
    assert_eq!(b.metric("es_recovery_producer_batches_scanned_total"), Some(0.0));
    let (status, body) = produce(&b, id, BATCHES);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["offsets"][0]["offset"], BATCHES, "still a duplicate: {body}");
}
