//! `Assignment`: what every shard of a cluster node needs to know of the
//! controller's state besides the topics' metadata: each partition's
//! replicas and group, and each node's client addresses (where a
//! `not_leader` sends the client). Published by the reconciler on shard 0
//! after each applied run of controller entries, read lock-free by every
//! shard through the catalog (`Catalog::assignment`).

use std::collections::BTreeMap;

use es_raft::controller::ClusterState;
use es_raft::{GroupId, NodeId};

use crate::error::LeaderInfo;

/// One partition's group and replicas (`replicas[0]` the preferred
/// leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replicas {
    pub group: GroupId,
    pub replicas: Vec<NodeId>,
}

/// The controller's assignment as of `applied_index`.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    /// The controller log index this was published at (0: nothing yet).
    pub applied_index: u64,
    /// Registered nodes' client addresses.
    pub nodes: BTreeMap<NodeId, LeaderInfo>,
    /// Registered nodes' Kafka listeners (`HOST:PORT`), of those with one.
    pub kafka: BTreeMap<NodeId, String>,
    /// Per topic, per partition.
    pub topics: BTreeMap<String, Vec<Replicas>>,
}

impl Assignment {
    /// The assignment of the controller's `state` at `index`.
    pub fn of(index: u64, state: &ClusterState) -> Assignment {
        let nodes = state
            .nodes
            .iter()
            .map(|(&id, n)| {
                (
                    id,
                    LeaderInfo {
                        node_id: id,
                        http_addr: n.http_addr.clone(),
                        binary_addr: n.binary_addr.clone(),
                    },
                )
            })
            .collect();
        let kafka = state
            .nodes
            .iter()
            .filter_map(|(&id, n)| Some((id, n.kafka_addr.clone()?)))
            .collect();
        let topics = state
            .topics
            .iter()
            .map(|(name, t)| {
                let ps = t
                    .partitions
                    .iter()
                    .map(|a| Replicas {
                        group: a.group,
                        replicas: a.replicas.clone(),
                    })
                    .collect();
                (name.clone(), ps)
            })
            .collect();
        Assignment {
            applied_index: index,
            nodes,
            kafka,
            topics,
        }
    }

    /// The replicas of a partition, if the topic and partition exist.
    pub fn replicas(&self, topic: &str, partition: u32) -> Option<&Replicas> {
        self.topics.get(topic)?.get(partition as usize)
    }

    /// Where node `id` answers clients, once it registered.
    pub fn node(&self, id: NodeId) -> Option<LeaderInfo> {
        self.nodes.get(&id).cloned()
    }
}
