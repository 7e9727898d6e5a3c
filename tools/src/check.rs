//! `es-tools check --data-dir D [--cold-dir C] [--json]`: an offline fsck
//! of a stopped broker's data dir. Every segment, hot and cold, is
//! scanned as recovery scans it (`partition.rs`); indexes are checked
//! against their logs; every JSON file the broker reads must parse; the
//! groups' committed offsets must name topics and partitions that exist.
//! Writes nothing (but an empty `.lock`, if the dir has none).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use crate::datadir::{self, cold_root, rel, COMPACTION_SWAP};
use crate::fail::{Fail, Outcome};
use crate::groups;
use crate::partition::{self, Tier, Which};
use crate::report::{count, Report};

/// What was looked at.
#[derive(Default, Debug)]
struct Totals {
    topics: u64,
    partitions: u64,
    segments: u64,
    cold_segments: u64,
    batches: u64,
    records: u64,
    bytes: u64,
}

pub fn run(data: &Path, cold: Option<&Path>, as_json: bool, out: &mut dyn Write) -> Result<Outcome, Fail> {
    let _lock = datadir::lock(data)?;
    let mut report = Report::default();
    let mut totals = Totals::default();
    // topic -> partitions, as meta.json says.
    let mut topics: BTreeMap<String, u32> = BTreeMap::new();
    let cold = cold_root(data, cold);
    for topic in datadir::topics(data)? {
        let tdir = data.join("topics").join(&topic);
        let Some(partitions) = meta(data, &tdir, &topic, &mut report)? else {
            continue;
        };
        topics.insert(topic.clone(), partitions);
        totals.topics += 1;
        for p in datadir::partitions(&tdir)? {
            totals.partitions += 1;
            if p >= partitions {
                report.problem(
                    "unknown_partition",
                    json!({"topic": topic, "partition": p, "error": format!("meta.json says {partitions} partitions")}),
                );
            }
            for (tier, dir) in [
                (Tier::Hot, tdir.join(p.to_string())),
                (Tier::Cold, cold.join(&topic).join(p.to_string())),
            ] {
                if dir.join(COMPACTION_SWAP).exists() {
                    report.notice(
                        "pending_compaction_swap",
                        json!({"file": rel(data, &dir.join(COMPACTION_SWAP)),
                               "action": "an interrupted compaction swap: start es-broker once to finish it; this partition was not scanned"}),
                    );
                    continue;
                }
                let which = Which {
                    root: data,
                    topic: &topic,
                    partition: p,
                    tier,
                };
                for s in partition::scan(&dir, which, &mut report)? {
                    match tier {
                        Tier::Hot => totals.segments += 1,
                        Tier::Cold => totals.cold_segments += 1,
                    }
                    totals.batches += s.batches;
                    totals.records += s.records;
                    totals.bytes += s.scanned.end;
                }
            }
        }
    }
    check_groups(data, &topics, &mut report)?;
    check_json_files(data, &mut report)?;
    if as_json {
        let mut m = report.json_fields();
        m.insert("data_dir".into(), json!(data.display().to_string()));
        m.insert(
            "totals".into(),
            json!({"topics": totals.topics, "partitions": totals.partitions, "segments": totals.segments,
                   "cold_segments": totals.cold_segments, "batches": totals.batches,
                   "records": totals.records, "bytes": totals.bytes}),
        );
        writeln!(out, "{}", Value::Object(m))?;
    } else {
        report.write_lines(out)?;
        let verdict = if report.is_clean() {
            "clean".to_string()
        } else {
            count(report.problems.len(), "problem")
        };
        writeln!(
            out,
            "check: {} topics, {} partitions, {} segments ({} cold), {} batches, {} records, {} bytes: {verdict}",
            totals.topics,
            totals.partitions,
            totals.segments,
            totals.cold_segments,
            totals.batches,
            totals.records,
            totals.bytes
        )?;
    }
    Ok(if report.is_clean() {
        Outcome::Clean
    } else {
        Outcome::Problems
    })
}

/// The partition count `meta.json` gives, or `None` (reported) when the
/// topic is being deleted or its metadata is missing or damaged.
fn meta(data: &Path, tdir: &Path, topic: &str, report: &mut Report) -> Result<Option<u32>, Fail> {
    let path = tdir.join("meta.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if tdir.join("meta.json.deleted").exists() {
                report.notice(
                    "deleted_topic",
                    json!({"topic": topic, "action": "the broker finishes its delete at start"}),
                );
            } else {
                report.problem(
                    "missing_meta",
                    json!({"topic": topic, "file": rel(data, &path), "error": "no meta.json: the broker does not serve this topic"}),
                );
            }
            return Ok(None);
        }
        Err(e) => return Err(Fail::io(&path, e)),
    };
    let parsed: Result<Value, _> = serde_json::from_slice(&bytes);
    let partitions = parsed
        .as_ref()
        .ok()
        .filter(|v| v.get("name").and_then(Value::as_str) == Some(topic))
        .and_then(|v| v.get("partitions")?.as_u64())
        .and_then(|n| u32::try_from(n).ok());
    if partitions.is_none() {
        let error = match parsed {
            Err(e) => format!("does not parse: {e}"),
            Ok(_) => "no name equal to the directory's, or no partition count".into(),
        };
        report.problem("bad_json", json!({"file": rel(data, &path), "error": error}));
    }
    Ok(partitions)
}

/// Group commits name topics and partitions that exist; the groups files
/// decode.
fn check_groups(data: &Path, topics: &BTreeMap<String, u32>, report: &mut Report) -> Result<(), Fail> {
    let read = groups::read(data)?;
    for (file, error) in &read.damage {
        report.problem(
            "bad_groups_file",
            json!({"file": format!("groups/{file}"), "error": error}),
        );
    }
    for (group, offsets) in &read.groups {
        for (topic, p) in offsets.keys() {
            let error = match topics.get(topic) {
                None => "its topic does not exist",
                Some(&n) if *p >= n => "its partition does not exist",
                Some(_) => continue,
            };
            report.problem(
                "group_commit_unknown_topic",
                json!({"group": group, "topic": topic, "partition": p, "error": error}),
            );
        }
    }
    Ok(())
}

/// The other JSON files the broker reads: the producer registry and
/// snapshots, the API keys.
fn check_json_files(data: &Path, report: &mut Report) -> Result<(), Fail> {
    let mut files = vec![data.join("producers/registry.json"), data.join("api_keys.json")];
    let pdir = data.join("producers");
    for topic in datadir::names(&pdir)? {
        let tdir = pdir.join(&topic);
        if tdir.is_dir() {
            for name in datadir::names(&tdir)? {
                if name.ends_with(".json") {
                    files.push(tdir.join(name));
                }
            }
        }
    }
    for path in files {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Fail::io(&path, e)),
        };
        let parsed = if path.ends_with("api_keys.json") {
            es_keys::file::parse(&bytes).map(|_| ())
        } else {
            serde_json::from_slice::<Value>(&bytes)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        if let Err(e) = parsed {
            report.problem(
                "bad_json",
                json!({"file": rel(data, &path), "error": format!("does not parse: {e}")}),
            );
        }
    }
    Ok(())
}
