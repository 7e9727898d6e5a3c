//! `GET /v1/cluster` and the binary protocol's DescribeCluster (one
//! document, docs/api.md): the cluster as this node knows it: its id, the
//! controller group's leader, term and the index this node has applied,
//! the nodes of `--peers` with the addresses each registered in the
//! controller and whether this node reaches it now (cluster/health.rs),
//! and the partitions assigned. Built on shard 0, where the controller
//! lives (`Op::Cluster`), with `partitions.leaderless` and
//! `partitions.under_replicated` counted by every shard for the
//! partitions it owns (`Op::PartitionCounts`: cluster/leaders.rs, from its
//! replicas and the leaders' reports).

use std::rc::Rc;

use futures::future::join_all;
use serde_json::{json, Value};

use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::cluster::leaders::PartitionCounts;
use crate::error::{ApiError, ErrorCode};
use crate::shard::message::{Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};

/// The document, from any shard; needs `describe` on the cluster.
pub async fn describe(shard: &Rc<Shard>, p: &Principal) -> Result<Value, ApiError> {
    if !shard.config.cluster.enabled() {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "this broker runs standalone (no --peers): it has no cluster to describe",
        ));
    }
    p.require(Operation::Describe, Resource::Cluster, "")?;
    let mut doc = match shard.call(CONTROLLER_SHARD, Op::Cluster).await {
        Reply::Json(r) => r?,
        Reply::Done(Err(e)) => return Err(e),
        other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    };
    let counts = partition_counts(shard).await?;
    doc["partitions"]["leaderless"] = json!(counts.leaderless);
    doc["partitions"]["under_replicated"] = json!(counts.under_replicated);
    Ok(doc)
}

/// Every shard's partitions counted, summed (also the metrics').
pub async fn partition_counts(shard: &Rc<Shard>) -> Result<PartitionCounts, ApiError> {
    let replies = join_all((0..shard.shards).map(|s| shard.call(s, Op::PartitionCounts))).await;
    let mut all = PartitionCounts::default();
    for reply in replies {
        match reply {
            Reply::PartitionCounts(c) => all.add(c),
            Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    Ok(all)
}

/// The document, on shard 0 (`Op::Cluster`).
pub fn view(shard: &Shard) -> Result<Value, ApiError> {
    let t = shard
        .raft
        .as_ref()
        .ok_or_else(|| ApiError::internal("a cluster view on a standalone broker"))?;
    let controller = t
        .controller
        .borrow()
        .clone()
        .ok_or_else(|| ApiError::unavailable("the controller group is not open yet"))?;
    let state = controller.state();
    let me = shard.config.node_id;
    let peers = shard.config.cluster.peers.as_ref();
    let nodes: Vec<Value> = shard
        .config
        .cluster
        .node_ids()
        .into_iter()
        .map(|id| {
            let registered = state.nodes.get(&id);
            let raft_addr = registered
                .map(|n| n.raft_addr.clone())
                .or_else(|| peers.and_then(|p| p.0.get(&id).cloned()));
            let (up, last_seen_ms) = if id == me {
                (true, Some(0))
            } else {
                let ago = t.health.last_answer(id);
                (t.health.is_up(id), ago.map(|d| d.as_millis() as u64))
            };
            json!({
                "node_id": id,
                "raft_addr": raft_addr,
                "http_addr": registered.map(|n| n.http_addr.clone()),
                "binary_addr": registered.map(|n| n.binary_addr.clone()),
                "kafka_addr": registered.and_then(|n| n.kafka_addr.clone()),
                "registered": registered.is_some(),
                "state": if up { "up" } else { "unreachable" },
                "last_seen_ms_ago": last_seen_ms,
            })
        })
        .collect();
    let total: usize = state.topics.values().map(|t| t.partitions.len()).sum();
    Ok(json!({
        "cluster_id": state.cluster_uuid,
        "node_id": me,
        "controller": {
            "leader": controller.leader(),
            "term": controller.term(),
            "committed": controller.applied_index(),
        },
        "nodes": nodes,
        "partitions": {"total": total},
    }))
}
