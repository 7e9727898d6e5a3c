//! Cleanup through the real broker: retention, compaction and tiered
//! storage, configured over HTTP.
//!
//! Contract proven here (docs/api.md, "Cleanup"; docs/storage.md):
//! - The cleanup keys (`cleanup_policy`, `retention_ms`, `retention_bytes`,
//!   `delete_retention_ms`, `tiered`, `cold_retention_ms`,
//!   `cold_retention_bytes`) are accepted at create and by `PATCH`, echoed in
//!   the config, checked (a bad value is 400 `invalid_request` and changes
//!   nothing), and survive a restart.
//! - Retention removes old segments in the background: the log start offset
//!   advances and a fetch below it is 416 `offset_out_of_range` naming it.
//! - A compacted topic refuses keyless records (400, nothing written), keeps
//!   the latest value of every key, and pages past the gaps it leaves;
//!   metrics count compaction runs and bytes reclaimed.
//! - A tiered topic moves segments to the cold directory (`--cold-dir`,
//!   default `<data-dir>/cold`); describe shows hot and cold start offsets;
//!   every record stays fetchable from offset 0 after the hot copy is gone,
//!   across a clean restart and a kill -9; cold retention deletes from the
//!   cold tier; deleting the topic deletes its cold data.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use serde_json::{json, Value};

/// Cleanup runs every 50 ms in these tests. Background cleanup is waited
/// for with `wait_for`, however long it takes.
const FAST_CLEANUP: [&str; 2] = ["--cleanup-interval-ms", "50"];

fn partition0(c: &Client, topic: &str) -> Value {
    describe(c, topic)["partitions"][0].clone()
}

fn logs_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter(|e| {
                e.as_ref()
                    .map(|e| e.file_name().to_string_lossy().ends_with(".log"))
                    .unwrap_or(false)
            })
            .count()
        })
        .unwrap_or(0)
}

/// Bytes of the segment logs in a directory: retention is done once the
/// hot and cold tiers are within their limits (files go after the log has
/// let go of them, so the files lag the log, never lead it).
/// Bytes of the `.log` files in `dir`; `but_newest` leaves the active
/// segment out of a hot partition directory.
fn log_bytes_in(dir: &Path, but_newest: bool) -> u64 {
    let mut logs: Vec<(String, u64)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .map(|e| {
                    let len = e.metadata().map_or(0, |m| m.len());
                    (e.file_name().to_string_lossy().into_owned(), len)
                })
                .collect()
        })
        .unwrap_or_default();
    // The active (newest) segment is written with direct I/O: its file is
    // padded to a page until sealed, so its length says little. Retention
    // keeps retention_bytes "plus the active segment": count the others.
    logs.sort();
    if but_newest {
        logs.pop();
    }
    logs.iter().map(|(_, len)| len).sum()
}

/// Bytes of a hot partition's sealed segments.
fn log_bytes(hot: &Path) -> u64 {
    log_bytes_in(hot, true)
}

/// Bytes of a cold partition's segments.
fn cold_bytes(cold: &Path) -> u64 {
    log_bytes_in(cold, false)
}

/// Produces `n` records `v<i>` (key `k<i % keys>`) to partition 0, in
/// batches of 10.
fn produce_n(c: &Client, topic: &str, from: usize, n: usize, keys: usize) {
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(10) {
        let records: Vec<Value> = chunk
            .iter()
            .map(|i| json!({ "key": format!("k{}", i % keys), "value": format!("v{i}"), "partition": 0 }))
            .collect();
        produce(c, topic, json!({ "records": records }));
    }
}

#[test]
fn cleanup_config_keys_are_set_checked_and_kept() {
    let mut b = Broker::start_with(&["--shards", "1"]);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "t", "partitions": 1, "config": {
            "cleanup_policy": "compact,delete", "retention_ms": 60000, "retention_bytes": 1048576,
            "delete_retention_ms": 0
        } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    let config = got.1["config"].clone();
    assert_eq!(config["cleanup_policy"], "compact,delete");
    assert_eq!(config["retention_ms"], 60000);
    assert_eq!(config["retention_bytes"], 1048576);
    assert_eq!(config["delete_retention_ms"], 0);
    assert_eq!(config["tiered"], false);
    assert_eq!(config["cold_retention_ms"], Value::Null);

    // PATCH: only the given keys change; null clears a limit.
    let got = b.patch(
        "/v1/topics/t/config",
        json!({ "retention_ms": null, "cleanup_policy": "delete", "tiered": true, "cold_retention_bytes": 4096 }),
    );
    assert_eq!(got.0, 200, "{}", got.1);
    let config = got.1["config"].clone();
    assert_eq!(config["retention_ms"], Value::Null);
    assert_eq!(config["retention_bytes"], 1048576);
    assert_eq!(config["cleanup_policy"], "delete");
    assert_eq!(config["tiered"], true);
    assert_eq!(config["cold_retention_bytes"], 4096);
    let p = &got.1["partitions"][0];
    assert_eq!(
        (p["hot_start_offset"].clone(), p["cold_start_offset"].clone()),
        (json!(0), Value::Null)
    );

    // Bad values: 400, nothing changes.
    for bad in [
        json!({ "cleanup_policy": "shred" }),
        json!({ "cleanup_policy": ["compact"] }),
        json!({ "retention_ms": 0 }),
        json!({ "retention_bytes": -1 }),
        json!({ "retention_ms": "soon" }),
        json!({ "delete_retention_ms": -1 }),
        json!({ "tiered": 1 }),
        json!({ "cold_retention_ms": 0 }),
        json!({ "retention_ms": 9223372036854775808u64 }),
        // Tiering a compacted topic would let deleted keys come back.
        json!({ "cleanup_policy": "compact" }),
        json!({ "retention_ms": 5, "bogus": 1 }),
    ] {
        let got = b.patch("/v1/topics/t/config", bad.clone());
        let message = assert_error(&got, 400, "invalid_request");
        assert_eq!(describe(&b, "t")["config"], config, "after {bad}: {message}");
    }
    let got = b.post(
        "/v1/topics",
        json!({ "name": "u", "partitions": 1, "config": { "tiered": true, "cleanup_policy": "compact" } }),
    );
    assert_error(&got, 400, "invalid_request");
    assert_error(&b.get("/v1/topics/u"), 404, "topic_not_found");

    // Kept across a restart.
    b.sigterm_and_wait();
    b.restart();
    assert_eq!(describe(&b, "t")["config"], config);
}

#[test]
fn retention_moves_the_log_start_and_fetches_below_it_are_out_of_range() {
    let b = Broker::start_with(&["--shards", "2", FAST_CLEANUP[0], FAST_CLEANUP[1]]);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "r", "partitions": 1, "config": { "segment_bytes": 1024, "retention_bytes": 3000 } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    produce_n(&b, "r", 0, 200, 1000);
    let hot = b.partition_dir("r", 0);
    wait_for("retention to bring the partition under retention_bytes", || {
        log_bytes(&hot) <= 3000
    });
    // Retention keeps at most retention_bytes (plus the active segment):
    // most of the 200 records are gone.
    let p = partition0(&b, "r");
    let start = p["log_start_offset"].as_u64().unwrap();
    assert_eq!(p["high_watermark"], 200);
    assert_eq!(p["hot_start_offset"].as_u64(), Some(start));
    assert_eq!(p["cold_start_offset"], Value::Null);
    assert!(start > 100, "{p}");
    let message = assert_error(&fetch(&b, "r", 0, "offset=0"), 416, "offset_out_of_range");
    assert!(
        message.contains(&format!("log start offset {start}")),
        "{message}"
    );
    // From the start on, everything is there, in order.
    let (status, body) = fetch(&b, "r", 0, &format!("offset={start}&max_records=1000"));
    assert_eq!(status, 200, "{body}");
    let records = body["records"].as_array().unwrap();
    assert_eq!(records.len() as u64, 200 - start);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["value"], format!("v{}", start + i as u64));
    }
    // Metrics are recorded once a partition's pass ends.
    wait_for("retention metrics", || {
        b.metric_sum("es_retention_segments_deleted_total").unwrap_or(0.0) > 0.0
            && b.metric("es_cleanup_bytes_reclaimed_total{kind=\"retention\"}")
                .unwrap_or(0.0)
                > 0.0
    });
}

#[test]
fn retention_by_time_with_a_short_limit() {
    let b = Broker::start_with(&["--shards", "1", FAST_CLEANUP[0], FAST_CLEANUP[1]]);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "aged", "partitions": 1, "config": { "segment_bytes": 1024, "retention_ms": 200 } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    produce_n(&b, "aged", 0, 100, 1000);
    // Records stamped by the broker's clock age out; only the active
    // segment stays.
    wait_for("time retention", || {
        partition0(&b, "aged")["log_start_offset"].as_u64() > Some(80)
    });
    assert_error(&fetch(&b, "aged", 0, "offset=0"), 416, "offset_out_of_range");
    assert_eq!(partition0(&b, "aged")["high_watermark"], 100);
}

#[test]
fn a_compacted_topic_keeps_the_latest_value_of_every_key() {
    let mut b = Broker::start_with(&["--shards", "2", FAST_CLEANUP[0], FAST_CLEANUP[1]]);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "c", "partitions": 2, "config": { "segment_bytes": 1024, "cleanup_policy": "compact" } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);

    // Keyless records are refused, and nothing of the request is written.
    let got = b.post(
        "/v1/topics/c/records",
        json!({ "records": [ { "key": "a", "value": "1", "partition": 1 }, { "value": "no key", "partition": 0 } ] }),
    );
    let message = assert_error(&got, 400, "invalid_request");
    assert!(message.contains("no key"), "{message}");
    assert_eq!(high_watermarks(&b, "c"), vec![0, 0]);

    // 400 records over 7 keys; then a tombstone for k3.
    produce_n(&b, "c", 0, 400, 7);
    // Compaction reclaims space, and the metric says so. Looked at before
    // the kill: after the restart, what is left to reclaim depends on how
    // far the broker got before it was killed.
    wait_for("compaction to reclaim bytes", || {
        b.metric("es_cleanup_bytes_reclaimed_total{kind=\"compaction\"}")
            .unwrap_or(0.0)
            > 0.0
    });
    produce(
        &b,
        "c",
        json!({ "records": [ { "key": "k3", "value": "", "partition": 0 } ] }),
    );
    produce_n(&b, "c", 400, 30, 7); // more, so the tombstone's segment closes
                                    // kill -9 while compaction may be rewriting: the restart finishes or
                                    // undoes the swap, and compacts again.
    b.kill9();
    b.restart();
    assert_eq!(high_watermarks(&b, "c"), vec![431, 0]);
    wait_for("compaction", || {
        b.metric_sum("es_compaction_runs_total").unwrap_or(0.0) > 0.0
            && fetch_all(&b, "c", 0, "utf8").len() < 200
    });
    let records = fetch_all(&b, "c", 0, "utf8");
    // Offsets keep their place; per key, values stay in order, and the
    // latest of each key is there.
    let mut by_key: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for r in &records {
        by_key
            .entry(r["key"].as_str().unwrap().to_string())
            .or_default()
            .push((
                r["offset"].as_u64().unwrap(),
                r["value"].as_str().unwrap().to_string(),
            ));
    }
    for (key, values) in &by_key {
        let k: usize = key[1..].parse().unwrap();
        let latest = (400..430).rev().find(|i| i % 7 == k).unwrap();
        assert_eq!(
            values.last().unwrap().1,
            format!("v{latest}"),
            "{key}: {values:?}"
        );
        for w in values.windows(2) {
            assert!(w[0].0 < w[1].0);
        }
        for (offset, value) in values {
            if !value.is_empty() {
                let i: u64 = value[1..].parse().unwrap();
                // v<i> was produced at offset i before the tombstone, i+1 after.
                assert_eq!(*offset, if i < 400 { i } else { i + 1 }, "{key}");
            }
        }
    }
    assert_eq!(partition0(&b, "c")["log_start_offset"], 0);
    assert!(
        b.metric("es_cleanup_bytes_reclaimed_total{kind=\"compaction\"}")
            .is_some(),
        "the restarted broker reports what compaction reclaimed"
    );
    // A fetch that starts in a gap answers the records after it.
    let (status, body) = fetch(&b, "c", 0, "offset=1&max_records=5");
    assert_eq!(status, 200, "{body}");
    assert!(body["records"][0]["offset"].as_u64() > Some(0), "{body}");
}

/// The tiered topic's whole life: moved to the cold dir, readable from offset
/// 0 after the hot copy is gone, across restarts (clean and kill -9), cold
/// retention, and delete.
#[test]
fn a_tiered_topic_moves_segments_to_the_cold_dir_and_serves_them() {
    let mut b = Broker::start_with(&["--shards", "2", FAST_CLEANUP[0], FAST_CLEANUP[1]]);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "tt", "partitions": 1, "config": {
            "segment_bytes": 1024, "retention_bytes": 2048, "tiered": true
        } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    produce_n(&b, "tt", 0, 300, 1000);
    wait_for("segments to move to the cold tier", || {
        partition0(&b, "tt")["hot_start_offset"].as_u64() > Some(200)
    });
    let p = partition0(&b, "tt");
    assert_eq!(p["log_start_offset"], 0, "{p}");
    assert_eq!(p["cold_start_offset"], 0, "{p}");
    let cold = b.data_dir().join("cold").join("tt").join("0");
    let hot = b.partition_dir("tt", 0);
    assert!(logs_in(&cold) > 3, "cold segments in {cold:?}");
    assert!(
        !hot.join("00000000000000000000.log").exists(),
        "the hot copy is gone"
    );
    let expect: Vec<String> = (0..300).map(|i| format!("v{i}")).collect();
    assert_eq!(
        values_of(&b, "tt", 0),
        expect,
        "every record from the cold and hot tiers"
    );
    wait_for("tiering metrics", || {
        b.metric_sum("es_tiered_segments_moved_total").unwrap_or(0.0) > 0.0
    });

    // A clean restart keeps both tiers.
    b.sigterm_and_wait();
    b.restart();
    assert_eq!(partition0(&b, "tt")["cold_start_offset"], 0);
    assert_eq!(values_of(&b, "tt", 0), expect);
    // So does kill -9 while more moves.
    produce_n(&b, "tt", 300, 100, 1000);
    b.kill9();
    b.restart();
    let expect: Vec<String> = (0..400).map(|i| format!("v{i}")).collect();
    assert_eq!(values_of(&b, "tt", 0), expect);

    // Cold retention deletes from the cold tier, oldest first.
    let got = b.patch("/v1/topics/tt/config", json!({ "cold_retention_bytes": 2048 }));
    assert_eq!(got.0, 200, "{}", got.1);
    wait_for("both tiers within their limits", || {
        cold_bytes(&cold) <= 2048 && log_bytes(&hot) <= 2048 && partition0(&b, "tt")["log_start_offset"] != 0
    });
    let p = partition0(&b, "tt");
    let start = p["log_start_offset"].as_u64().unwrap();
    assert_eq!(p["cold_start_offset"].as_u64(), Some(start), "{p}");
    assert_error(&fetch(&b, "tt", 0, "offset=0"), 416, "offset_out_of_range");
    let (status, body) = fetch(&b, "tt", 0, &format!("offset={start}&max_records=2"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"][0]["value"], format!("v{start}"));
    wait_for("cold retention metrics", || {
        b.metric("es_cleanup_bytes_reclaimed_total{kind=\"cold_retention\"}")
            .unwrap_or(0.0)
            > 0.0
    });

    // Deleting the topic deletes its cold data; the name starts afresh.
    let got = b.delete("/v1/topics/tt");
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(logs_in(&cold), 0, "cold data deleted");
    create_topic(&b, "tt", 1);
    let p = partition0(&b, "tt");
    assert_eq!(
        (p["log_start_offset"].clone(), p["cold_start_offset"].clone()),
        (json!(0), Value::Null)
    );
    assert_eq!(p["high_watermark"], 0);
}

#[test]
fn cold_dir_flag_puts_the_cold_tier_elsewhere() {
    let cold = tempfile::tempdir().unwrap();
    let cold_arg = cold.path().display().to_string();
    let b = Broker::start_with(&[
        "--shards",
        "1",
        FAST_CLEANUP[0],
        FAST_CLEANUP[1],
        "--cold-dir",
        &cold_arg,
    ]);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "x", "partitions": 1, "config": {
            "segment_bytes": 1024, "retention_bytes": 1024, "tiered": true
        } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    produce_n(&b, "x", 0, 100, 1000);
    wait_for("a segment in --cold-dir", || {
        logs_in(&cold.path().join("x").join("0")) > 0
    });
    assert!(
        !b.data_dir().join("cold").exists(),
        "nothing in the default cold dir"
    );
    let expect: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
    assert_eq!(values_of(&b, "x", 0), expect);
}

/// A consumer group reads a compacted topic as any other: it pages with
/// `next_offset` (across gaps, while compaction may still run), commits
/// where it stopped, and resumes from the commit, even when the commit
/// points into a gap; reset to earliest and latest work.
#[test]
fn a_consumer_group_reads_a_compacted_topic_unchanged() {
    let b = Broker::start_with(&["--shards", "2", FAST_CLEANUP[0], FAST_CLEANUP[1]]);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "kv", "partitions": 1, "config": { "segment_bytes": 1024, "cleanup_policy": "compact" } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    produce_n(&b, "kv", 0, 300, 5);
    wait_for("compaction", || fetch_all(&b, "kv", 0, "utf8").len() < 100);
    let all = fetch_all(&b, "kv", 0, "utf8");

    let (status, joined) = b.post(
        "/v1/groups/readers/members",
        json!({ "topics": ["kv"], "session_timeout_ms": 30000 }),
    );
    assert_eq!(status, 201, "{joined}");
    let member = joined["member_id"].as_str().unwrap().to_string();
    let generation = joined["generation"].as_u64().unwrap();
    // Read the first page, commit its next_offset, and resume from there.
    let (status, page) = fetch(&b, "kv", 0, "offset=0&max_records=3");
    assert_eq!(status, 200, "{page}");
    let next = page["next_offset"].as_u64().unwrap();
    let (status, v) = b.post(
        "/v1/groups/readers/commits",
        json!({ "member_id": member, "generation": generation,
                "offsets": [{ "topic": "kv", "partition": 0, "offset": next }] }),
    );
    assert_eq!(status, 200, "{v}");
    let (status, v) = b.get("/v1/groups/readers/commits");
    assert_eq!(status, 200, "{v}");
    let committed = v["offsets"][0]["offset"].as_u64().unwrap();
    assert_eq!(committed, next);
    let mut seen: Vec<Value> = page["records"].as_array().unwrap().clone();
    let mut offset = committed;
    loop {
        let (status, page) = fetch(&b, "kv", 0, &format!("offset={offset}&max_records=3"));
        assert_eq!(status, 200, "{page}");
        seen.extend(page["records"].as_array().unwrap().iter().cloned());
        let next = page["next_offset"].as_u64().unwrap();
        if next >= page["high_watermark"].as_u64().unwrap() {
            break;
        }
        assert!(next > offset, "progress past gaps: {page}");
        offset = next;
    }
    // Compaction may still be rewriting segments while we page (it only
    // ever removes superseded records): offsets only grow, and the latest
    // value of every key is read.
    let offsets: Vec<u64> = seen.iter().map(|r| r["offset"].as_u64().unwrap()).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    for i in 295..300 {
        assert!(seen.iter().any(|r| r["value"] == format!("v{i}")), "latest v{i}");
    }
    // A commit in a gap resumes at the next record after it.
    // (offset in a gap, the first record after it)
    let mut expected_next = 0;
    let mut gap = None;
    for r in &all {
        let o = r["offset"].as_u64().unwrap();
        if o > expected_next {
            gap = Some((expected_next, o));
            break;
        }
        expected_next = o + 1;
    }
    let gap = gap.expect("compaction left a gap");
    let (status, v) = b.post(
        "/v1/groups/readers/commits",
        json!({ "member_id": member, "generation": generation,
                "offsets": [{ "topic": "kv", "partition": 0, "offset": gap.0 }] }),
    );
    assert_eq!(status, 200, "{v}");
    let (status, page) = fetch(&b, "kv", 0, &format!("offset={}&max_records=1", gap.0));
    assert_eq!(status, 200, "{page}");
    let first = page["records"][0]["offset"].as_u64().unwrap();
    assert!(first >= gap.1, "resumes after the gap: {page}");
    // Reset (of an empty group) to earliest and latest.
    let (status, v) = b.delete(&format!("/v1/groups/readers/members/{member}"));
    assert_eq!(status, 200, "{v}");
    let (status, v) = b.post(
        "/v1/groups/readers/reset",
        json!({ "topic": "kv", "to": "earliest" }),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["offsets"][0]["offset"], 0);
    let (status, v) = b.post(
        "/v1/groups/readers/reset",
        json!({ "topic": "kv", "to": "latest" }),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["offsets"][0]["offset"], 300);
}
