//! Topic operations, independent of the transport: create, list,
//! describe, patch config, delete. HTTP and the binary protocol both call
//! these with the same JSON documents (docs/api.md), and the caller's
//! `Principal`: each checks its grant first, before the topic's existence
//! (docs/security.md); lists show only what the caller may describe.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde::Deserialize;

use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::cluster::leaders::LeaderView;
use crate::error::ApiError;
use crate::limits::TOPIC_PARTITIONS_MAX;
use crate::shard::message::{Op, PartitionState, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topics::controller::ask_owners;
use crate::topics::topic::{self, TopicConfig, TopicMeta};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTopic {
    name: String,
    partitions: i64,
    replication_factor: Option<i64>,
    config: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Creates a topic; answers its summary (HTTP 201).
pub async fn create(
    shard: &Rc<Shard>,
    p: &Principal,
    create: CreateTopic,
) -> Result<serde_json::Value, ApiError> {
    p.require_create_topic(&create.name)?;
    topic::validate_name(&create.name)?;
    if create.partitions < 1 || create.partitions > TOPIC_PARTITIONS_MAX as i64 {
        return Err(ApiError::invalid(format!(
            "partitions must be in 1..={TOPIC_PARTITIONS_MAX}"
        )));
    }
    let cluster = shard.config.cluster.enabled();
    // Cluster mode: 0 asks the controller for the default.
    let rf = match create.replication_factor {
        None if cluster => 0,
        None => 1,
        Some(rf) if cluster && rf < 1 => {
            return Err(ApiError::invalid(format!(
                "replication_factor {rf} must be at least 1"
            )))
        }
        Some(rf) if cluster => rf.min(u32::MAX as i64) as u32,
        Some(1) => 1,
        Some(rf) => {
            return Err(ApiError::invalid(format!(
                "replication_factor {rf} is not possible on a single node: use 1"
            )))
        }
    };
    let defaults = TopicConfig::with_segment_bytes(shard.config.segment_bytes);
    let config = match &create.config {
        Some(changes) => defaults.patched(changes)?,
        None => defaults,
    };
    let meta = TopicMeta {
        name: create.name,
        partitions: create.partitions as u32,
        replication_factor: rf,
        config,
        created_index: None,
    };
    match shard.call(CONTROLLER_SHARD, Op::CreateTopic(meta)).await {
        Reply::Topic(Ok(meta)) => Ok(summary(&meta)),
        Reply::Topic(Err(e)) | Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}

fn summary(meta: &TopicMeta) -> serde_json::Value {
    serde_json::json!({
        "name": meta.name,
        "partitions": meta.partitions,
        "replication_factor": meta.replication_factor,
        "config": meta.config,
    })
}

pub fn list(shard: &Shard, p: &Principal) -> serde_json::Value {
    let topics: Vec<_> = shard
        .catalog
        .snapshot()
        .values()
        .filter(|m| p.allows(Operation::Describe, Resource::Topic, &m.name))
        .map(|m| serde_json::json!({"name": m.name, "partitions": m.partitions}))
        .collect();
    serde_json::json!({ "topics": topics })
}

/// Looks a topic up, checking its name first so a bad name is a 400.
pub fn lookup(shard: &Shard, name: &str) -> Result<std::sync::Arc<TopicMeta>, ApiError> {
    topic::validate_name(name)?;
    shard
        .catalog
        .get(name)
        .ok_or_else(|| ApiError::topic_not_found(name))
}

/// [`lookup`], and in cluster mode, before answering `topic_not_found`,
/// the controller's read barrier: a topic created through another node a
/// moment ago and not applied here yet is found (the spec's §3.2; bounded).
pub async fn lookup_synced(shard: &Rc<Shard>, name: &str) -> Result<std::sync::Arc<TopicMeta>, ApiError> {
    match lookup(shard, name) {
        Err(e) if e.code == crate::error::ErrorCode::TopicNotFound && shard.config.cluster.enabled() => {
            match shard.call(CONTROLLER_SHARD, Op::ReadBarrier).await {
                Reply::Done(Ok(())) => lookup(shard, name),
                Reply::Done(Err(barrier)) => {
                    tracing::debug!(topic = %name, error = %barrier, "read barrier before topic_not_found failed");
                    Err(e)
                }
                other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
            }
        }
        found => found,
    }
}

pub async fn describe(shard: &Rc<Shard>, p: &Principal, name: &str) -> Result<serde_json::Value, ApiError> {
    p.require(Operation::Describe, Resource::Topic, name)?;
    let meta = lookup_synced(shard, name).await?;
    description(shard, &meta).await
}

async fn description(shard: &Rc<Shard>, meta: &TopicMeta) -> Result<serde_json::Value, ApiError> {
    let replies = ask_owners(shard, meta, |partitions| Op::Describe {
        topic: meta.name.clone(),
        partitions,
    })
    .await;
    let mut states = Vec::new();
    for reply in replies {
        match reply {
            Reply::Described(Ok(s)) => states.extend(s),
            Reply::Described(Err(e)) | Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    states.sort_by_key(|s| s.partition);
    let partitions: Vec<_> = if shard.config.cluster.enabled() {
        let leaders = leader_views(shard, meta).await?;
        replicated_partitions(shard, meta, &states, &leaders)
    } else {
        standalone_partitions(shard, &states)
    };
    Ok(serde_json::json!({
        "name": meta.name,
        "replication_factor": meta.replication_factor,
        "config": meta.config,
        "partitions": partitions,
    }))
}

fn standalone_partitions(shard: &Shard, states: &[PartitionState]) -> Vec<serde_json::Value> {
    let node = shard.config.node_id;
    states
        .iter()
        .map(|s| {
            serde_json::json!({
                "partition": s.partition,
                "log_start_offset": s.log_start_offset,
                "hot_start_offset": s.hot_start_offset,
                "cold_start_offset": s.cold_start_offset,
                "high_watermark": s.high_watermark,
                "leader": node,
                "replicas": [node],
            })
        })
        .collect()
}

/// Cluster mode: the leader of each partition of `meta` as the shards
/// that own them know it (cluster/leaders.rs), by partition.
async fn leader_views(shard: &Rc<Shard>, meta: &TopicMeta) -> Result<BTreeMap<u32, LeaderView>, ApiError> {
    let replies = ask_owners(shard, meta, |partitions| Op::LeaderViews {
        topic: meta.name.clone(),
        partitions,
    })
    .await;
    let mut out = BTreeMap::new();
    for reply in replies {
        match reply {
            Reply::LeaderViews(views) => {
                out.extend(views.into_iter().filter_map(|(p, v)| Some((p, v?))));
            }
            Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    Ok(out)
}

/// Cluster mode: each partition as this node knows it. Offsets are this
/// node's replica's (what it serves); the leader, its term, the replicas
/// in sync and each one's lag are the leader's, live on the leader and
/// from its latest report elsewhere (`as_of_ms_ago` old: the spec's
/// §4.6). A node without a replica shows the leader's offsets from that
/// report, or nulls without one.
fn replicated_partitions(
    shard: &Shard,
    meta: &TopicMeta,
    states: &[PartitionState],
    leaders: &BTreeMap<u32, LeaderView>,
) -> Vec<serde_json::Value> {
    let assignment = shard.catalog.assignment();
    (0..meta.partitions)
        .map(|p| {
            let assigned = assignment
                .replicas(&meta.name, p)
                .map(|r| r.replicas.clone())
                .unwrap_or_default();
            let local = states
                .iter()
                .find(|s| s.partition == p)
                .and_then(|s| s.replica.as_ref().map(|r| (s, r)));
            let view = leaders.get(&p);
            let report = view.and_then(|v| v.report.as_ref());
            let replicas = match (local, report) {
                (Some((_, r)), _) if !r.replicas.is_empty() => r.replicas.clone(),
                (_, Some(rep)) if !rep.replicas.is_empty() => {
                    rep.replicas.iter().map(|x| x.node_id).collect()
                }
                _ => assigned,
            };
            let (in_sync, status) = match report {
                Some(rep) => {
                    let in_sync: Vec<u64> = rep
                        .replicas
                        .iter()
                        .filter(|x| x.in_sync)
                        .map(|x| x.node_id)
                        .collect();
                    let status: Vec<_> = rep
                        .replicas
                        .iter()
                        .map(
                            |x| serde_json::json!({"node_id": x.node_id, "lag": x.lag, "in_sync": x.in_sync}),
                        )
                        .collect();
                    (serde_json::json!(in_sync), serde_json::json!(status))
                }
                None => (serde_json::Value::Null, serde_json::Value::Null),
            };
            let (leader, term) = match (view, local) {
                (Some(v), _) => (serde_json::json!(v.leader), serde_json::json!(v.term)),
                (None, Some((_, r))) => (serde_json::json!(r.leader), serde_json::json!(r.term)),
                (None, None) => (serde_json::Value::Null, serde_json::Value::Null),
            };
            let as_of = report.map(|_| view.map_or(0, |v| v.age.as_millis() as u64));
            let mut doc = serde_json::json!({
                "partition": p,
                "replicas": replicas,
                "local_replica": local.is_some(),
                "leader": leader,
                "leader_term": term,
                "leader_available": report.map(|r| r.available),
                "in_sync_replicas": in_sync,
                "replica_status": status,
                "as_of_ms_ago": as_of,
                "storage_failure": local.and_then(|(_, r)| r.storage_failure.clone()),
            });
            let offsets = match (local, report) {
                (Some((s, r)), _) => serde_json::json!({
                    "log_start_offset": s.log_start_offset,
                    "hot_start_offset": s.hot_start_offset,
                    "cold_start_offset": s.cold_start_offset,
                    "high_watermark": s.high_watermark,
                    "log_end_offset": r.log_end_offset,
                }),
                (None, Some(rep)) => serde_json::json!({
                    "log_start_offset": rep.log_start_offset,
                    "hot_start_offset": null,
                    "cold_start_offset": null,
                    "high_watermark": rep.high_watermark,
                    "log_end_offset": rep.log_end_offset,
                }),
                (None, None) => serde_json::json!({
                    "log_start_offset": null,
                    "hot_start_offset": null,
                    "cold_start_offset": null,
                    "high_watermark": null,
                    "log_end_offset": null,
                }),
            };
            if let (Some(d), Some(o)) = (doc.as_object_mut(), offsets.as_object()) {
                d.extend(o.clone());
            }
            doc
        })
        .collect()
}

/// Changes config keys; answers the topic's description.
pub async fn patch(
    shard: &Rc<Shard>,
    p: &Principal,
    name: &str,
    changes: serde_json::Map<String, serde_json::Value>,
) -> Result<serde_json::Value, ApiError> {
    p.require(Operation::Alter, Resource::Topic, name)?;
    lookup_synced(shard, name).await?;
    let op = Op::PatchTopic {
        topic: name.to_string(),
        changes,
    };
    let meta = match shard.call(CONTROLLER_SHARD, op).await {
        Reply::Topic(Ok(meta)) => meta,
        Reply::Topic(Err(e)) | Reply::Done(Err(e)) => return Err(e),
        other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    };
    description(shard, &meta).await
}

pub async fn delete(shard: &Rc<Shard>, p: &Principal, name: &str) -> Result<serde_json::Value, ApiError> {
    p.require(Operation::Delete, Resource::Topic, name)?;
    lookup_synced(shard, name).await?;
    match shard
        .call(CONTROLLER_SHARD, Op::DeleteTopic(name.to_string()))
        .await
    {
        Reply::Done(Ok(())) => Ok(serde_json::json!({"name": name, "deleted": true})),
        Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}
