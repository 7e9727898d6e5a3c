//! `es-tools check`: a clean dir (synthetic and broker-written), a torn
//! tail at every byte of the last batch reported exactly as recovery would
//! trim it, a flipped bit in a middle segment named by file, position and
//! offset, damaged metadata, and a running broker (exit 2, the broker
//! unaffected).

mod common;

use common::broker::Broker;
use common::*;
use es_format::scan::{block_on_ready, scan, Shape, SliceSource, Tail};
use es_format::Offset;
use serde_json::{json, Value};

/// Three segments of 4 batches of 2 records in `t/0` (offsets 0..24).
fn three_segments(data: &std::path::Path) -> (std::path::PathBuf, Vec<Vec<u8>>) {
    let dir = partition_dir(data, "t", 0, 1);
    let mut logs = Vec::new();
    for s in 0..3u64 {
        let mut log = Vec::new();
        batches(&mut log, s * 8, 4, 2);
        std::fs::write(dir.join(seg_name(s * 8)), &log).unwrap();
        logs.push(log);
    }
    (dir, logs)
}

fn check_json(data: &std::path::Path) -> (i32, Value) {
    let o = tools(&["check", "--data-dir", data.to_str().unwrap(), "--json"]);
    let v = serde_json::from_str(&stdout(&o)).unwrap_or(Value::Null);
    (code(&o), v)
}

#[test]
fn a_clean_dir_is_clean() {
    let tmp = tempfile::tempdir().unwrap();
    three_segments(tmp.path());
    let o = tools_ok(&["check", "--data-dir", tmp.path().to_str().unwrap()]);
    assert!(
        stdout(&o).contains("check: 1 topics, 1 partitions, 3 segments (0 cold), 12 batches, 24 records"),
        "{}",
        stdout(&o)
    );
    let (c, v) = check_json(tmp.path());
    assert_eq!((c, v["status"].as_str()), (0, Some("clean")));
    assert_eq!(v["totals"]["records"], 24);
}

#[test]
fn a_torn_tail_at_every_byte_is_what_recovery_trims() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = three_segments(tmp.path());
    let last = &logs[2];
    let path = dir.join(seg_name(16));
    let mut starts = Vec::new();
    block_on_ready(scan(
        &mut SliceSource(last),
        Offset(16),
        Shape {
            last: true,
            end: None,
        },
        |_, p| starts.push(p),
    ))
    .unwrap();
    let final_batch = *starts.last().unwrap() as usize;
    for cut in final_batch + 1..last.len() {
        std::fs::write(&path, &last[..cut]).unwrap();
        // Recovery's own scan (es-format, as storage runs it) on these bytes.
        let want = block_on_ready(scan(
            &mut SliceSource(&last[..cut]),
            Offset(16),
            Shape {
                last: true,
                end: None,
            },
            |_, _| {},
        ))
        .unwrap();
        assert!(matches!(want.tail, Tail::Torn(_)), "cut {cut}");
        let (c, v) = check_json(tmp.path());
        assert_eq!(c, 0, "a torn tail is not a problem (cut {cut}): {v}");
        let n = v["notices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["kind"] == "torn_tail");
        let n = n.unwrap_or_else(|| panic!("cut {cut}: {v}"));
        assert_eq!(n["position"], want.end, "cut {cut}");
        assert_eq!(n["trimmed_tail_bytes"], cut as u64 - want.end, "cut {cut}");
        assert_eq!(want.end, final_batch as u64);
    }
}

#[test]
fn a_flipped_bit_in_a_middle_segment_names_file_position_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, mut logs) = three_segments(tmp.path());
    // The third batch of the middle segment (offsets 12, 13).
    let mut starts = Vec::new();
    block_on_ready(scan(
        &mut SliceSource(&logs[1]),
        Offset(8),
        Shape {
            last: false,
            end: None,
        },
        |_, p| starts.push(p),
    ))
    .unwrap();
    let at = starts[2] as usize;
    logs[1][at + 70] ^= 0x04;
    std::fs::write(dir.join(seg_name(8)), &logs[1]).unwrap();
    let (c, v) = check_json(tmp.path());
    assert_eq!(c, 1, "{v}");
    let p = &v["problems"][0];
    assert_eq!(p["kind"], "corrupt_batch");
    assert_eq!(p["file"], "topics/t/0/00000000000000000008.log");
    assert_eq!(p["position"], at);
    assert_eq!(p["expected_offset"], 12);
    assert!(p["error"].as_str().unwrap().contains("checksum mismatch"), "{p}");
    let o = tools(&["check", "--data-dir", tmp.path().to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    assert!(out.contains("problem corrupt_batch"), "{out}");
    assert!(out.contains(&format!("position={at}")), "{out}");
    assert!(out.ends_with(": 1 problem\n"), "{out}");
}

#[test]
fn damaged_metadata_and_indexes_are_problems() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = three_segments(tmp.path());
    std::fs::write(tmp.path().join("topics/t/meta.json"), b"{\"name\":").unwrap();
    let (c, v) = check_json(tmp.path());
    assert_eq!(c, 1);
    assert_eq!(v["problems"][0]["kind"], "bad_json", "{v}");
    assert_eq!(v["problems"][0]["file"], "topics/t/meta.json");

    let tmp = tempfile::tempdir().unwrap();
    let (dir2, _) = three_segments(tmp.path());
    // An index whose log_bytes is not its log's length.
    let mut ix = es_format::index_rule::IndexBuilder::new(Offset(0), 4096);
    let mut at = 0u64;
    let mut pos = Vec::new();
    block_on_ready(scan(
        &mut SliceSource(&logs[0]),
        Offset(0),
        Shape {
            last: false,
            end: None,
        },
        |h, p| pos.push((*h, p)),
    ))
    .unwrap();
    for (h, p) in &pos {
        ix.note(h, *p).unwrap();
        at = p + h.batch_len as u64;
    }
    let good = ix.finish(Some(Offset(8)));
    std::fs::write(dir2.join("00000000000000000000.index"), &good).unwrap();
    let (c, v) = check_json(tmp.path());
    assert_eq!((c, v["status"].as_str()), (0, Some("clean")), "{v}");
    std::fs::write(dir2.join("00000000000000000000.log"), &logs[0][..at as usize - 1]).unwrap();
    let (c, v) = check_json(tmp.path());
    assert_eq!(c, 1, "{v}");
    let kinds: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"bad_index") && kinds.contains(&"corrupt_batch"),
        "{v}"
    );
    let _ = dir;
}

#[test]
fn a_running_broker_holds_the_lock_exit_2_and_it_is_unaffected() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut b = Broker::start(&data, None);
    b.ok(
        "POST",
        "/v1/topics",
        Some(json!({"name": "orders", "partitions": 1})),
    );
    let o = tools(&["check", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains(&format!(
            "{} is in use by a running es-broker; stop it",
            data.display()
        )),
        "{}",
        stderr(&o)
    );
    let archive = tmp.path().join("a.tar");
    let o = tools(&[
        "dump",
        "--data-dir",
        data.to_str().unwrap(),
        "-o",
        archive.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2, "dump takes the same lock");
    assert!(
        stderr(&o).contains("is in use by a running es-broker"),
        "{}",
        stderr(&o)
    );
    let v = b.ok(
        "POST",
        "/v1/topics/orders/records",
        Some(json!({"records": [{"key": "k", "value": "v"}]})),
    );
    assert_eq!(v["offsets"][0]["offset"], 0);
    assert!(b.running());
    b.stop();
    let o = tools(&["check", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(
        code(&o),
        0,
        "a stopped broker's dir is clean: {}{}",
        stdout(&o),
        stderr(&o)
    );
}

#[test]
fn a_dir_a_broker_wrote_is_clean_and_groups_name_real_topics() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut b = Broker::start(&data, None);
    b.ok("POST", "/v1/topics", Some(json!({"name": "a", "partitions": 2})));
    for i in 0..20 {
        b.ok(
            "POST",
            "/v1/topics/a/records",
            Some(json!({"records": [{"key": format!("k{i}"), "value": "x".repeat(i * 10)}]})),
        );
    }
    let pid = b.ok("POST", "/v1/producers", None)["producer_id"]
        .as_i64()
        .unwrap();
    b.ok(
        "POST",
        "/v1/topics/a/records",
        Some(json!({"records": [{"value": "p", "partition": 0}], "producer_id": pid, "epoch": 0, "sequence": 0})),
    );
    b.ok(
        "POST",
        "/v1/groups/g1/commits",
        Some(json!({"offsets": [{"topic": "a", "partition": 1, "offset": 3}]})),
    );
    b.stop();
    let (c, v) = check_json(&data);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["totals"]["records"], 21, "{v}");
    // A commit to a topic that is gone.
    std::fs::rename(data.join("topics/a"), tmp.path().join("a-moved")).unwrap();
    let (c, v) = check_json(&data);
    assert_eq!(c, 1, "{v}");
    let p = v["problems"].as_array().unwrap();
    assert!(
        p.iter()
            .any(|p| p["kind"] == "group_commit_unknown_topic" && p["group"] == "g1"),
        "{v}"
    );
}
