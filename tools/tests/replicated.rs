//! A replicated partition's log (version 2 batches: Raft entries, blank and
//! membership entries as zero-width control batches between the data
//! entries): a JSONL dump gives exactly its records; an archive restores
//! it byte for byte; a range dump keeps whole entries, so the restored log
//! checks clean; `--exact`, which would cut an entry's batch, is refused.

mod common;

use common::*;
use es_format::batch::{
    encode_control, encode_v2, ProducerStamp, RaftStamp, CONTROL_BLANK, CONTROL_MEMBERSHIP,
};
use es_format::Offset;
use serde_json::Value;

/// Entries `(term, index, batches)`, 0 batches = a control entry; 2
/// records per batch: offsets 0..12.
const ENTRIES: &[(u64, u64, u64)] = &[(1, 1, 0), (1, 2, 2), (2, 3, 0), (2, 4, 1), (2, 5, 3)];

/// Topic `r`'s one segment, as a replica writes it; returns its bytes.
fn replicated_dir(data: &std::path::Path) -> Vec<u8> {
    let dir = partition_dir(data, "r", 0, 1);
    let mut log = Vec::new();
    let mut next = 0u64;
    for &(term, index, batches) in ENTRIES {
        if batches == 0 {
            let kind = if index == 1 {
                CONTROL_MEMBERSHIP
            } else {
                CONTROL_BLANK
            };
            encode_control(
                Offset(next),
                term,
                index,
                kind,
                br#"{"configs":[[1]],"nodes":[1]}"#,
                &mut log,
            );
            continue;
        }
        for b in 0..batches {
            let recs: Vec<_> = (next..next + 2)
                .map(|o| rec(Some(&format!("k{o}")), &format!("value-{o}"), 1000 + o as i64))
                .collect();
            let stamp = RaftStamp {
                term,
                index,
                control: false,
                entry_end: b + 1 == batches,
            };
            encode_v2(Offset(next), &recs, ProducerStamp::NONE, stamp, &mut log);
            next += 2;
        }
    }
    std::fs::write(dir.join(seg_name(0)), &log).unwrap();
    log
}

fn restore(archive: &std::path::Path, new: &std::path::Path) {
    let o = tools(&[
        "restore",
        "-i",
        archive.to_str().unwrap(),
        "--data-dir",
        new.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = tools(&["check", "--data-dir", new.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
}

/// The record offsets of a restored segment file.
fn record_offsets(log: &std::path::Path) -> Vec<u64> {
    let o = tools(&["dump-log", "--json", "--records", log.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["batches"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| {
            b["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["offset"].as_u64().unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_replicated_log_dumps_its_records_and_restores_whole_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let original = replicated_dir(&data);

    // JSONL: the data records only, at dense offsets.
    let out = tmp.path().join("all.jsonl");
    dump_to(&data, &out, &["--format", "jsonl"], 0);
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let offsets: Vec<u64> = lines.iter().map(|l| l["offset"].as_u64().unwrap()).collect();
    assert_eq!(offsets, (0..12).collect::<Vec<_>>());

    // An archive restores the log byte for byte.
    let archive = tmp.path().join("all.tar");
    dump_to(&data, &archive, &[], 0);
    let new = tmp.path().join("new");
    restore(&archive, &new);
    let restored = std::fs::read(new.join("topics/r/0").join(seg_name(0))).unwrap();
    assert_eq!(restored, original);

    // A range that ends inside entry 5 (offsets 6..12, three batches)
    // keeps that entry whole: the restored log checks clean and holds it.
    let archive = tmp.path().join("range.tar");
    dump_to(&data, &archive, &["--from-offset", "5", "--to-offset", "8"], 0);
    let new = tmp.path().join("new-range");
    restore(&archive, &new);
    let dir = new.join("topics/r/0");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert_eq!(record_offsets(&dir.join(&names[0])), (4..12).collect::<Vec<_>>());

    // --exact would cut a batch of an entry: refused, nothing written.
    let archive = tmp.path().join("exact.tar");
    let o = dump_to(
        &data,
        &archive,
        &["--from-offset", "7", "--to-offset", "8", "--exact"],
        2,
    );
    assert!(stderr(&o).contains("--exact"), "{}", stderr(&o));
    assert!(!archive.exists(), "nothing written");
}
