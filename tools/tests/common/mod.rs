//! Shared by the es-tools tests: segments built with es-format's encoder,
//! data dirs laid out as the broker lays them out, and the es-tools binary
//! run as a user runs it.

#![allow(dead_code)]

pub mod broker;

use std::collections::BTreeMap;
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

/// Runs `es-tools` with `args` and asserts it exits 0 (its output in
/// the message if not).
pub fn tools_ok(args: &[&str]) -> Output {
    let o = tools(args);
    assert_eq!(code(&o), 0, "es-tools {args:?}: {}{}", stdout(&o), stderr(&o));
    o
}

/// Every file under `dir` (but `.lock`) and its bytes.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().unwrap() != ".lock" {
                out.insert(
                    p.strip_prefix(dir).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
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

/// A data dir with topic `t` (one partition, three segments of four
/// batches of two records: offsets 0..24) and a group commit; returns the
/// segment files' bytes.
pub fn small_dir(data: &Path) -> Vec<Vec<u8>> {
    let dir = partition_dir(data, "t", 0, 1);
    let mut logs = Vec::new();
    for s in 0..3u64 {
        let mut log = Vec::new();
        batches(&mut log, s * 8, 4, 2);
        std::fs::write(dir.join(seg_name(s * 8)), &log).unwrap();
        logs.push(log);
    }
    std::fs::create_dir_all(data.join("groups")).unwrap();
    let g = serde_json::json!({"name": "g", "offsets": [{"topic": "t", "partition": 0, "offset": 5}]});
    std::fs::write(data.join("groups/g.json"), g.to_string()).unwrap();
    logs
}

/// Dumps `data` to `archive`; panics unless it exits `want`.
pub fn dump_to(data: &Path, archive: &Path, extra: &[&str], want: i32) -> Output {
    let mut args = vec![
        "dump",
        "--data-dir",
        data.to_str().unwrap(),
        "-o",
        archive.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = tools(&args);
    assert_eq!(code(&o), want, "{}{}", stdout(&o), stderr(&o));
    o
}

/// Restores `archive` into `data` (`extra`: more flags); panics unless it
/// exits `want`.
pub fn restore_to(archive: &Path, data: &Path, extra: &[&str], want: i32) -> Output {
    let mut args = vec![
        "restore",
        "-i",
        archive.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = tools(&args);
    assert_eq!(code(&o), want, "{}{}", stdout(&o), stderr(&o));
    o
}
