//! `restore --merge`: an archive's topics added to a stopped broker's data
//! dir beside its own, as the real broker then serves them. Topics the
//! target holds are left out and reported; `--rename OLD=NEW` restores one
//! beside its namesake, its group commits following; the target's groups
//! gain the commits on the added topics and keep their own; producer ids
//! the added topics know are never issued again, and the target's own
//! producers cannot be taken for the archive's (their ids are retired); a
//! second run adds nothing and changes nothing; a running broker's dir is
//! refused (exit 2).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::broker::{all_records, Broker};
use common::*;
use serde_json::{json, Value};

fn produce(b: &Broker, topic: &str, body: Value) -> Value {
    b.ok("POST", &format!("/v1/topics/{topic}/records"), Some(body))
}

fn commit(b: &Broker, group: &str, offsets: Value) {
    b.ok(
        "POST",
        &format!("/v1/groups/{group}/commits"),
        Some(json!({ "offsets": offsets })),
    );
}

fn commits(b: &Broker, group: &str) -> Value {
    b.ok("GET", &format!("/v1/groups/{group}/commits"), None)["offsets"].clone()
}

fn merge(archive: &Path, target: &Path, extra: &[&str], want: i32) -> Value {
    let mut args = vec![
        "restore",
        "-i",
        archive.to_str().unwrap(),
        "--data-dir",
        target.to_str().unwrap(),
        "--merge",
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = tools(&args);
    assert_eq!(code(&o), want, "{}{}", stdout(&o), stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or(Value::Null)
}

#[test]
fn merge_adds_topics_beside_a_brokers_own() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));

    // The source: topics a (2 partitions) and b, a group, an idempotent producer.
    let mut s = Broker::start(&src, None);
    s.ok("POST", "/v1/topics", Some(json!({"name": "a", "partitions": 2})));
    s.ok("POST", "/v1/topics", Some(json!({"name": "b", "partitions": 1})));
    for i in 0..10 {
        produce(
            &s,
            "a",
            json!({"records": [{"key": format!("k{i}"), "value": format!("a{i}")}]}),
        );
        produce(&s, "b", json!({"records": [{"value": format!("src-b{i}")}]}));
    }
    commit(
        &s,
        "g1",
        json!([{"topic": "a", "partition": 0, "offset": 3}, {"topic": "b", "partition": 0, "offset": 2}]),
    );
    let pid = s.ok("POST", "/v1/producers", None);
    for seq in [0, 2] {
        produce(
            &s,
            "a",
            json!({"records": [{"value": "p", "partition": 0}, {"value": "q", "partition": 0}],
                   "producer_id": pid["producer_id"], "epoch": pid["epoch"], "sequence": seq}),
        );
    }
    let src_records: BTreeMap<String, Vec<Value>> = [("a", 0), ("a", 1), ("b", 0)]
        .iter()
        .map(|(t, p)| (format!("{t}/{p}"), all_records(&s, t, *p)))
        .collect();
    s.stop();

    // The target: its own topic b, groups g1 and g3, a producer of its own.
    let mut t = Broker::start(&dst, None);
    t.ok("POST", "/v1/topics", Some(json!({"name": "b", "partitions": 1})));
    for i in 0..5 {
        produce(&t, "b", json!({"records": [{"value": format!("dst-b{i}")}]}));
    }
    commit(&t, "g1", json!([{"topic": "b", "partition": 0, "offset": 1}]));
    commit(&t, "g3", json!([{"topic": "b", "partition": 0, "offset": 4}]));
    let own = t.ok("POST", "/v1/producers", None);
    produce(
        &t,
        "b",
        json!({"records": [{"value": "own", "partition": 0}], "producer_id": own["producer_id"], "epoch": own["epoch"], "sequence": 0}),
    );
    let dst_b = all_records(&t, "b", 0);

    let archive = tmp.path().join("src.tar");
    dump_to(&src, &archive, &[], 0);

    // A running broker's dir is refused, and left as it was.
    let o = tools(&[
        "restore",
        "-i",
        archive.to_str().unwrap(),
        "--data-dir",
        dst.to_str().unwrap(),
        "--merge",
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("in use by a running es-broker"),
        "{}",
        stderr(&o)
    );
    assert!(t.running());
    t.stop();

    // a is added; b, which the target holds, is left out and reported.
    let v = merge(&archive, &dst, &[], 0);
    assert_eq!(v["added"], json!(["a"]), "{v}");
    assert_eq!(v["skipped"][0]["topic"], "b", "{v}");
    assert!(v["producer_ids_retired_below"].as_i64().unwrap() >= 1, "{v}");
    let names: Vec<String> = std::fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(".es-tools-merge")),
        "{names:?}"
    );

    // Again: nothing to add, nothing changes.
    let settled = tree(&dst);
    let v = merge(&archive, &dst, &[], 0);
    assert_eq!(v["added"], json!([]), "{v}");
    assert_eq!(v["skipped"].as_array().unwrap().len(), 2, "{v}");
    assert!(tree(&dst) == settled, "a second merge changes nothing");

    // b beside the target's own, as b2.
    let v = merge(&archive, &dst, &["--topic", "b", "--rename", "b=b2"], 0);
    assert_eq!(v["added"], json!(["b2"]), "{v}");
    tools_ok(&["check", "--data-dir", dst.to_str().unwrap()]);

    let mut t = Broker::start(&dst, None);
    for (key, (topic, p)) in [("a/0", ("a", 0)), ("a/1", ("a", 1)), ("b/0", ("b2", 0))] {
        assert_eq!(
            all_records(&t, topic, p),
            src_records[key],
            "{topic}/{p} as in the source"
        );
    }
    assert_eq!(all_records(&t, "b", 0), dst_b, "the target's own b is untouched");
    assert_eq!(
        commits(&t, "g1"),
        json!([{"topic": "a", "partition": 0, "offset": 3}, {"topic": "b", "partition": 0, "offset": 1},
               {"topic": "b2", "partition": 0, "offset": 2}]),
        "g1 keeps its own commit and gains the archive's"
    );
    assert_eq!(
        commits(&t, "g3"),
        json!([{"topic": "b", "partition": 0, "offset": 4}])
    );

    // The target's producer id is retired: it cannot be taken for the
    // archive's producer of the same id on a.
    let (status, e) = t.call(
        "POST",
        "/v1/topics/a/records",
        Some(
            json!({"records": [{"value": "x", "partition": 0}], "producer_id": own["producer_id"],
                    "epoch": own["epoch"], "sequence": 1}),
        ),
    );
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (404, Some("unknown_producer_id")),
        "{e}"
    );
    let fresh = t.ok("POST", "/v1/producers", None);
    assert!(
        fresh["producer_id"].as_i64() > pid["producer_id"].as_i64()
            && fresh["producer_id"].as_i64() > own["producer_id"].as_i64(),
        "a new id is past every id either broker issued: {fresh}"
    );
    t.stop();
}

#[test]
fn merge_into_an_empty_or_missing_dir_is_a_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    small_dir(&data);
    let archive = tmp.path().join("a.tar");
    dump_to(&data, &archive, &[], 0);
    let new = tmp.path().join("new");
    let v = merge(&archive, &new, &[], 0);
    assert_eq!(v["status"], "complete", "{v}");
    assert!(new.join("topics/t/0/00000000000000000000.index").exists());
    // A damaged archive merges nothing.
    let mut bytes = std::fs::read(&archive).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    let bad = tmp.path().join("bad.tar");
    std::fs::write(&bad, &bytes).unwrap();
    let other = tmp.path().join("other");
    small_dir(&other);
    std::fs::rename(other.join("topics/t"), other.join("topics/u")).unwrap();
    let before = tree(&other);
    let v = merge(&bad, &other, &[], 1);
    assert_eq!(v["status"], "problems", "{v}");
    assert!(tree(&other) == before, "nothing merged");
}
