//! `dump --format jsonl`: one JSON line per record, every field as stored
//! (offset, timestamp, key and value in base64, the producer id and each
//! record's sequence), the selection and `--exact` ranges as for the
//! archive, and nothing written when corruption stops the dump.

mod common;

use base64::Engine;
use common::*;
use es_format::batch::{encode, ProducerStamp};
use es_format::Offset;
use serde_json::Value;

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn every_record_as_a_json_line() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    small_dir(&data); // topic t: offsets 0..24 in three segments
                      // Topic u: one batch of an idempotent producer (id 7, sequences 10..13).
    let dir = partition_dir(&data, "u", 0, 1);
    let mut log = Vec::new();
    let recs = vec![rec(Some("a"), "x", 5), rec(None, "y", 6), rec(Some("c"), "", 7)];
    let stamp = ProducerStamp {
        producer_id: 7,
        epoch: 2,
        base_sequence: 10,
    };
    encode(Offset(0), &recs, stamp, &mut log);
    std::fs::write(dir.join(seg_name(0)), &log).unwrap();

    let out = tmp.path().join("all.jsonl");
    let o = dump_to(&data, &out, &["--format", "jsonl"], 0);
    assert!(stdout(&o).contains("27 records"), "{}", stdout(&o));
    let all = lines(&out);
    assert_eq!(all.len(), 27);
    let t: Vec<&Value> = all.iter().filter(|l| l["t"] == "t").collect();
    for (i, l) in t.iter().enumerate() {
        assert_eq!(l["p"], 0);
        assert_eq!(l["offset"], i as u64);
        assert_eq!(l["ts"], 1000 + i as i64);
        assert_eq!(l["key_b64"], b64(&format!("k{i}")));
        assert_eq!(l["value_b64"], b64(&format!("value-{i}")));
        assert_eq!(l["producer_id"], Value::Null);
        assert_eq!(l["seq"], Value::Null);
    }
    let u: Vec<&Value> = all.iter().filter(|l| l["t"] == "u").collect();
    assert_eq!(u[1]["key_b64"], Value::Null, "a record without a key");
    assert_eq!(u[2]["value_b64"], "", "an empty value");
    for (i, l) in u.iter().enumerate() {
        assert_eq!(
            (l["producer_id"].as_i64(), l["seq"].as_i64()),
            (Some(7), Some(10 + i as i64)),
            "{l}"
        );
    }

    // A range with --exact: exactly the records asked for.
    let out = tmp.path().join("range.jsonl");
    dump_to(
        &data,
        &out,
        &[
            "--format",
            "jsonl",
            "--topic",
            "t",
            "--from-offset",
            "3",
            "--to-offset",
            "12",
            "--exact",
        ],
        0,
    );
    let offsets: Vec<u64> = lines(&out)
        .iter()
        .map(|l| l["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, (3..=12).collect::<Vec<_>>());

    // Corruption with --on-corrupt fail: no record at all, exit 1.
    let seg = data.join("topics/t/0").join(seg_name(8));
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[60] ^= 1;
    std::fs::write(&seg, &bytes).unwrap();
    let out = tmp.path().join("bad.jsonl");
    dump_to(&data, &out, &["--format", "jsonl"], 1);
    assert_eq!(std::fs::read(&out).unwrap(), b"");
}
