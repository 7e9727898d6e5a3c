//! What an operator watches on a 3-node cluster (es-broker processes on
//! loopback), fed by the leaders' reports (cluster/reports.rs):
//!
//! - a follower's describe shows the leader's replicas in sync and each
//!   one's lag, with how old that account is; a node without a replica
//!   shows the leader and its offsets;
//! - `GET /v1/cluster` (and the binary DescribeCluster) counts the
//!   partitions without a leader and under-replicated: N for N rf-3
//!   partitions once one node is killed with -9, 0 once it rejoins, and
//!   every rf-3 partition leaderless with two nodes of three down;
//! - the metrics follow (`es_under_replicated_partitions`,
//!   `es_leaderless_partitions`, per-partition leader and term, commit
//!   latency, coalescing, elections, snapshot bytes).

mod cluster;
mod common;

use common::{wait_for, Broker, Client};
use es_protocol::client::{Client as BinaryClient, Options};
use es_protocol::Kind;
use serde_json::{json, Value};

fn counts(b: &Broker) -> Option<(u64, u64, u64)> {
    let (200, v) = b.try_get("/v1/cluster").ok()? else {
        return None;
    };
    let p = &v["partitions"];
    Some((
        p["total"].as_u64()?,
        p["leaderless"].as_u64()?,
        p["under_replicated"].as_u64()?,
    ))
}

fn describe_binary(b: &Broker) -> Value {
    let c = BinaryClient::connect(
        &b.binary_addr(),
        Options {
            client_id: "cluster-observe".into(),
            ..Options::default()
        },
    )
    .expect("connect and handshake");
    c.admin(Kind::DescribeCluster, json!({}))
        .expect("DescribeCluster")
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[test]
fn leader_reports_feed_describe_the_cluster_view_and_the_metrics() {
    let mut nodes = cluster::start(3);
    let clients: Vec<Client> = nodes.iter().map(Broker::client).collect();
    assert_eq!(cluster::create(&clients[0], "r3", 3, Some(3)).0, 201);
    assert_eq!(cluster::create(&clients[0], "r1", 1, Some(1)).0, 201);
    let all: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
    for p in 0..3 {
        cluster::wait_leader(&all, "r3", p);
    }
    let l1 = cluster::wait_leader(&all, "r1", 0);
    let leader = cluster::wait_leader(&all, "r3", 0);
    let (status, body) = cluster::produce(&clients[leader as usize - 1], "r3", 0, &values("a", 5)).unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, body) = cluster::produce(&clients[l1 as usize - 1], "r1", 0, &values("b", 2)).unwrap();
    assert_eq!(status, 200, "{body}");

    // A follower describes r3/0 from its leader's report.
    let follower = (1..=3u64).find(|&n| n != leader).unwrap();
    wait_for("a follower to show the leader's replicas in sync", || {
        cluster::partition_of(&nodes[follower as usize - 1], "r3", 0).is_some_and(|d| {
            d["local_replica"] == true
                && d["leader"] == leader
                && d["in_sync_replicas"].as_array().is_some_and(|s| s.len() == 3)
                && d["replica_status"].as_array().is_some_and(|s| {
                    s.len() == 3 && s.iter().all(|r| r["lag"].is_u64() && r["in_sync"] == true)
                })
                && d["as_of_ms_ago"].is_u64()
                && d["leader_available"] == true
                && d["high_watermark"] == 5
        })
    });
    let on_leader = cluster::partition_of(&nodes[leader as usize - 1], "r3", 0).unwrap();
    assert_eq!(on_leader["as_of_ms_ago"], 0, "live on the leader: {on_leader}");
    // A node without a replica of r1/0 shows its leader and offsets.
    let stranger = (1..=3u64).find(|&n| n != l1).unwrap();
    wait_for("a node without a replica to show the leader's offsets", || {
        cluster::partition_of(&nodes[stranger as usize - 1], "r1", 0).is_some_and(|d| {
            d["local_replica"] == false
                && d["leader"] == l1
                && d["high_watermark"] == 2
                && d["log_end_offset"] == 2
                && d["in_sync_replicas"] == json!([l1])
        })
    });

    // Every partition led and fully replicated, as every node counts them.
    for b in &nodes {
        wait_for("every partition led and in sync", || counts(b) == Some((4, 0, 0)));
    }
    let b = describe_binary(&nodes[0]);
    assert_eq!(
        b["partitions"],
        json!({"total": 4, "leaderless": 0, "under_replicated": 0}),
        "{b}"
    );

    // The metrics.
    let lb = &nodes[leader as usize - 1];
    let series = |name: &str| format!("{name}{{topic=\"r3\",partition=\"0\"}}");
    assert_eq!(lb.metric(&series("es_raft_leader")), Some(leader as f64));
    assert!(lb.metric(&series("es_raft_term")).unwrap() >= 1.0);
    assert!(lb.metric("es_raft_elections_total{shard=\"0\"}").unwrap() >= 1.0);
    assert!(lb.metric("es_raft_commit_latency_seconds_count").unwrap() >= 1.0);
    assert!(lb.metric("es_raft_commit_latency_seconds_sum").unwrap() > 0.0);
    assert!(lb.metric("es_raft_entry_batches_count").unwrap() >= 1.0);
    assert!(
        lb.metric("es_raft_entry_batches_sum").unwrap() >= lb.metric("es_raft_entry_batches_count").unwrap()
    );
    assert_eq!(lb.metric("es_raft_snapshot_bytes_total{dir=\"sent\"}"), Some(0.0));
    assert_eq!(
        lb.metric("es_raft_snapshot_bytes_total{dir=\"received\"}"),
        Some(0.0)
    );
    for b in &nodes {
        assert_eq!(b.metric("es_under_replicated_partitions"), Some(0.0));
        assert_eq!(b.metric("es_leaderless_partitions"), Some(0.0));
    }

    // A node that holds no r1 replica killed: the three rf-3 partitions
    // are under-replicated, none is leaderless.
    let killed = stranger;
    nodes[killed as usize - 1].kill9();
    let survivors: Vec<u64> = (1..=3).filter(|&n| n != killed).collect();
    for &s in &survivors {
        let b = &nodes[s as usize - 1];
        wait_for("the rf-3 partitions under-replicated", || {
            counts(b) == Some((4, 0, 3))
        });
        assert_eq!(b.metric("es_under_replicated_partitions"), Some(3.0));
    }
    let live: Vec<Option<&Broker>> = (1..=3u64)
        .map(|n| (n != killed).then(|| &nodes[n as usize - 1]))
        .collect();
    let leader = cluster::wait_leader(&live, "r3", 0);
    let other = survivors.iter().copied().find(|&n| n != leader).unwrap();
    wait_for("the follower to show the killed node out of sync", || {
        cluster::partition_of(&nodes[other as usize - 1], "r3", 0).is_some_and(|d| {
            d["leader"] == leader
                && d["replica_status"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|r| r["node_id"] == killed && r["in_sync"] == false))
                && d["in_sync_replicas"].as_array().is_some_and(|s| s.len() == 2)
        })
    });

    // It rejoins: nothing under-replicated.
    nodes[killed as usize - 1].restart();
    for b in &nodes {
        wait_for("the rejoined node back in sync", || counts(b) == Some((4, 0, 0)));
    }

    // Two of three down: the survivor (r1's only replica) counts every
    // rf-3 partition leaderless, and r1 led.
    for n in (1..=3u64).filter(|&n| n != l1) {
        nodes[n as usize - 1].kill9();
    }
    let b = &nodes[l1 as usize - 1];
    wait_for("the rf-3 partitions leaderless", || counts(b) == Some((4, 3, 0)));
    assert_eq!(b.metric("es_leaderless_partitions"), Some(3.0));
    let d = cluster::partition_of(b, "r1", 0).unwrap();
    assert_eq!(
        (d["leader"].as_u64(), d["leader_available"].as_bool()),
        (Some(l1), Some(true)),
        "{d}"
    );
}
