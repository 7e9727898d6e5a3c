//! `/metrics` as a dashboard reads it, against the real broker:
//!
//! - every family has a `# HELP` line with text, once, and the families a
//!   broker exports after some work (topics, produce and fetch over HTTP
//!   and the binary protocol, a group's join and commit, an error) are
//!   exactly those docs/api.md lists;
//! - `es_build_info` names the version and the commit;
//! - a group's lag follows produces and commits without anyone describing
//!   the group;
//! - deleting a topic or a group leaves none of its series, and the name
//!   can be used again.
//!
//! Nothing here waits on time: a wait polls `/metrics` for the value it
//! expects, and gives up only after a hang guard.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{create_topic, produce, Broker};
use es_protocol::client::{Client as BinaryClient, Options};
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::produce::ProduceRecord;
use serde_json::{json, Value};

/// The longest a wait may take before the test calls it a hang
/// (`ES_TEST_WAIT_SECS` to change): never a verdict on speed.
fn hang_guard() -> Duration {
    let secs = std::env::var("ES_TEST_WAIT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    Duration::from_secs(secs)
}

/// Polls `/metrics` until `check` accepts it; panics with the last text
/// after the hang guard.
#[track_caller]
fn poll_metrics(b: &Broker, what: &str, mut check: impl FnMut(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let text = b.metrics_text();
        if check(&text) {
            return text;
        }
        if start.elapsed() > hang_guard() {
            panic!("gave up waiting for {what}; /metrics:\n{text}");
        }
        std::thread::sleep(common::POLL);
    }
}

/// The value of the sample written exactly `series` (labels in the order
/// the broker writes them), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(series))
        .find_map(|rest| rest.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Families by name: their `# TYPE` and `# HELP` text. Panics on a family
/// typed twice, or a help line without text.
fn families(text: &str) -> BTreeMap<String, (String, Option<String>)> {
    let mut out: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    let mut help: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(!text.trim().is_empty(), "{name} has an empty # HELP");
            assert!(
                help.insert(name.to_string(), text.to_string()).is_none(),
                "{name} has two # HELP lines"
            );
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(
                out.insert(name.to_string(), (kind.to_string(), None)).is_none(),
                "{name} is typed twice: two families of one name"
            );
        }
    }
    for (name, (_, h)) in out.iter_mut() {
        *h = help.remove(name);
    }
    assert!(help.is_empty(), "# HELP without # TYPE: {help:?}");
    out
}

/// Families a broker exports only with TLS to clients (`--tls-cert`):
/// tls.rs holds them to the table.
const TLS_PREFIX: &str = "es_tls_";

/// Families a broker exports only with `--auth required` (one series per
/// key): quotas.rs holds them to the table.
const QUOTA_PREFIX: &str = "es_quota_";

/// Families a broker exports only in cluster mode (`--peers`):
/// cluster_transport.rs holds them to the table.
const RAFT_PREFIX: &str = "es_raft_";

/// The metric names docs/api.md lists in its metrics section, but those a
/// plaintext standalone broker without auth does not export (TLS's,
/// quotas', the cluster's).
/// Cluster-wide partition counts: exported by cluster nodes only
/// (cluster_observe.rs checks them).
const CLUSTER_ONLY: [&str; 2] = ["es_under_replicated_partitions", "es_leaderless_partitions"];

fn documented() -> BTreeSet<String> {
    let doc = include_str!("../../docs/api.md");
    let section = doc
        .split("\n## Health, readiness, metrics")
        .nth(1)
        .expect("docs/api.md has the metrics section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|n| {
            n.starts_with("es_")
                && !n.starts_with(TLS_PREFIX)
                && !n.starts_with(QUOTA_PREFIX)
                && !n.starts_with(RAFT_PREFIX)
                && !CLUSTER_ONLY.contains(n)
        })
        .map(String::from)
        .collect()
}

fn binary(b: &Broker) -> BinaryClient {
    BinaryClient::connect(
        &b.binary_addr(),
        Options {
            client_id: "metrics-test".into(),
            ..Options::default()
        },
    )
    .expect("connect and handshake")
}

/// Joins `group` as its only member; returns (member id, generation).
fn join(b: &Broker, group: &str, topics: &[&str]) -> (String, u64) {
    let (status, v) = b.post(
        &format!("/v1/groups/{group}/members"),
        json!({"topics": topics, "session_timeout_ms": 300_000}),
    );
    assert_eq!(status, 201, "join {group}: {v}");
    (
        v["member_id"].as_str().expect("member_id").to_string(),
        v["generation"].as_u64().expect("generation"),
    )
}

/// Commits `offsets` ([(topic, partition, offset)]), as `member` or none.
fn commit(b: &Broker, group: &str, member: Option<&(String, u64)>, offsets: &[(&str, u32, u64)]) {
    let offsets: Vec<Value> = offsets
        .iter()
        .map(|(t, p, o)| json!({"topic": t, "partition": p, "offset": o}))
        .collect();
    let mut body = json!({ "offsets": offsets });
    if let Some((id, generation)) = member {
        body["member_id"] = json!(id);
        body["generation"] = json!(generation);
    }
    let (status, v) = b.post(&format!("/v1/groups/{group}/commits"), body);
    assert_eq!(status, 200, "commit to {group}: {v}");
}

fn produce_n(b: &Broker, topic: &str, partition: u32, n: usize) {
    let records: Vec<Value> = (0..n)
        .map(|i| json!({"value": format!("v{i}"), "partition": partition}))
        .collect();
    produce(b, topic, json!({ "records": records }));
}

#[test]
fn every_family_has_help_and_the_documented_list_is_what_is_exported() {
    let b = Broker::start(2);
    create_topic(&b, "orders", 2);
    produce_n(&b, "orders", 0, 3);
    produce_n(&b, "orders", 1, 2);
    let (status, v) = b.get("/v1/topics/orders/partitions/0/records?offset=0");
    assert_eq!(status, 200, "{v}");
    assert_eq!(b.get("/v1/topics/missing").0, 404);
    let member = join(&b, "billing", &["orders"]);
    commit(&b, "billing", Some(&member), &[("orders", 0, 1)]);
    // The schema registry's listener: its request series exist once it
    // served one.
    let registry = common::Client::new(b.registry_addr());
    assert_eq!(registry.get("/subjects").0, 200);
    let c = binary(&b);
    c.produce(
        "orders",
        vec![ProduceRecord {
            partition: Some(1),
            timestamp_ms: None,
            key: None,
            value: b"over binary".to_vec(),
        }],
    )
    .expect("binary produce");
    c.fetch(Fetch {
        topic: "orders".into(),
        partition: 1,
        offset: Some(0),
        max_records: 10,
        max_bytes: 1 << 20,
        wait_ms: 0,
    })
    .expect("binary fetch");

    let text = b.metrics_text();
    let families = families(&text);
    let without_help: Vec<&String> = families
        .iter()
        .filter(|(_, (_, help))| help.is_none())
        .map(|(name, _)| name)
        .collect();
    assert!(
        without_help.is_empty(),
        "families without # HELP: {without_help:?}\n{text}"
    );

    let exported: BTreeSet<String> = families.keys().cloned().collect();
    let documented = documented();
    assert_eq!(
        exported.difference(&documented).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "exported but not in docs/api.md's metrics table"
    );
    assert_eq!(
        documented.difference(&exported).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "in docs/api.md's metrics table but not exported:\n{text}"
    );

    let info = text
        .lines()
        .find(|l| l.starts_with("es_build_info{"))
        .unwrap_or_else(|| panic!("no es_build_info:\n{text}"));
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(info.contains(&version), "{info}");
    assert!(info.ends_with("} 1"), "{info}");
    let commit = info
        .split("commit=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no commit label: {info}"));
    assert!(
        commit == "unknown" || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "commit is 12 hex digits or unknown: {info}"
    );
}

#[test]
fn group_lag_follows_produce_and_commit_without_a_describe() {
    let b = Broker::start(2);
    create_topic(&b, "events", 2);
    produce_n(&b, "events", 0, 3);
    let member = join(&b, "readers", &["events"]);
    commit(&b, "readers", Some(&member), &[("events", 0, 3)]);
    let lag0 = r#"es_group_lag{group="readers",topic="events",partition="0"}"#;
    let lag1 = r#"es_group_lag{group="readers",topic="events",partition="1"}"#;
    let committed0 = r#"es_group_committed_offset{group="readers",topic="events",partition="0"}"#;
    poll_metrics(&b, "lag 0 after the commit", |t| {
        sample(t, lag0) == Some(0.0) && sample(t, lag1) == Some(0.0) && sample(t, committed0) == Some(3.0)
    });

    produce_n(&b, "events", 0, 5);
    produce_n(&b, "events", 1, 2);
    poll_metrics(&b, "the lag to grow with the produces", |t| {
        sample(t, lag0) == Some(5.0) && sample(t, lag1) == Some(2.0)
    });

    commit(&b, "readers", Some(&member), &[("events", 0, 6)]);
    poll_metrics(&b, "the lag to shrink with the commit", |t| {
        sample(t, lag0) == Some(2.0) && sample(t, committed0) == Some(6.0)
    });
    assert_eq!(
        sample(&b.metrics_text(), r#"es_group_members{group="readers"}"#),
        Some(1.0)
    );
}

#[test]
fn deleting_a_topic_or_a_group_leaves_none_of_its_series() {
    let b = Broker::start(2);
    create_topic(&b, "t", 3);
    create_topic(&b, "keep", 1);
    for p in 0..3 {
        produce_n(&b, "t", p, 2);
    }
    produce_n(&b, "keep", 0, 4);
    // g: a group with a member that left (its rebalances counted), and a
    // commit; h: commits on both topics, and stays.
    let member = join(&b, "g", &["t"]);
    commit(&b, "g", Some(&member), &[("t", 0, 1)]);
    assert_eq!(b.delete(&format!("/v1/groups/g/members/{}", member.0)).0, 200);
    commit(&b, "h", None, &[("t", 1, 1), ("keep", 0, 2)]);

    let text = b.metrics_text();
    for series in [
        r#"es_partition_high_watermark{topic="t",partition="2"} 2"#,
        r#"es_group_committed_offset{group="g",topic="t",partition="0"} 1"#,
        r#"es_group_lag{group="g",topic="t",partition="0"} 1"#,
        r#"es_group_members{group="g"} 0"#,
        r#"es_group_rebalances_total{group="g"} 2"#,
        r#"es_group_lag{group="h",topic="t",partition="1"} 1"#,
        r#"es_group_lag{group="h",topic="keep",partition="0"} 2"#,
    ] {
        assert!(text.lines().any(|l| l == series), "{series} missing:\n{text}");
    }

    let (status, v) = b.delete("/v1/topics/t");
    assert_eq!(status, 200, "{v}");
    let (status, v) = b.delete("/v1/groups/g");
    assert_eq!(status, 200, "{v}");
    let text = b.metrics_text();
    let left: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(r#"topic="t""#) || l.contains(r#"group="g""#))
        .collect();
    assert!(
        left.is_empty(),
        "series of the deleted topic and group remain: {left:?}"
    );
    assert_eq!(
        sample(&text, r#"es_group_lag{group="h",topic="keep",partition="0"}"#),
        Some(2.0),
        "the other topic and group keep theirs:\n{text}"
    );

    // The names again: new series, from zero.
    create_topic(&b, "t", 1);
    commit(&b, "g", None, &[("t", 0, 0)]);
    let text = b.metrics_text();
    for (series, value) in [
        (r#"es_partition_high_watermark{topic="t",partition="0"}"#, 0.0),
        (
            r#"es_group_committed_offset{group="g",topic="t",partition="0"}"#,
            0.0,
        ),
        (r#"es_group_lag{group="g",topic="t",partition="0"}"#, 0.0),
        (r#"es_group_rebalances_total{group="g"}"#, 0.0),
    ] {
        assert_eq!(sample(&text, series), Some(value), "{series}:\n{text}");
    }
    assert_eq!(
        sample(&text, r#"es_partition_high_watermark{topic="t",partition="2"}"#),
        None,
        "the old topic's third partition is gone:\n{text}"
    );
}
