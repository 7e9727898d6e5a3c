//! Shared by the es-tools tests: segments built with es-format's encoder,
//! data dirs laid out as the broker lays them out, and the es-tools binary
//! run as a user runs it.

#![allow(dead_code)]

pub mod broker;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use es_format::batch::{encode, ProducerStamp, Record};
use es_format::Offset;

/// Runs `es-tools` with `args`.
pub fn tools(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_es-tools"))
        .args(args)
        .output()
        .expect("run es-tools")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("an exit code")
}

/// A record with `key`, `value` and timestamp `ts`.
pub fn rec(key: Option<&str>, value: &str, ts: i64) -> Record {
    Record {
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.as_bytes().to_vec(),
        timestamp_ms: ts,
    }
}

/// `batches` batches of `per` records each, from offset `base`, appended
/// to `out`; returns the position of each batch.
pub fn batches(out: &mut Vec<u8>, base: u64, batches: u64, per: u64) -> Vec<usize> {
    let mut at = Vec::new();
    for b in 0..batches {
        at.push(out.len());
        let first = base + b * per;
        let recs: Vec<Record> = (0..per)
            .map(|i| {
                let o = first + i;
                rec(Some(&format!("k{o}")), &format!("value-{o}"), 1000 + o as i64)
            })
            .collect();
        encode(Offset(first), &recs, ProducerStamp::NONE, out);
    }
    at
}

/// `<dir>/topics/<topic>/<p>`, with `meta.json` for `partitions`.
pub fn partition_dir(data: &Path, topic: &str, p: u32, partitions: u32) -> PathBuf {
    let tdir = data.join("topics").join(topic);
    std::fs::create_dir_all(tdir.join(p.to_string())).unwrap();
    let meta = serde_json::json!({
        "name": topic, "partitions": partitions, "replication_factor": 1,
        "config": {"segment_bytes": 1073741824u64, "cleanup_policy": "delete",
                   "delete_retention_ms": 86400000u64, "tiered": false}
    });
    std::fs::write(tdir.join("meta.json"), meta.to_string()).unwrap();
    tdir.join(p.to_string())
}

/// The segment file name of `base`.
pub fn seg_name(base: u64) -> String {
    format!("{base:020}.log")
}
