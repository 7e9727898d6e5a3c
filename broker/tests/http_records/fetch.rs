//! Fetching over HTTP: the bounds of a read, its query parameters, what a
//! record carries, long-poll, paging, byte budgets, and the metrics.

use super::*;

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
