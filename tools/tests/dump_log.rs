//! `es-tools dump-log`: one line per batch on a known segment (the worked
//! example of docs/storage.md), records as UTF-8 or hex, JSON output, and
//! the end of the log as recovery would find it.

mod common;

use common::*;
use es_format::batch::{encode, ProducerStamp, Record};
use es_format::Offset;

/// docs/storage.md's worked example: one record, key "k", value "hi", ts 1000.
fn worked_example() -> Vec<u8> {
    let mut buf = Vec::new();
    encode(
        Offset(0),
        &[rec(Some("k"), "hi", 1000)],
        ProducerStamp::NONE,
        &mut buf,
    );
    assert_eq!(buf.len(), 79);
    buf
}

#[test]
fn a_known_segment_prints_one_line_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(seg_name(0));
    let mut log = worked_example();
    let stamp = ProducerStamp {
        producer_id: 7,
        epoch: 2,
        base_sequence: 5,
    };
    let binary = Record {
        key: None,
        value: vec![0xff, 0x00, 0x10],
        timestamp_ms: 2000,
    };
    encode(Offset(1), &[binary, rec(Some("é"), "", 1500)], stamp, &mut log);
    std::fs::write(&path, &log).unwrap();

    let o = tools(&["dump-log", path.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "base=0 last=0 count=1 position=0 size=79 crc=0xb54a72bc ok=true max_ts=1000 producer=-"
    );
    assert!(
        lines[1].starts_with("base=1 last=2 count=2 position=79 size="),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].ends_with("ok=true max_ts=2000 producer=7/2/5"),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        format!(
            "end: valid_bytes={0} file_bytes={0} next_offset=3 tail=clean",
            log.len()
        )
    );

    let o = tools(&["dump-log", "--records", path.to_str().unwrap()]);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "  offset=0 ts=1000 key=\"k\" value=\"hi\"");
    assert_eq!(lines[3], "  offset=1 ts=2000 key=null value=hex:ff0010");
    assert_eq!(lines[4], "  offset=2 ts=1500 key=\"é\" value=\"\"");
}

#[test]
fn json_output_and_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(seg_name(10));
    let mut log = Vec::new();
    batches(&mut log, 10, 3, 2);
    let whole = log.len();
    let mut torn = Vec::new();
    batches(&mut torn, 16, 1, 1);
    log.extend_from_slice(&torn[..torn.len() - 3]);
    std::fs::write(&path, &log).unwrap();

    let o = tools(&["dump-log", "--json", "--records", path.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "a torn tail is what recovery trims: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let b = v["batches"].as_array().unwrap();
    assert_eq!(b.len(), 4, "three good batches and the torn one");
    assert_eq!(b[0]["base"], 10);
    assert_eq!(b[0]["records"][1]["offset"], 11);
    assert_eq!(b[0]["records"][1]["key"]["utf8"], "k11");
    assert_eq!(b[3]["ok"], false);
    assert_eq!(v["end"]["tail"], "torn");
    assert_eq!(v["end"]["valid_bytes"], whole);
    assert_eq!(v["end"]["trimmed_tail_bytes"], log.len() - whole);
    assert_eq!(v["end"]["next_offset"], 16);
}

#[test]
fn corruption_followed_by_good_batches_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(seg_name(0));
    let mut log = Vec::new();
    let at = batches(&mut log, 0, 4, 1);
    log[at[1] + 60] ^= 0x01; // a record byte of the second batch
    std::fs::write(&path, &log).unwrap();
    let o = tools(&["dump-log", path.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    assert!(out.contains(&format!("position={} ", at[1])), "{out}");
    assert!(out.contains("tail=corrupt"), "{out}");
    assert!(out.contains("expected_offset=1"), "{out}");
    assert!(out.contains("checksum mismatch"), "{out}");
}

#[test]
fn a_missing_file_exits_2() {
    let o = tools(&["dump-log", "/nonexistent/00000000000000000000.log"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("/nonexistent"), "{}", stderr(&o));
    let o = tools(&["dump-log"]);
    assert_eq!(code(&o), 2, "usage");
}
