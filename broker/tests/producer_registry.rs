//! The producer id registry (`<data-dir>/producers/registry.json`) lost or
//! damaged, against the real broker.
//!
//! Contract: a producer id is never issued twice, even when the registry is
//! deleted, truncated or garbled after a clean stop or a kill -9. The next
//! id comes from what the partitions' producer state knows, so a new
//! producer's first batches are written (and read back), never answered as
//! retries of an earlier producer's batches. A damaged registry is kept
//! aside (`registry.json.damaged-<ms>`, byte for byte) and said at error
//! level, never silently replaced. Producers holding an id from the lost
//! registry are refused (`unknown_producer_id`) and ask for a new one.

mod common;

use std::path::PathBuf;

use common::{values_of, wait_for, Broker};
use serde_json::{json, Value};

const TOPIC: &str = "reg";

fn init(b: &Broker) -> i64 {
    let (status, body) = b.post("/v1/producers", json!({}));
    assert_eq!(status, 200, "POST /v1/producers: {body}");
    assert_eq!(body["epoch"], 0, "{body}");
    body["producer_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no producer_id in {body}"))
}

fn produce(b: &Broker, partition: u32, id: i64, seq: i64, value: &str) -> (u16, Value) {
    b.post(
        &format!("/v1/topics/{TOPIC}/records"),
        json!({"records": [{"value": value, "partition": partition}],
               "producer_id": id, "epoch": 0, "sequence": seq}),
    )
}

/// Three idempotent batches of one record each, sequences 0, 1, 2, to
/// both partitions; asserts each was written at the partition's end.
fn produce_three(b: &Broker, id: i64, tag: &str, first_offset: u64) {
    for p in 0..2 {
        for seq in 0..3 {
            let (status, body) = produce(b, p, id, seq, &format!("{tag}-{p}-{seq}"));
            assert_eq!(status, 200, "producer {id} seq {seq} on partition {p}: {body}");
            assert_eq!(
                body["offsets"][0]["offset"],
                first_offset + seq as u64,
                "producer {id} seq {seq} on partition {p} is written at the log's end, \
                 not answered as a retry: {body}"
            );
        }
    }
}

fn registry(b: &Broker) -> PathBuf {
    b.data_dir().join("producers").join("registry.json")
}

/// The files kept aside as `registry.json.damaged-<ms>`.
fn kept_aside(b: &Broker) -> Vec<PathBuf> {
    std::fs::read_dir(b.data_dir().join("producers"))
        .expect("list producers/")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("registry.json.damaged-"))
        })
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Stop {
    Clean,
    Kill9,
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Delete,
    Truncate,
    Garble,
}

/// Issues two producers and writes three batches with each (so ids 0 and
/// 1 are in the partitions), stops, damages the registry, restarts, and
/// checks the next producer's id is new and its batches are written.
fn lose_the_registry(stop: Stop, damage: Damage) {
    let mut b = Broker::start(2);
    assert_eq!(
        b.post("/v1/topics", json!({"name": TOPIC, "partitions": 2})).0,
        201
    );
    let first = init(&b);
    produce_three(&b, first, "first", 0);
    let second = init(&b);
    produce_three(&b, second, "second", 3);
    let mut issued = vec![first, second];

    match stop {
        Stop::Clean => assert!(b.sigterm_and_wait().success()),
        Stop::Kill9 => b.kill9(),
    }
    let path = registry(&b);
    let before = std::fs::read(&path).expect("the registry was written");
    let damaged: Option<Vec<u8>> = match damage {
        Damage::Delete => {
            std::fs::remove_file(&path).expect("delete the registry");
            None
        }
        Damage::Truncate => Some(before[..before.len() / 2].to_vec()),
        Damage::Garble => Some(b"{\"next_id\": \x00\xff garbage".to_vec()),
    };
    if let Some(bytes) = &damaged {
        std::fs::write(&path, bytes).expect("damage the registry");
    }
    b.restart();

    let third = init(&b);
    assert!(
        !issued.contains(&third),
        "{damage:?} registry after {stop:?}: id {third} was issued before ({issued:?})"
    );
    assert!(
        third > *issued.iter().max().unwrap(),
        "ids continue past every id the partitions know: {third} after {issued:?}"
    );
    issued.push(third);
    produce_three(&b, third, "third", 6);
    for p in 0..2 {
        let want: Vec<String> = ["first", "second", "third"]
            .iter()
            .flat_map(|tag| (0..3).map(move |seq| format!("{tag}-{p}-{seq}")))
            .collect();
        assert_eq!(
            values_of(&b, TOPIC, p),
            want,
            "partition {p} reads back every batch"
        );
    }
    // The ids of the lost registry are refused, not taken for the new ones.
    let (status, body) = produce(&b, 0, first, 3, "stale");
    assert_eq!(status, 404, "an id of the lost registry: {body}");
    assert_eq!(body["error"]["code"], "unknown_producer_id", "{body}");

    // Log lines are written by a thread of their own: wait for it.
    wait_for("the lost registry said at error level", || {
        b.stderr_text()
            .lines()
            .any(|l| l.contains("ERROR") && l.contains("registry"))
    });
    if let Some(bytes) = &damaged {
        let aside = kept_aside(&b);
        assert_eq!(aside.len(), 1, "the damaged registry is kept aside: {aside:?}");
        assert_eq!(
            &std::fs::read(&aside[0]).expect("read the kept registry"),
            bytes,
            "kept byte for byte"
        );
    }

    // The rebuilt registry is durable: after another kill -9 the ids go on.
    b.kill9();
    b.restart();
    let fourth = init(&b);
    assert!(
        fourth > *issued.iter().max().unwrap(),
        "{fourth} after {issued:?}"
    );
    let (status, body) = produce(&b, 1, fourth, 0, "fourth");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["offsets"][0]["offset"], 9, "written: {body}");
}

#[test]
fn a_deleted_registry_after_a_clean_stop_never_reissues_an_id() {
    lose_the_registry(Stop::Clean, Damage::Delete);
}

#[test]
fn a_deleted_registry_after_kill9_never_reissues_an_id() {
    lose_the_registry(Stop::Kill9, Damage::Delete);
}

#[test]
fn a_truncated_registry_after_kill9_is_kept_aside_and_never_reissues_an_id() {
    lose_the_registry(Stop::Kill9, Damage::Truncate);
}

#[test]
fn a_garbled_registry_after_a_clean_stop_is_kept_aside_and_never_reissues_an_id() {
    lose_the_registry(Stop::Clean, Damage::Garble);
}

/// An intact registry is not disturbed: ids go on one by one within a run
/// and across a clean stop; across a kill -9 they go on past the block of
/// ids the registry had reserved (it is written once per block, not per
/// id), never back; and nothing is said at error level.
#[test]
fn an_intact_registry_keeps_counting() {
    let mut b = Broker::start(2);
    assert_eq!(
        b.post("/v1/topics", json!({"name": TOPIC, "partitions": 2})).0,
        201
    );
    let first = init(&b);
    produce_three(&b, first, "first", 0);
    b.kill9();
    b.restart();
    let second = init(&b);
    assert!(second > first, "{second} after {first}");
    let third = init(&b);
    assert_eq!(third, second + 1, "one by one within a run");
    let (status, body) = produce(&b, 0, first, 3, "first-0-3");
    assert_eq!(status, 200, "the first producer still writes: {body}");
    assert!(b.sigterm_and_wait().success());
    b.restart();
    let fourth = init(&b);
    assert_eq!(fourth, third + 1, "a clean stop keeps the exact next id");
    let log = b.stderr_text();
    assert!(
        !log.lines().any(|l| l.contains("ERROR") && l.contains("registry")),
        "{log}"
    );
    assert!(kept_aside(&b).is_empty());
}
