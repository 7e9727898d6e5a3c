//! `GET /v1/cluster`: the cluster as the controller group on this node
//! knows it: its id, its leader and term, the nodes of `--peers` with the
//! addresses each registered, and the partitions assigned. Built on shard
//! 0, where the controller lives (`Op::Cluster`).

use std::rc::Rc;

use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};
use crate::shard::message::{Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};

/// The answer of `GET /v1/cluster`, from any shard.
pub async fn describe(shard: &Rc<Shard>) -> Result<Value, ApiError> {
    if !shard.config.cluster.enabled() {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "this broker is standalone (started without --peers): it has no cluster to describe",
        ));
    }
    match shard.call(CONTROLLER_SHARD, Op::Cluster).await {
        Reply::Json(r) => r,
        Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}

/// The view, on shard 0 (`Op::Cluster`).
pub fn view(shard: &Shard) -> Result<Value, ApiError> {
    let controller = shard
        .raft
        .as_ref()
        .and_then(|t| t.controller.borrow().clone())
        .ok_or_else(|| ApiError::unavailable("the controller group is not open yet"))?;
    let state = controller.state();
    let nodes: Vec<Value> = shard
        .config
        .cluster
        .node_ids()
        .into_iter()
        .map(|id| {
            let peer = shard
                .config
                .cluster
                .peers
                .as_ref()
                .and_then(|p| p.0.get(&id).cloned());
            match state.nodes.get(&id) {
                Some(n) => json!({
                    "node_id": id,
                    "raft_addr": n.raft_addr,
                    "http_addr": n.http_addr,
                    "binary_addr": n.binary_addr,
                    "state": "registered",
                }),
                None => json!({
                    "node_id": id,
                    "raft_addr": peer,
                    "http_addr": null,
                    "binary_addr": null,
                    "state": "unregistered",
                }),
            }
        })
        .collect();
    let total: usize = state.topics.values().map(|t| t.partitions.len()).sum();
    Ok(json!({
        "cluster_id": state.cluster_uuid,
        "node_id": shard.config.node_id,
        "controller": {"leader": controller.leader(), "term": controller.term()},
        "nodes": nodes,
        "partitions": {"total": total},
    }))
}
