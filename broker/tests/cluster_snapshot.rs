//! Late replicas on three real `es-broker` processes
//! (docs/design/raft-snapshots.md, docs/cluster.md "Retention in a
//! cluster"): each replica purges at its own retention cut, so a follower
//! that was down while the leader's retention deleted what it lacks comes
//! back and catches up by snapshot: its whole log is replaced by the
//! leader's from the leader's first hot offset, record for record.

mod cluster;
mod common;

use serde_json::{json, Value};

use common::{wait_for, Broker};

/// `(hot_start_offset, high_watermark)` of partition 0 of `topic` as node
/// `b` describes its own replica.
fn local_marks(b: &Broker, topic: &str) -> Option<(u64, u64)> {
    let d = cluster::partition_of(b, topic, 0)?;
    if d["local_replica"] != true {
        return None;
    }
    Some((d["hot_start_offset"].as_u64()?, d["high_watermark"].as_u64()?))
}

fn produce_ok(b: &Broker, topic: &str, values: &[String]) -> Value {
    let (status, body) = cluster::produce(b, topic, 0, values).expect("produce");
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn a_follower_down_while_retention_deletes_catches_up_by_snapshot() {
    let mut nodes = cluster::start_with(3, &["--cleanup-interval-ms", "200"]);
    let topic = "ret";
    let (status, body) = nodes[0].post(
        "/v1/topics",
        json!({
            "name": topic,
            "partitions": 1,
            "replication_factor": 3,
            "config": {"segment_bytes": 1024, "retention_bytes": 3072},
        }),
    );
    assert_eq!(status, 201, "{body}");
    let all: Vec<&Broker> = nodes.iter().collect();
    let controller = cluster::controller_leader(&all).expect("a controller leader");
    let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
    let leader = cluster::wait_leader(&running, topic, 0);
    // The late node: neither the partition's leader nor the controller's
    // if one is left, so that only its own replica falls behind.
    let late = (1..=3u64)
        .find(|&i| i != leader && i != controller)
        .unwrap_or_else(|| (1..=3).find(|&i| i != leader).unwrap());
    let li = leader as usize - 1;
    let values = |tag: &str, n: usize| -> Vec<String> {
        (0..n)
            .map(|i| format!("{tag}-{i:04}-{}", "v".repeat(80)))
            .collect()
    };
    produce_ok(&nodes[li], topic, &values("before", 10));
    for b in &nodes {
        wait_for("every replica holds the first records", || {
            local_marks(b, topic).is_some_and(|(_, hw)| hw == 10)
        });
    }

    nodes[late as usize - 1].kill9();
    for round in 0..30 {
        produce_ok(&nodes[li], topic, &values(&format!("away{round}"), 10));
    }
    let hw = 10 + 300;
    // Retention on the leader deletes past everything the late node holds.
    wait_for("the leader's retention to delete past offset 10", || {
        local_marks(&nodes[li], topic).is_some_and(|(start, h)| start > 10 && h == hw)
    });
    let (leader_start, _) = local_marks(&nodes[li], topic).unwrap();

    nodes[late as usize - 1].restart();
    let late_node = &nodes[late as usize - 1];
    wait_for("the late node to reach the high watermark", || {
        local_marks(late_node, topic).is_some_and(|(_, h)| h == hw)
    });
    let (late_start, _) = local_marks(late_node, topic).unwrap();
    assert!(
        late_start >= leader_start && late_start > 10,
        "the late node's log starts at the leader's first hot offset ({leader_start}) or past it (its own retention), not at {late_start}"
    );
    let log = late_node.stderr_text();
    assert!(
        log.contains("the whole log will be replaced"),
        "the late node installed the leader's log by snapshot:\n{log}"
    );
    // Its records are the leader's, from where both hold them.
    let from = late_start.max(leader_start);
    let want = cluster::records_from(&nodes[li], topic, 0, from).expect("the leader's records");
    assert_eq!(want.len() as u64, hw - from);
    wait_for("the late node to serve the leader's records", || {
        cluster::records_from(late_node, topic, 0, from).as_ref() == Some(&want)
    });

    // It takes part again: a new record reaches it.
    produce_ok(&nodes[li], topic, &["after".to_string()]);
    let late_node = &nodes[late as usize - 1];
    wait_for("the late node to hold the next record", || {
        local_marks(late_node, topic).is_some_and(|(_, h)| h == hw + 1)
    });
}
