//! Producing and fetching records over HTTP.
//!
//! Contract proven here (docs/api.md, "Records"):
//! - `POST /v1/topics/{t}/records` answers `{"offsets":[{partition,offset}]}`
//!   in input order. A record with a key and no partition goes to partition
//!   `FNV-1a-64(key bytes) % partitions` (offset basis 0xcbf29ce484222325,
//!   prime 0x100000001b3, over the decoded key bytes), so one key always lands
//!   on one partition, and its offsets grow in produce order. An explicit
//!   partition wins over the key. Keyless records of one request share one
//!   partition, and successive requests spread over more than one.
//! - `encoding: base64` carries arbitrary bytes (0x00, 0xff, ...) in keys and
//!   values both ways; fetching such bytes with `encoding=utf8` (the default)
//!   is 422 `not_utf8`.
//! - `GET .../partitions/{p}/records` returns records from `offset` with
//!   `next_offset` and `high_watermark`; `max_records` caps a page, paging with
//!   `next_offset` reads everything once, in order; `max_bytes` is soft (at
//!   least one record when one exists); a missing key reads as `null`; a
//!   missing timestamp is the broker's clock.
//! - An offset above the high watermark is 416 `offset_out_of_range` whose
//!   message names the offset, the log start offset and the high watermark;
//!   an offset equal to the high watermark is an empty page.
//! - `wait_ms` long-polls: a fetch parked at the high watermark returns the
//!   record produced while it waits (on every partition, whichever shard owns
//!   it), and an expired wait returns no records with `next_offset == offset`.
//! - Bad produce or fetch input is 400 `invalid_request` (or 404 for unknown
//!   partitions) and writes nothing, even when only one record of a request is
//!   bad. `/metrics` reports the high watermark per partition.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use serde_json::{json, Value};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

#[test]
fn the_key_hash_helper_is_fnv1a_64() {
    // Published FNV-1a 64 test vectors, and the worked example of docs/api.md.
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    assert_eq!(fnv1a64(b"user-42"), 0x32c6_d7a5_4d35_dacb);
    assert_eq!(key_partition(b"user-42", 3), 0);
    assert_eq!(b64_encode(b""), "");
    assert_eq!(b64_encode(b"f"), "Zg==");
    assert_eq!(b64_encode(b"fo"), "Zm8=");
    assert_eq!(b64_encode(b"foo"), "Zm9v");
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(b64_decode(&b64_encode(&all)), all);
}

#[test]
fn keyed_records_land_on_the_fnv1a_partition_in_produce_order() {
    const PARTITIONS: u32 = 6;
    let b = Broker::start(2);
    create_topic(&b, "keyed", PARTITIONS);

    let mut keys: Vec<String> = (0..20).map(|i| format!("user-{i}")).collect();
    keys.push("user-42".to_string());
    keys.push(String::new()); // the empty key is a key, not "no key"

    // 40 requests of 1-3 records, keys in a scrambled order.
    let mut sent: Vec<(String, String)> = Vec::new(); // (key, value) in produce order
    let mut partition_of_key: BTreeMap<String, u32> = BTreeMap::new();
    let mut last_offset: BTreeMap<u32, u64> = BTreeMap::new();
    for req in 0..40usize {
        let n = 1 + req % 3;
        let batch: Vec<(String, String)> = (0..n)
            .map(|i| {
                let key = keys[(req * 7 + i * 5) % keys.len()].clone();
                let value = format!("r{req}-{i}-{key}");
                (key, value)
            })
            .collect();
        let records: Vec<Value> = batch
            .iter()
            .map(|(k, v)| json!({ "key": k, "value": v }))
            .collect();
        let acks = produce(&b, "keyed", json!({ "records": records }));
        for ((key, value), (p, offset)) in batch.iter().zip(acks) {
            assert_eq!(
                p,
                key_partition(key.as_bytes(), PARTITIONS),
                "key {key:?} must go to FNV-1a-64(key) % {PARTITIONS}"
            );
            let first = *partition_of_key.entry(key.clone()).or_insert(p);
            assert_eq!(p, first, "key {key:?} moved between partitions");
            if let Some(prev) = last_offset.insert(p, offset) {
                assert!(
                    offset > prev,
                    "offsets on partition {p} must increase in produce order"
                );
            }
            sent.push((key.clone(), value.clone()));
        }
    }
    let used: BTreeSet<u32> = partition_of_key.values().copied().collect();
    assert!(
        used.len() > 1,
        "22 keys all hashed to one partition? {partition_of_key:?}"
    );

    // Each partition holds exactly its keys' records, in produce order.
    for p in 0..PARTITIONS {
        let expected: Vec<(String, String)> = sent
            .iter()
            .filter(|(k, _)| key_partition(k.as_bytes(), PARTITIONS) == p)
            .cloned()
            .collect();
        let got: Vec<(String, String)> = fetch_all(&b, "keyed", p, "utf8")
            .iter()
            .map(|r| {
                (
                    r["key"]
                        .as_str()
                        .unwrap_or_else(|| panic!("no key in {r}"))
                        .to_string(),
                    r["value"]
                        .as_str()
                        .unwrap_or_else(|| panic!("no value in {r}"))
                        .to_string(),
                )
            })
            .collect();
        assert_eq!(got, expected, "partition {p}");
    }

    // The hash is over the decoded key bytes: a binary key sent as base64.
    for raw_key in [vec![0xffu8, 0x00, 0x10], vec![0x80], b"user-42".to_vec()] {
        let acks = produce(
            &b,
            "keyed",
            json!({
                "encoding": "base64",
                "records": [ { "key": b64_encode(&raw_key), "value": b64_encode(b"v") } ]
            }),
        );
        assert_eq!(
            acks[0].0,
            key_partition(&raw_key, PARTITIONS),
            "key bytes {raw_key:?}"
        );
    }

    // An explicit partition wins over the key.
    let hashed = key_partition(b"user-42", PARTITIONS);
    let other = (hashed + 1) % PARTITIONS;
    let acks = produce(
        &b,
        "keyed",
        json!({ "records": [ { "key": "user-42", "value": "pinned", "partition": other } ] }),
    );
    assert_eq!(acks[0].0, other);
}

#[test]
fn offsets_come_back_in_input_order_across_partitions() {
    let b = Broker::start(2);
    create_topic(&b, "mixed", 4);
    let partitions = [2u32, 0, 2, 3, 1, 0, 3, 3];
    let records: Vec<Value> = partitions
        .iter()
        .enumerate()
        .map(|(i, p)| json!({ "value": format!("v{i}"), "partition": p }))
        .collect();
    let acks = produce(&b, "mixed", json!({ "records": records }));
    assert_eq!(
        acks,
        vec![(2, 0), (0, 0), (2, 1), (3, 0), (1, 0), (0, 1), (3, 1), (3, 2)],
        "offsets must be in input order, numbered per partition"
    );
    assert_eq!(values_of(&b, "mixed", 0), vec!["v1", "v5"]);
    assert_eq!(values_of(&b, "mixed", 1), vec!["v4"]);
    assert_eq!(values_of(&b, "mixed", 2), vec!["v0", "v2"]);
    assert_eq!(values_of(&b, "mixed", 3), vec!["v3", "v6", "v7"]);
    assert_eq!(high_watermarks(&b, "mixed"), vec![2, 1, 2, 3]);
}

#[test]
fn base64_round_trips_binary_and_utf8_fetch_of_binary_is_not_utf8() {
    let b = Broker::start(1);
    create_topic(&b, "bin", 1);

    let all_bytes: Vec<u8> = (0..=255u8).collect();
    let values: Vec<Vec<u8>> = vec![
        all_bytes.clone(),
        vec![0x00],
        vec![0xff],
        vec![0xff, 0xfe, 0x00, 0x01],
        "h\u{e9}llo \u{1F680}".as_bytes().to_vec(),
        all_bytes.iter().rev().cycle().take(5000).copied().collect(),
    ];
    let key = vec![0x00u8, 0xff, 0x7f];
    let records: Vec<Value> = values
        .iter()
        .map(|v| json!({ "key": b64_encode(&key), "value": b64_encode(v), "timestamp": 1700000000000i64 }))
        .collect();
    let acks = produce(&b, "bin", json!({ "encoding": "base64", "records": records }));
    assert_eq!(
        acks,
        (0..values.len() as u64).map(|o| (0u32, o)).collect::<Vec<_>>()
    );

    // Byte-exact both ways.
    let got = fetch_all(&b, "bin", 0, "base64");
    assert_eq!(got.len(), values.len());
    for (i, (r, v)) in got.iter().zip(&values).enumerate() {
        assert_eq!(r["offset"], i as u64);
        assert_eq!(r["timestamp"], 1700000000000i64);
        assert_eq!(
            b64_decode(r["key"].as_str().expect("key")),
            key,
            "key of record {i}"
        );
        assert_eq!(
            &b64_decode(r["value"].as_str().expect("value")),
            v,
            "value of record {i}"
        );
    }

    // A UTF-8 value sent as base64 reads back as text with encoding=utf8.
    // (Record 4's value is UTF-8 but its key is not.)
    assert_error(
        &fetch(&b, "bin", 0, "offset=4&max_records=1&encoding=utf8"),
        422,
        "not_utf8",
    );
    let acks = produce(
        &b,
        "bin",
        json!({
            "encoding": "base64",
            "records": [ { "value": b64_encode("h\u{e9}llo \u{1F680}".as_bytes()) } ]
        }),
    );
    let text_offset = acks[0].1;
    let (status, body) = fetch(&b, "bin", 0, &format!("offset={text_offset}&encoding=utf8"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"][0]["value"], "h\u{e9}llo \u{1F680}");
    assert_eq!(body["records"][0]["key"], Value::Null);

    // A utf8 produce reads back as its UTF-8 bytes in base64.
    let acks = produce(
        &b,
        "bin",
        json!({ "records": [ { "key": "k\u{e9}", "value": "\u{1F680}" } ] }),
    );
    let (status, body) = fetch(&b, "bin", 0, &format!("offset={}&encoding=base64", acks[0].1));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        b64_decode(body["records"][0]["value"].as_str().expect("value")),
        "\u{1F680}".as_bytes()
    );
    assert_eq!(
        b64_decode(body["records"][0]["key"].as_str().expect("key")),
        "k\u{e9}".as_bytes()
    );

    // Binary bytes asked for as utf8: 422 not_utf8, explicit or by default.
    for query in [
        "offset=0&encoding=utf8",
        "offset=0",
        "offset=1&max_records=1",
        "offset=2&encoding=utf8",
    ] {
        assert_error(&fetch(&b, "bin", 0, query), 422, "not_utf8");
    }

    // Bad base64 and unknown encodings are refused and write nothing.
    let hw = high_watermarks(&b, "bin");
    for body in [
        json!({ "encoding": "base64", "records": [ { "value": "!!!not base64!!!" } ] }),
        json!({ "encoding": "base64", "records": [ { "value": "AAAA" }, { "value": "A" } ] }),
        json!({ "encoding": "base64", "records": [ { "key": "%%%", "value": "AAAA" } ] }),
        json!({ "encoding": "hex", "records": [ { "value": "00" } ] }),
    ] {
        assert_error(&b.post("/v1/topics/bin/records", body), 400, "invalid_request");
    }
    assert_eq!(
        high_watermarks(&b, "bin"),
        hw,
        "a refused produce must write nothing"
    );
    assert_error(
        &fetch(&b, "bin", 0, "offset=0&encoding=hex"),
        400,
        "invalid_request",
    );
}

#[test]
fn keyless_records_share_a_partition_per_request_and_spread_across_requests() {
    const PARTITIONS: u32 = 4;
    let b = Broker::start(2);
    create_topic(&b, "spread", PARTITIONS);
    let mut used = BTreeSet::new();
    for req in 0..24 {
        let records: Vec<Value> = (0..3)
            .map(|i| json!({ "value": format!("q{req}-{i}") }))
            .collect();
        let acks = produce(&b, "spread", json!({ "records": records }));
        let p = acks[0].0;
        assert!(p < PARTITIONS);
        for (i, (pi, off)) in acks.iter().enumerate() {
            assert_eq!(
                *pi, p,
                "keyless records of one request must share a partition: {acks:?}"
            );
            assert_eq!(
                *off,
                acks[0].1 + i as u64,
                "one request's records are consecutive: {acks:?}"
            );
        }
        used.insert(p);
    }
    assert!(
        used.len() > 1,
        "24 keyless requests all went to partition {used:?}"
    );
    let total: u64 = high_watermarks(&b, "spread").iter().sum();
    assert_eq!(total, 72);
}

#[test]
fn offset_out_of_range_names_the_offset_and_both_bounds() {
    let b = Broker::start(1);
    create_topic(&b, "bounds", 1);
    let values: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    produce_values(&b, "bounds", 0, &values);

    let message = assert_error(&fetch(&b, "bounds", 0, "offset=99"), 416, "offset_out_of_range");
    for part in ["99", "log start offset 0", "high watermark 5"] {
        assert!(message.contains(part), "message {message:?} must name {part:?}");
    }
    let message = assert_error(
        &fetch(&b, "bounds", 0, "offset=6&wait_ms=1000"),
        416,
        "offset_out_of_range",
    );
    for part in ["6", "log start offset 0", "high watermark 5"] {
        assert!(message.contains(part), "message {message:?} must name {part:?}");
    }

    // At the high watermark: an empty page, not an error.
    let (status, body) = fetch(&b, "bounds", 0, "offset=5");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({ "records": [], "next_offset": 5, "high_watermark": 5 })
    );

    // Inside: from the requested offset.
    let (status, body) = fetch(&b, "bounds", 0, "offset=3");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"][0]["offset"], 3);
    assert_eq!(body["records"][0]["value"], "v3");
    assert_eq!(body["next_offset"], 5);
    assert_eq!(body["high_watermark"], 5);

    // No offset: the log start.
    let (status, body) = fetch(&b, "bounds", 0, "max_records=2");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"][0]["offset"], 0);
    assert_eq!(body["next_offset"], 2);
}

#[test]
fn fetch_query_parameters_are_validated() {
    let b = Broker::start(1);
    create_topic(&b, "q", 1);
    produce_values(&b, "q", 0, &["a".to_string(), "b".to_string()]);
    for query in [
        "offset=-1",
        "offset=abc",
        "offset=1.5",
        "offset=18446744073709551616",
        "max_records=0",
        "max_records=-3",
        "max_records=10001",
        "max_records=ten",
        "max_bytes=0",
        "max_bytes=-1",
        "max_bytes=x",
        "wait_ms=-1",
        "wait_ms=soon",
        "encoding=latin1",
    ] {
        assert_error(&fetch(&b, "q", 0, query), 400, "invalid_request");
    }
    // The accepted edges.
    for query in [
        "max_records=10000",
        "max_records=1",
        "max_bytes=1",
        "max_bytes=1000000000000",
        "wait_ms=0",
    ] {
        let (status, body) = fetch(&b, "q", 0, query);
        assert_eq!(status, 200, "{query}: {body}");
        assert!(
            !body["records"].as_array().expect("records").is_empty(),
            "{query}: {body}"
        );
    }
    // wait_ms above 30000 is either refused or capped; below the high
    // watermark it never waits.
    let got = fetch(&b, "q", 0, "offset=0&wait_ms=30001");
    if got.0 != 200 {
        assert_error(&got, 400, "invalid_request");
    }
}

#[test]
fn records_carry_offset_timestamp_key_and_value() {
    let b = Broker::start(1);
    create_topic(&b, "shape", 1);
    let before = now_ms();
    let acks = produce(
        &b,
        "shape",
        json!({ "records": [
            { "key": "user-42", "value": "hello", "partition": 0, "timestamp": 1700000000000i64 },
            { "value": "no key, no timestamp" },
            { "key": "", "value": "", "timestamp": 1 }
        ] }),
    );
    let after = now_ms();
    assert_eq!(acks, vec![(0, 0), (0, 1), (0, 2)]);
    let (status, body) = fetch(
        &b,
        "shape",
        0,
        "offset=0&max_records=100&max_bytes=1048576&wait_ms=0&encoding=utf8",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["records"][0],
        json!({ "offset": 0, "timestamp": 1700000000000i64, "key": "user-42", "value": "hello" })
    );
    let r1 = &body["records"][1];
    assert_eq!(r1["offset"], 1);
    assert!(
        r1.as_object().expect("record").contains_key("key"),
        "key must be present (null): {r1}"
    );
    assert_eq!(r1["key"], Value::Null);
    assert_eq!(r1["value"], "no key, no timestamp");
    let ts = r1["timestamp"]
        .as_i64()
        .unwrap_or_else(|| panic!("no timestamp in {r1}"));
    assert!(
        before - 1000 <= ts && ts <= after + 1000,
        "a record without a timestamp gets the broker's clock: {ts} not within [{before}, {after}]"
    );
    assert_eq!(
        body["records"][2],
        json!({ "offset": 2, "timestamp": 1, "key": "", "value": "" })
    );
    assert_eq!(body["next_offset"], 3);
    assert_eq!(body["high_watermark"], 3);
}

#[test]
fn bad_produce_requests_are_refused_and_write_nothing() {
    let b = Broker::start(2);
    create_topic(&b, "strict", 3);
    let bad: Vec<(Value, u16, &str)> = vec![
        (json!({ "records": [] }), 400, "invalid_request"),
        (json!({}), 400, "invalid_request"),
        (json!({ "records": [ { "key": "k" } ] }), 400, "invalid_request"),
        (
            json!({ "records": [ { "value": "ok" }, { "key": "no value" } ] }),
            400,
            "invalid_request",
        ),
        (
            json!({ "records": [ { "value": "x", "partition": -1 } ] }),
            400,
            "invalid_request",
        ),
        (
            json!({ "records": [ { "value": "x", "partition": 3 } ] }),
            404,
            "partition_not_found",
        ),
        (
            json!({ "records": [ { "value": "fine", "partition": 0 }, { "value": "bad", "partition": 9 } ] }),
            404,
            "partition_not_found",
        ),
        (
            json!({ "records": [ { "value": "x" } ], "encoding": "utf16" }),
            400,
            "invalid_request",
        ),
    ];
    for (body, status, code) in bad {
        let got = b.post("/v1/topics/strict/records", body.clone());
        assert_eq!(
            (got.0, got.1["error"]["code"].as_str()),
            (status, Some(code)),
            "for {body}: got {}",
            got.1
        );
    }
    for body in [
        json!({ "records": [ { "value": 5 } ] }),
        json!({ "records": [ { "value": "x", "partition": "0" } ] }),
        json!({ "records": { "value": "x" } }),
        json!({ "records": [ "x" ] }),
    ] {
        assert_400_one_of(
            &b.post("/v1/topics/strict/records", body),
            &["bad_json", "invalid_request"],
        );
    }
    assert_error(
        &b.post_raw("/v1/topics/strict/records", "{\"records\":[{\"value\":\"x\"}]"),
        400,
        "bad_json",
    );
    assert_eq!(
        high_watermarks(&b, "strict"),
        vec![0, 0, 0],
        "refused produces must write nothing"
    );
    assert_error(
        &b.post(
            "/v1/topics/missing/records",
            json!({ "records": [ { "value": "x" } ] }),
        ),
        404,
        "topic_not_found",
    );
}

/// How long each parked fetch of the long-poll test waits.
const PARKED_WAIT_MS: u64 = 20_000;

#[test]
fn long_poll_returns_the_record_produced_while_it_waits() {
    let b = Broker::start(2);
    create_topic(&b, "lp", 4);
    // Partition 0 already has a record, so its parked fetches are one
    // record further than the others'.
    produce_values(&b, "lp", 0, &["first".to_string()]);
    // A round where a record was acknowledged only once its fetch's wait
    // could have run out proves nothing (the machine was slow): it is done
    // again, a record further.
    let mut round = 0;
    while !parked_fetches_return_the_records_produced(&b, round) {
        round += 1;
    }

    // An expired wait: no records, next_offset == offset.
    let hw = high_watermarks(&b, "lp")[1];
    let (status, body) = fetch(&b, "lp", 1, &format!("offset={hw}&wait_ms=200"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({ "records": [], "next_offset": hw, "high_watermark": hw })
    );
}

/// One round of the long-poll test: a fetch parked at the high watermark
/// of every partition of `lp` (their owners differ with two shards), plus a
/// second one on partition 0, then one record produced to each partition.
/// Every fetch must return its partition's new record. False when the
/// round proves nothing: a fetch ran out empty, and its record was
/// acknowledged only after `PARKED_WAIT_MS` had passed since the fetch was
/// sent (so the wait may have ended first).
fn parked_fetches_return_the_records_produced(b: &Broker, round: u32) -> bool {
    let hws = high_watermarks(b, "lp");
    let mut waiters = Vec::new();
    for p in [0u32, 1, 2, 3, 0] {
        let (c, offset) = (b.client(), hws[p as usize]);
        waiters.push(thread::spawn(move || {
            let sent = Instant::now();
            let got = fetch(&c, "lp", p, &format!("offset={offset}&wait_ms={PARKED_WAIT_MS}"));
            (p, offset, sent, got)
        }));
    }
    // Give the fetches time to park. This only makes the test meaningful; it
    // cannot change the verdict: a fetch that reaches the broker after its
    // record returns that record at once, which passes the same checks.
    thread::sleep(Duration::from_millis(500));
    let mut acked = Vec::new();
    for p in 0..4u32 {
        produce_values(b, "lp", p, &[format!("wake-{round}-{p}")]);
        acked.push(Instant::now());
    }
    let mut conclusive = true;
    for w in waiters {
        let (p, offset, sent, (status, body)) = w.join().expect("fetch thread");
        assert_eq!(status, 200, "partition {p}: {body}");
        let records = body["records"].as_array().expect("records");
        if records.is_empty() {
            // The broker's wait began after `sent`, and the record was
            // durable before `acked`: within the wait, the fetch had to
            // return it.
            let after = acked[p as usize].saturating_duration_since(sent);
            assert!(
                after >= Duration::from_millis(PARKED_WAIT_MS),
                "the parked fetch on {p} ran out empty, though its record was acknowledged \
                 {after:?} after the fetch was sent, within its {PARKED_WAIT_MS} ms wait: {body}"
            );
            eprintln!("round {round}: the fetch on {p} ran out before its record came ({after:?}); again");
            conclusive = false;
            continue;
        }
        assert_eq!(
            records.len(),
            1,
            "the parked fetch on {p} must return the new record: {body}"
        );
        assert_eq!(records[0]["offset"], offset);
        assert_eq!(records[0]["value"], format!("wake-{round}-{p}"));
        assert_eq!(body["next_offset"], offset + 1);
        assert_eq!(body["high_watermark"], offset + 1);
    }
    conclusive
}

#[test]
fn paging_with_max_records_and_next_offset_reads_1000_records_once_in_order() {
    let b = Broker::start(2);
    create_topic(&b, "pages", 2);
    let all: Vec<String> = (0..1000).map(|i| format!("rec-{i:04}")).collect();
    for chunk in all.chunks(100) {
        produce_values(&b, "pages", 1, chunk);
    }
    assert_eq!(high_watermarks(&b, "pages"), vec![0, 1000]);

    for max_records in [100u64, 7, 333] {
        let mut offset = 0u64;
        let mut got: Vec<String> = Vec::new();
        let mut pages = 0;
        while offset < 1000 {
            let (status, body) = fetch(
                &b,
                "pages",
                1,
                &format!("offset={offset}&max_records={max_records}"),
            );
            assert_eq!(status, 200, "{body}");
            let records = body["records"].as_array().expect("records");
            assert!(
                !records.is_empty(),
                "a page below the high watermark is never empty: {body}"
            );
            assert!(
                records.len() as u64 <= max_records,
                "max_records={max_records} gave {}",
                records.len()
            );
            for (i, r) in records.iter().enumerate() {
                assert_eq!(r["offset"], offset + i as u64, "contiguous offsets");
                got.push(r["value"].as_str().expect("value").to_string());
            }
            assert_eq!(
                body["next_offset"],
                offset + records.len() as u64,
                "next_offset follows the page"
            );
            assert_eq!(body["high_watermark"], 1000);
            offset = body["next_offset"].as_u64().expect("next_offset");
            pages += 1;
        }
        assert_eq!(got, all, "max_records={max_records}");
        assert!(
            pages >= 1000 / max_records,
            "max_records={max_records} gave {pages} pages"
        );
    }

    // The default page is at most 500 records.
    let (status, body) = fetch(&b, "pages", 1, "offset=0");
    assert_eq!(status, 200);
    let n = body["records"].as_array().expect("records").len();
    assert!((1..=500).contains(&n), "default max_records is 500, got {n}");

    // At the end: empty, next_offset stays.
    let (status, body) = fetch(&b, "pages", 1, "offset=1000");
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({ "records": [], "next_offset": 1000, "high_watermark": 1000 })
    );
}

#[test]
fn max_bytes_is_soft_and_always_returns_one_record() {
    let b = Broker::start(1);
    create_topic(&b, "bytes", 1);
    let big = "x".repeat(100 << 10);
    produce_values(&b, "bytes", 0, &[big.clone(), "small".to_string(), big.clone()]);

    let (status, body) = fetch(&b, "bytes", 0, "offset=0&max_bytes=1024");
    assert_eq!(status, 200);
    let records = body["records"].as_array().expect("records");
    assert!(!records.is_empty(), "max_bytes below one record still returns it");
    assert_eq!(records[0]["offset"], 0);
    assert_eq!(records[0]["value"].as_str().map(str::len), Some(big.len()));
    assert_eq!(body["next_offset"], records.len() as u64);

    let (status, body) = fetch(&b, "bytes", 0, "offset=2&max_bytes=1");
    assert_eq!(status, 200);
    assert_eq!(body["records"][0]["offset"], 2);

    // A budget covering everything returns everything.
    let (status, body) = fetch(&b, "bytes", 0, "offset=0&max_bytes=10485760");
    assert_eq!(status, 200);
    assert_eq!(body["records"].as_array().map(Vec::len), Some(3));
}

#[test]
fn fetch_bytes_max_caps_the_budget_but_not_the_first_record() {
    let b = Broker::start_with(&["--fetch-bytes-max", "65536", "--shards", "1"]);
    create_topic(&b, "capped", 1);
    let values: Vec<String> = (0..40)
        .map(|i| format!("{i:02}{}", "y".repeat(8 << 10)))
        .collect();
    // One request (one batch) per record, so a reader that stops at batch
    // boundaries can still honour the cap.
    for v in &values {
        produce_values(&b, "capped", 0, std::slice::from_ref(v));
    }
    let (status, body) = fetch(&b, "capped", 0, "offset=0&max_records=10000&max_bytes=1073741824");
    assert_eq!(status, 200, "{body}");
    let n = body["records"].as_array().expect("records").len();
    assert!(n >= 1, "at least one record");
    assert!(
        n < 40,
        "--fetch-bytes-max 65536 must cap a 330 KiB page, got all {n} records"
    );
    // Paging still reads everything.
    assert_eq!(values_of(&b, "capped", 0), values);
}

#[test]
fn metrics_report_high_watermarks_requests_and_fsyncs() {
    let b = Broker::start(2);
    create_topic(&b, "orders", 2);
    produce_values(
        &b,
        "orders",
        0,
        &["a".to_string(), "b".to_string(), "c".to_string()],
    );
    wait_for("es_partition_high_watermark of orders/0 to reach 3", || {
        b.metric(r#"es_partition_high_watermark{topic="orders",partition="0"}"#) == Some(3.0)
    });
    // Label order does not matter to the helper.
    assert_eq!(
        b.metric(r#"es_partition_high_watermark{partition="0",topic="orders"}"#),
        Some(3.0)
    );
    let requests = b
        .metric_sum("es_http_requests_total")
        .expect("es_http_requests_total");
    assert!(requests >= 2.0, "es_http_requests_total = {requests}");
    let rounds = b
        .metric_sum("es_fsync_rounds_total")
        .expect("es_fsync_rounds_total");
    assert!(rounds >= 1.0, "a durable produce took {rounds} fsync rounds");
    let writes = b
        .metric_sum("es_segment_write_duration_seconds_count")
        .expect("es_segment_write_duration_seconds_count");
    assert!(writes >= 1.0, "a produce took {writes} segment writes");
    assert!(
        b.metric_sum("es_recovery_segments_scanned_total").is_some(),
        "es_recovery_segments_scanned_total"
    );
    // Bytes held in memory for tailing readers: a gauge the shards refresh
    // every few seconds (0 where the filesystem refuses direct I/O, as
    // tmpfs does: the page cache holds them then).
    wait_for("es_recent_writes_bytes to be reported", || {
        b.metric_sum("es_recent_writes_bytes").is_some()
    });
    let (status, body) = b.get("/health");
    assert_eq!((status, body), (200, json!({ "status": "ok" })));
    let (status, body) = b.get("/ready");
    assert_eq!((status, body), (200, json!({ "status": "ready" })));
}
