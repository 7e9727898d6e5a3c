//! Metadata: the brokers, the controller and each topic's partitions with
//! their leaders, as Kafka clients route by them (docs/kafka.md,
//! "Metadata" and "In a cluster").
//!
//! Standalone, this broker is the only broker, the controller and the
//! leader of every partition (epoch 0).
//!
//! In a cluster (docs/kafka.md, "In a cluster"):
//! - `brokers`: every node registered in the controller group with a
//!   Kafka address (`--kafka-advertised-addr`, else `--kafka-addr`);
//!   `controller_id` the controller group's leader (-1 while none);
//!   `cluster_id` the id the controller group agreed on;
//! - per partition, the leader as this node knows it (cluster/leaders.rs:
//!   its own replica when it leads, else the leader's latest report, else
//!   the leader its follower names): `leader` and `leader_epoch` = the
//!   Raft term; `replicas` the group's voters; `isr` the replicas the
//!   leader counts in sync (`--replica-lag-ms`; the leader alone while
//!   only this node's follower names it, the one replica known to hold
//!   every committed record); `offline_replicas` the replicas this node
//!   cannot reach now. A replica here that knows no leader (an election)
//!   answers LEADER_NOT_AVAILABLE with leader and epoch -1, so a client
//!   keeps what it knew and asks again;
//! - a partition this node holds no replica of and has no leader report
//!   for (yet) names its preferred leader (its first replica) with epoch
//!   -1, the hint a `not_leader` gives over HTTP: clients go there, and a
//!   client that already knows a leader with an epoch keeps it (librdkafka
//!   ignores an older epoch);
//! - a topic asked for by name and not known here is looked up again
//!   after the controller's read barrier, so a topic just created through
//!   another node is found.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;

use super::codec::s;
use super::handler::{this_broker, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION};
use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::cluster::leaders::LeaderView;
use crate::shard::message::{Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topics::admin;
use crate::topics::controller::ask_owners;
use crate::topics::topic::TopicMeta;

/// LEADER_NOT_AVAILABLE.
pub const LEADER_NOT_AVAILABLE: i16 = 5;

pub async fn metadata(
    shard: &Rc<Shard>,
    p: &Principal,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let all = req.topics.as_ref().is_none_or(|t| version == 0 && t.is_empty());
    let names: Vec<String> = if all {
        shard
            .catalog
            .snapshot()
            .values()
            .filter(|m| p.allows(Operation::Describe, Resource::Topic, &m.name))
            .map(|m| m.name.clone())
            .collect()
    } else {
        req.topics
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| t.name.map(|n| n.0.to_string()))
            .collect()
    };
    let cluster = if shard.config.cluster.enabled() {
        Some(Cluster::of(shard).await)
    } else {
        None
    };
    let mut topics = Vec::with_capacity(names.len());
    for name in names {
        let t = MetadataResponseTopic::default()
            .with_name(Some(TopicName(s(name.as_str()))))
            .with_is_internal(name.starts_with('_'));
        if !p.allows(Operation::Describe, Resource::Topic, &name) {
            topics.push(t.with_error_code(TOPIC_AUTHORIZATION_FAILED));
            continue;
        }
        let meta = match &cluster {
            // Not known here yet: after the controller's read barrier.
            Some(_) => admin::lookup_synced(shard, &name).await.ok(),
            None => shard.catalog.get(&name),
        };
        let Some(meta) = meta else {
            topics.push(t.with_error_code(UNKNOWN_TOPIC_OR_PARTITION));
            continue;
        };
        let partitions = match &cluster {
            Some(c) => c.partitions(shard, &meta).await,
            None => standalone_partitions(shard, &meta),
        };
        topics.push(t.with_partitions(partitions));
    }
    let out = MetadataResponse::default().with_topics(topics);
    match cluster {
        Some(c) => out
            .with_brokers(c.brokers)
            .with_cluster_id(Some(s(c.cluster_id)))
            .with_controller_id(BrokerId(c.controller)),
        None => {
            let (node, host, port) = this_broker(shard);
            let broker = MetadataResponseBroker::default()
                .with_node_id(BrokerId(node))
                .with_host(s(host))
                .with_port(port);
            out.with_brokers(vec![broker])
                .with_cluster_id(Some(s(shard.config.kafka.cluster_id.as_str())))
                .with_controller_id(BrokerId(node))
        }
    }
}

fn standalone_partitions(shard: &Shard, meta: &TopicMeta) -> Vec<MetadataResponsePartition> {
    let node = BrokerId(shard.config.node_id as i32);
    (0..meta.partitions as i32)
        .map(|i| {
            MetadataResponsePartition::default()
                .with_partition_index(i)
                .with_leader_id(node)
                .with_leader_epoch(0)
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect()
}

/// What a cluster node reports beside the partitions: the registered
/// brokers, the controller, the cluster id, the nodes it cannot reach.
struct Cluster {
    brokers: Vec<MetadataResponseBroker>,
    controller: i32,
    cluster_id: String,
    unreachable: BTreeSet<u64>,
}

impl Cluster {
    /// From the cluster view shard 0 keeps (`Op::Cluster`: the registry,
    /// the controller's leader, each peer's reachability). While the
    /// controller group is not open yet: this node alone, no controller.
    async fn of(shard: &Rc<Shard>) -> Cluster {
        let view = match shard.call(CONTROLLER_SHARD, Op::Cluster).await {
            Reply::Json(Ok(v)) => Some(v),
            _ => None,
        };
        let Some(view) = view else {
            let (node, host, port) = this_broker(shard);
            return Cluster {
                brokers: vec![MetadataResponseBroker::default()
                    .with_node_id(BrokerId(node))
                    .with_host(s(host))
                    .with_port(port)],
                controller: -1,
                cluster_id: shard.config.kafka.cluster_id.clone(),
                unreachable: BTreeSet::new(),
            };
        };
        let mut brokers = Vec::new();
        let mut unreachable = BTreeSet::new();
        for n in view["nodes"].as_array().into_iter().flatten() {
            let Some(id) = n["node_id"].as_u64() else { continue };
            if n["state"] != "up" {
                unreachable.insert(id);
            }
            let Some((host, port)) = n["kafka_addr"].as_str().and_then(host_port) else {
                continue;
            };
            brokers.push(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(id as i32))
                    .with_host(s(host))
                    .with_port(port),
            );
        }
        Cluster {
            brokers,
            controller: view["controller"]["leader"].as_u64().map_or(-1, |l| l as i32),
            cluster_id: view["cluster_id"]
                .as_str()
                .map_or_else(|| shard.config.kafka.cluster_id.clone(), str::to_string),
            unreachable,
        }
    }

    /// Each partition of `meta` as this node knows it (the module's notes).
    async fn partitions(&self, shard: &Rc<Shard>, meta: &TopicMeta) -> Vec<MetadataResponsePartition> {
        let replies = ask_owners(shard, meta, |partitions| Op::LeaderViews {
            topic: meta.name.clone(),
            partitions,
        })
        .await;
        let mut views: BTreeMap<u32, LeaderView> = BTreeMap::new();
        for reply in replies {
            if let Reply::LeaderViews(v) = reply {
                views.extend(v.into_iter().filter_map(|(p, v)| Some((p, v?))));
            }
        }
        let me = shard.config.node_id;
        let assignment = shard.catalog.assignment();
        (0..meta.partitions)
            .map(|p| {
                let assigned: Vec<u64> = assignment
                    .replicas(&meta.name, p)
                    .map(|r| r.replicas.clone())
                    .unwrap_or_default();
                let (leader, epoch, replicas, isr) = match views.get(&p) {
                    Some(v) => {
                        let (replicas, isr) = match &v.report {
                            Some(r) if !r.replicas.is_empty() => (
                                r.replicas.iter().map(|x| x.node_id).collect(),
                                r.replicas
                                    .iter()
                                    .filter(|x| x.in_sync)
                                    .map(|x| x.node_id)
                                    .collect(),
                            ),
                            // Only this node's follower names the leader:
                            // the one replica known to hold every commit.
                            _ => (assigned, vec![v.leader]),
                        };
                        (Some(v.leader), epoch_of(v.term), replicas, isr)
                    }
                    // A replica here that knows no leader: an election.
                    None if assigned.contains(&me) => (None, -1, assigned, Vec::new()),
                    // No replica here and no report from a leader yet: the
                    // preferred leader, as a hint.
                    None => (assigned.first().copied(), -1, assigned, Vec::new()),
                };
                let offline: Vec<u64> = replicas
                    .iter()
                    .copied()
                    .filter(|id| self.unreachable.contains(id))
                    .collect();
                MetadataResponsePartition::default()
                    .with_partition_index(p as i32)
                    .with_error_code(if leader.is_none() { LEADER_NOT_AVAILABLE } else { 0 })
                    .with_leader_id(BrokerId(leader.map_or(-1, |l| l as i32)))
                    .with_leader_epoch(epoch)
                    .with_replica_nodes(ids(&replicas))
                    .with_isr_nodes(ids(&isr))
                    .with_offline_replicas(ids(&offline))
            })
            .collect()
    }
}

/// A Raft term as a Kafka leader epoch.
pub fn epoch_of(term: u64) -> i32 {
    term.min(i32::MAX as u64) as i32
}

fn ids(nodes: &[u64]) -> Vec<BrokerId> {
    nodes.iter().map(|&n| BrokerId(n as i32)).collect()
}

/// `host:port` (an IPv6 host in brackets) as Metadata reports it.
fn host_port(addr: &str) -> Option<(String, i32)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(host_port("127.0.0.1:9092"), Some(("127.0.0.1".into(), 9092)));
        assert_eq!(host_port("[::1]:19092"), Some(("::1".into(), 19092)));
        assert_eq!(host_port("no-port"), None);
        assert_eq!(host_port("h:x"), None);
    }

    #[test]
    fn terms_past_i32_are_capped() {
        assert_eq!(epoch_of(7), 7);
        assert_eq!(epoch_of(u64::MAX), i32::MAX);
    }
}
