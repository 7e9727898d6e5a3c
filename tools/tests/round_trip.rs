//! The contract of dump and restore: a stopped broker's data dir, dumped
//! and restored into a fresh dir, gives a broker that serves every record
//! identically (offset, timestamp, key, value), describes every partition
//! the same (log start, hot and cold start, high watermark), has the same
//! group commits, and still deduplicates a retry of an idempotent
//! producer's last batch. Three topics: one plain, one compacted with
//! tombstones, one tiered with segments in the cold tier. `dump -o - |
//! restore -i -` gives the same dir as the file path, and so does a gzip'd
//! archive.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use common::broker::{all_records, wait_until, Broker};
use common::*;
use serde_json::{json, Value};

const NO_CLEANUP: &[&str] = &["--cleanup-interval-ms", "86400000"];

/// What a client sees of a broker: records, descriptions, commits.
fn snapshot(b: &Broker) -> Value {
    let mut out = BTreeMap::new();
    for (t, parts) in [("plain", 2), ("compacted", 1), ("tiered", 1)] {
        let d = b.ok("GET", &format!("/v1/topics/{t}"), None);
        out.insert(format!("{t}/describe"), d["partitions"].clone());
        out.insert(format!("{t}/config"), d["config"].clone());
        for p in 0..parts {
            out.insert(format!("{t}/{p}/records"), Value::Array(all_records(b, t, p)));
        }
    }
    for g in ["g1", "g2"] {
        out.insert(
            format!("{g}/commits"),
            b.ok("GET", &format!("/v1/groups/{g}/commits"), None),
        );
    }
    serde_json::to_value(out).unwrap()
}

fn produce(b: &Broker, topic: &str, records: Value) -> Value {
    b.ok(
        "POST",
        &format!("/v1/topics/{topic}/records"),
        Some(json!({ "records": records })),
    )
}

/// Fills a broker on `data`; returns the producer's last request and its answer.
fn fill(data: &Path) -> (Value, Value) {
    let mut b = Broker::start_with(data, None, &["--cleanup-interval-ms", "100"]);
    let small = json!({"segment_bytes": 1024});
    b.ok(
        "POST",
        "/v1/topics",
        Some(json!({"name": "plain", "partitions": 2, "config": small})),
    );
    b.ok(
        "POST",
        "/v1/topics",
        Some(json!({"name": "compacted", "partitions": 1,
                    "config": {"segment_bytes": 1024, "cleanup_policy": "compact"}})),
    );
    b.ok(
        "POST",
        "/v1/topics",
        Some(json!({"name": "tiered", "partitions": 1,
                    "config": {"segment_bytes": 1024, "tiered": true, "retention_bytes": 2048}})),
    );
    for i in 0..40 {
        let v = format!("value-{i}-{}", "x".repeat(60));
        produce(&b, "plain", json!([{"key": format!("k{i}"), "value": v}]));
        produce(
            &b,
            "tiered",
            json!([{"key": format!("k{i}"), "value": v, "timestamp": 1_700_000_000_000i64 + i}]),
        );
        let value = if i % 7 == 3 { String::new() } else { v }; // an empty value is a tombstone
        produce(
            &b,
            "compacted",
            json!([{"key": format!("k{}", i % 5), "value": value}]),
        );
    }
    wait_until("segments to reach the cold tier", || {
        let d = b.ok("GET", "/v1/topics/tiered", None);
        d["partitions"][0]["cold_start_offset"].as_u64().map(|_| ())
    });
    b.stop();
    // Without cleanup from here on, what the clients see stays put.
    let mut b = Broker::start_with(data, None, NO_CLEANUP);
    b.ok(
        "POST",
        "/v1/groups/g1/commits",
        Some(json!({"offsets": [
        {"topic": "plain", "partition": 0, "offset": 5}, {"topic": "plain", "partition": 1, "offset": 3}]})),
    );
    b.ok(
        "POST",
        "/v1/groups/g2/commits",
        Some(json!({"offsets": [{"topic": "tiered", "partition": 0, "offset": 7}]})),
    );
    let pid = b.ok("POST", "/v1/producers", None);
    let mut last = Value::Null;
    let mut answer = Value::Null;
    for seq in [0, 2] {
        last = json!({"records": [{"value": format!("p{seq}"), "partition": 0}, {"value": format!("p{}", seq + 1), "partition": 0}],
                      "producer_id": pid["producer_id"], "epoch": pid["epoch"], "sequence": seq});
        answer = b.ok("POST", "/v1/topics/plain/records", Some(last.clone()));
    }
    b.stop();
    (last, answer)
}

#[test]
fn dump_restore_round_trip_serves_the_same_data() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (last, answer) = fill(&data);
    let mut b = Broker::start_with(&data, None, NO_CLEANUP);
    let before = snapshot(&b);
    b.stop();
    let plain: usize = (0..2)
        .map(|p| before[format!("plain/{p}/records")].as_array().unwrap().len())
        .sum();
    assert_eq!(plain, 44, "40 records and the producer's 4");
    let compacted = before["compacted/0/records"].as_array().unwrap();
    assert!(
        compacted.iter().any(|r| r["value"] == ""),
        "tombstones: {compacted:?}"
    );
    assert_eq!(
        before["tiered/0/records"].as_array().unwrap().len(),
        40,
        "from the cold start on"
    );
    assert!(
        !before["tiered/describe"][0]["cold_start_offset"].is_null(),
        "a cold tier: {}",
        before["tiered/describe"]
    );

    let archive = tmp.path().join("a.tar");
    tools_ok(&[
        "dump",
        "--data-dir",
        data.to_str().unwrap(),
        "-o",
        archive.to_str().unwrap(),
    ]);
    tools_ok(&["verify", "-i", archive.to_str().unwrap(), "--deep"]);
    let new = tmp.path().join("new");
    restore_to(&archive, &new, &[], 0);
    tools_ok(&["check", "--data-dir", new.to_str().unwrap()]);
    let restored = tree(&new);

    let mut b = Broker::start_with(&new, None, NO_CLEANUP);
    let after = snapshot(&b);
    for (k, v) in before.as_object().unwrap() {
        assert_eq!(&after[k], v, "{k} differs after restore");
    }
    // The producer's state came along: its last batch again is a duplicate.
    let again = b.ok("POST", "/v1/topics/plain/records", Some(last));
    assert_eq!(again["offsets"], answer["offsets"], "the retry is deduplicated");
    let d = b.ok("GET", "/v1/topics/plain", None);
    assert_eq!(
        d["partitions"][0]["high_watermark"],
        before["plain/describe"][0]["high_watermark"]
    );
    b.stop();

    // With the cold tier restored to a dir of its own.
    let (new2, cold2) = (tmp.path().join("new2"), tmp.path().join("cold2"));
    restore_to(&archive, &new2, &["--cold-dir", cold2.to_str().unwrap()], 0);
    assert!(!new2.join("cold").exists() && cold2.join("tiered/0").is_dir());
    assert_eq!(
        std::fs::read_dir(&cold2).unwrap().count(),
        1,
        "only the topic's dir: no marker left"
    );
    let mut b = Broker::start_with(&new2, Some(&cold2), NO_CLEANUP);
    let after = snapshot(&b);
    assert_eq!(after, before, "restored with --cold-dir");
    b.stop();

    // The same through a pipe, and gzip'd.
    let piped = tmp.path().join("piped");
    let mut dump = Command::new(env!("CARGO_BIN_EXE_es-tools"))
        .args(["dump", "--data-dir", data.to_str().unwrap(), "-o", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let restore = Command::new(env!("CARGO_BIN_EXE_es-tools"))
        .args(["restore", "-i", "-", "--data-dir", piped.to_str().unwrap()])
        .stdin(dump.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(dump.wait().unwrap().success());
    assert_eq!(code(&restore), 0, "{}{}", stdout(&restore), stderr(&restore));
    assert!(
        tree(&piped) == restored,
        "dump -o - | restore -i - gives the same dir"
    );

    let gz = tmp.path().join("a.tar.gz");
    let o = tools(&[
        "dump",
        "--data-dir",
        data.to_str().unwrap(),
        "-o",
        gz.to_str().unwrap(),
        "--compress",
        "gzip",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(std::fs::read(&gz).unwrap()[..2], [0x1f, 0x8b]);
    let o = tools(&["verify", "-i", gz.to_str().unwrap(), "--json"]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let unzipped = tmp.path().join("unzipped");
    restore_to(&gz, &unzipped, &[], 0);
    assert!(
        tree(&unzipped) == restored,
        "a gzip'd archive restores the same dir"
    );
}

#[test]
fn rename_and_select_topics() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().to_path_buf().join("data");
    let dir = partition_dir(&data, "a", 0, 1);
    let mut log = Vec::new();
    batches(&mut log, 0, 3, 2);
    std::fs::write(dir.join(seg_name(0)), &log).unwrap();
    let dir = partition_dir(&data, "b", 0, 1);
    std::fs::write(dir.join(seg_name(0)), &log).unwrap();
    std::fs::create_dir_all(data.join("groups")).unwrap();
    std::fs::write(
        data.join("groups/g.json"),
        json!({"name": "g", "offsets": [{"topic": "a", "partition": 0, "offset": 2}, {"topic": "b", "partition": 0, "offset": 1}]}).to_string(),
    )
    .unwrap();
    let archive = tmp.path().join("a.tar");
    assert_eq!(
        code(&tools(&[
            "dump",
            "--data-dir",
            data.to_str().unwrap(),
            "-o",
            archive.to_str().unwrap()
        ])),
        0
    );
    let new = tmp.path().join("new");
    let o = restore_to(&archive, &new, &["--topic", "a", "--rename", "a=a2", "--json"], 0);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["partitions"][0]["topic"], "a2");
    assert_eq!(v["partitions"][0]["records"], 6);
    assert!(new.join("topics/a2/0/00000000000000000000.index").exists());
    assert!(!new.join("topics/b").exists());
    let meta: Value =
        serde_json::from_slice(&std::fs::read(new.join("topics/a2/meta.json")).unwrap()).unwrap();
    assert_eq!(meta["name"], "a2");
    let g: Value = serde_json::from_slice(&std::fs::read(new.join("groups/g.json")).unwrap()).unwrap();
    assert_eq!(
        g["offsets"],
        json!([{"topic": "a2", "partition": 0, "offset": 2}])
    );
    // A target that is not empty is refused, and left alone.
    let o = restore_to(&archive, &new, &[], 2);
    assert!(stderr(&o).contains("is not empty"), "{}", stderr(&o));
}
