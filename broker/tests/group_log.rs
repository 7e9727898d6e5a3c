//! The consumer groups log through the real broker: committed offsets live
//! in one append-only log per shard (`<data-dir>/groups/shard-<i>-of-<n>.log`),
//! never a file per group; they survive kill -9 and a change of `--shards`;
//! the log is compacted as groups come and go, so it stays the size of the
//! groups that exist; the `<group>.json` files of an older broker load and
//! move into it; a torn tail after a crash is trimmed, and damage with
//! intact records after it stops the start (exit code 3) until
//! `--accept-data-loss`, which keeps the damaged bytes aside.
//!
//! Every broker here runs with a small compaction step
//! (`ES_TEST_GROUP_LOG_COMPACT_BYTES`, a debug-build hook read in
//! broker/src/groups/store.rs) so a few hundred records compact a log.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::{start_refused, Broker};
use serde_json::{json, Value};

const COMPACT_BYTES: u64 = 4096;

fn start(shards: usize) -> Broker {
    std::env::set_var("ES_TEST_GROUP_LOG_COMPACT_BYTES", COMPACT_BYTES.to_string());
    Broker::start(shards)
}

fn groups_dir(b: &Broker) -> std::path::PathBuf {
    b.data_dir().join("groups")
}

/// The files in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn log_names(shards: usize) -> Vec<String> {
    let mut v: Vec<String> = (0..shards)
        .map(|i| format!("shard-{i}-of-{shards}.log"))
        .collect();
    v.sort();
    v
}

fn commit(b: &Broker, group: &str, partition: u32, offset: u64) {
    let (status, v) = b.post(
        &format!("/v1/groups/{group}/commits"),
        json!({"offsets": [{"topic": "t", "partition": partition, "offset": offset}]}),
    );
    assert_eq!(status, 200, "commit to {group}: {v}");
}

/// Every group's committed offsets.
fn all_commits(b: &Broker) -> BTreeMap<String, Value> {
    let (status, list) = b.get("/v1/groups");
    assert_eq!(status, 200, "{list}");
    list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let name = g["name"].as_str().unwrap().to_string();
            let (status, v) = b.get(&format!("/v1/groups/{name}/commits"));
            assert_eq!(status, 200, "{v}");
            (name, v["offsets"].clone())
        })
        .collect()
}

/// Contract: commits of many groups go to one log per shard, nothing else
/// in `groups/`; every acknowledged commit reads back after kill -9, and
/// after a restart with another shard count (whose logs replace the old
/// ones).
#[test]
fn commits_go_to_one_log_per_shard_and_survive_kill9_and_a_new_shard_count() {
    let mut b = start(2);
    assert_eq!(b.post("/v1/topics", json!({"name": "t", "partitions": 2})).0, 201);
    for i in 0..40u64 {
        commit(&b, &format!("g-{i}"), (i % 2) as u32, i);
        if i % 3 == 0 {
            commit(&b, &format!("g-{i}"), 1 - (i % 2) as u32, i + 100);
        }
    }
    let before = all_commits(&b);
    assert_eq!(before.len(), 40);
    assert_eq!(
        files(&groups_dir(&b)),
        log_names(2),
        "one log per shard, no file per group"
    );

    b.kill9();
    b.restart();
    assert_eq!(all_commits(&b), before, "acknowledged commits survive kill -9");
    assert_eq!(files(&groups_dir(&b)), log_names(2));

    assert_eq!(b.sigterm_and_wait().code(), Some(0));
    b.restart_with_shards(3);
    assert_eq!(all_commits(&b), before, "and a change of --shards");
    assert_eq!(
        files(&groups_dir(&b)),
        log_names(3),
        "the old shard count's logs are gone"
    );
    commit(&b, "g-0", 0, 7);
    b.kill9();
    b.restart_with_shards(3);
    let mut want = before;
    want.insert(
        "g-0".into(),
        json!([{"topic": "t", "partition": 0, "offset": 7}, {"topic": "t", "partition": 1, "offset": 100}]),
    );
    assert_eq!(all_commits(&b), want);
}

/// Contract: groups created and deleted, over and over, leave a log the
/// size of the groups that remain (compacted while the broker runs, not
/// only at a restart), and those groups keep their offsets.
#[test]
fn the_log_compacts_as_groups_come_and_go() {
    let mut b = start(1);
    assert_eq!(b.post("/v1/topics", json!({"name": "t", "partitions": 1})).0, 201);
    for i in 0..10u64 {
        commit(&b, &format!("keep-{i}"), 0, i);
    }
    let kept = all_commits(&b);
    // Each round appends about 90 bytes: 600 rounds are 13 compaction steps.
    for i in 0..600u64 {
        let g = format!("churn-{i}");
        commit(&b, &g, 0, i);
        let (status, v) = b.delete(&format!("/v1/groups/{g}"));
        assert_eq!(status, 200, "{v}");
    }
    assert!(
        b.metric("es_group_log_compactions_total").unwrap_or(0.0) >= 1.0,
        "the log was compacted while the broker ran"
    );
    let log = groups_dir(&b).join("shard-0-of-1.log");
    let size = fs::metadata(&log).unwrap().len();
    // The ten groups' snapshot, and at most one compaction step more.
    assert!(size <= 2 * COMPACT_BYTES, "{size} bytes after the churn");
    assert_eq!(files(&groups_dir(&b)), log_names(1));
    assert_eq!(all_commits(&b), kept);
    b.kill9();
    b.restart();
    assert_eq!(all_commits(&b), kept, "the compacted log reads back");

    // With no group left, a compaction leaves an empty log.
    for g in kept.keys() {
        assert_eq!(b.delete(&format!("/v1/groups/{g}")).0, 200);
    }
    let compactions = b.metric("es_group_log_compactions_total").unwrap_or(0.0);
    for i in 0..100u64 {
        let g = format!("again-{i}");
        commit(&b, &g, 0, i);
        assert_eq!(b.delete(&format!("/v1/groups/{g}")).0, 200);
    }
    assert!(b.metric("es_group_log_compactions_total").unwrap_or(0.0) > compactions);
    assert!(fs::metadata(&log).unwrap().len() <= COMPACT_BYTES);
    b.kill9();
    b.restart();
    assert!(all_commits(&b).is_empty());
}

/// Contract: the `<group>.json` files of a broker from before the groups
/// log load, and are replaced by the log.
#[test]
fn groups_of_an_older_broker_load_and_move_into_the_log() {
    let mut b = start(2);
    assert_eq!(b.post("/v1/topics", json!({"name": "t", "partitions": 2})).0, 201);
    assert_eq!(b.sigterm_and_wait().code(), Some(0));
    let dir = groups_dir(&b);
    for f in files(&dir) {
        fs::remove_file(dir.join(f)).unwrap();
    }
    for (g, offsets) in [("billing", "[0, 5], [1, 9]"), ("audit", "[1, 2]")] {
        let offsets: Vec<Value> = serde_json::from_str::<Vec<(u32, u64)>>(&format!("[{offsets}]"))
            .unwrap()
            .into_iter()
            .map(|(p, o)| json!({"topic": "t", "partition": p, "offset": o}))
            .collect();
        let file = json!({"name": g, "offsets": offsets});
        fs::write(
            dir.join(format!("{g}.json")),
            serde_json::to_vec_pretty(&file).unwrap(),
        )
        .unwrap();
    }
    b.restart();
    let got = all_commits(&b);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        got["billing"],
        json!([{"topic": "t", "partition": 0, "offset": 5}, {"topic": "t", "partition": 1, "offset": 9}])
    );
    assert_eq!(got["audit"], json!([{"topic": "t", "partition": 1, "offset": 2}]));
    assert_eq!(
        files(&dir),
        log_names(2),
        "the old files are gone, moved into the logs"
    );
    b.kill9();
    b.restart();
    assert_eq!(all_commits(&b), got);
}

/// Contract: a record cut short at the end of the log (a crash in the
/// middle of an append, never acknowledged) is trimmed with a warning and
/// every acknowledged commit before it reads back; a damaged record with
/// intact ones after it stops the start with exit code 3 and changes
/// nothing, until `--accept-data-loss` keeps the bytes from the damage on
/// in `<log>.corrupt-<ms>` and starts without them.
#[test]
fn a_torn_tail_is_trimmed_and_corruption_stops_the_start() {
    let mut b = start(1);
    assert_eq!(b.post("/v1/topics", json!({"name": "t", "partitions": 1})).0, 201);
    commit(&b, "a", 0, 1);
    commit(&b, "b", 0, 2);
    commit(&b, "c", 0, 3);
    let before = all_commits(&b);
    b.kill9();
    let log = groups_dir(&b).join("shard-0-of-1.log");
    let whole = fs::read(&log).unwrap();
    // The first 30 bytes of a record: a length, a checksum, a header.
    let mut torn = whole.clone();
    torn.extend_from_slice(&whole[..30]);
    fs::write(&log, &torn).unwrap();
    b.restart();
    assert_eq!(all_commits(&b), before);
    assert!(b.stderr_text().contains("torn tail"), "{}", b.stderr_text());

    assert_eq!(b.sigterm_and_wait().code(), Some(0));
    let mut bad = fs::read(&log).unwrap();
    bad[10] ^= 0x5a;
    fs::write(&log, &bad).unwrap();
    let (code, out) = start_refused(&b);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("corrupt") && out.contains("--accept-data-loss"),
        "{out}"
    );
    assert!(out.contains(&log.display().to_string()), "names the file: {out}");
    assert_eq!(fs::read(&log).unwrap(), bad, "nothing changed");
    assert_eq!(files(&groups_dir(&b)), log_names(1));

    std::env::set_var("ES_ACCEPT_DATA_LOSS", "true");
    b.restart();
    std::env::remove_var("ES_ACCEPT_DATA_LOSS");
    assert!(
        all_commits(&b).is_empty(),
        "the groups from the damage on are lost"
    );
    let copies: Vec<String> = files(&groups_dir(&b))
        .into_iter()
        .filter(|f| f.starts_with("shard-0-of-1.log.corrupt-"))
        .collect();
    assert_eq!(copies.len(), 1, "{:?}", files(&groups_dir(&b)));
    assert_eq!(fs::read(groups_dir(&b).join(&copies[0])).unwrap(), bad);
    assert_eq!(
        b.metric("es_storage_corruptions_total{found=\"recovery\"}"),
        Some(1.0)
    );
    assert!(
        b.stderr_text().contains("corrupt data quarantined"),
        "{}",
        b.stderr_text()
    );
    commit(&b, "d", 0, 4);
    b.kill9();
    b.restart();
    assert_eq!(all_commits(&b).len(), 1);
}
