//! Producing over HTTP: the partition a record lands on, the offsets
//! answered, base64 keys and values, and bad produce input.

use super::*;

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
