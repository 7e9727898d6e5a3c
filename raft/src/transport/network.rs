//! `ShardNetwork`: a shard's client side of the raft transport: one
//! [`Peer`] per other node (one connection each, shared by every group on
//! the shard), the shard's byte budget and counters. [`ShardNetwork::group`]
//! gives each group openraft's network factory.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::transport::budget::InflightBudget;
use crate::transport::config::TransportConfig;
use crate::transport::link::GroupNetwork;
use crate::transport::peer::Peer;
use crate::transport::preamble::Preamble;
use crate::transport::stats::TransportStats;
use crate::types::{GroupId, NodeId};

/// The shard's peers; clones share them.
#[derive(Clone)]
pub struct ShardNetwork {
    peers: Rc<BTreeMap<NodeId, Rc<Peer>>>,
    stats: Rc<TransportStats>,
    append_bytes_max: usize,
}

impl ShardNetwork {
    /// The client side for shard `shard` of this node: connections go to
    /// the same shard index on every peer (`--shards` equal on all nodes
    /// keeps a group's replicas on one shard index). `stats` and `budget`
    /// are the shard's, shared with its [`RaftServer`](super::RaftServer).
    pub fn new(
        config: &TransportConfig,
        shard: u16,
        stats: Rc<TransportStats>,
        budget: InflightBudget,
    ) -> ShardNetwork {
        let peers = config
            .peers
            .iter()
            .filter(|(&id, _)| id != config.node_id)
            .map(|(&id, &addr)| {
                let preamble = Preamble {
                    source_node: config.node_id,
                    source_shard: shard,
                    dest_shard: shard,
                    cluster_hash: config.cluster_hash,
                };
                let peer = Peer::new(
                    id,
                    addr,
                    preamble,
                    config.tls.clone(),
                    config.heartbeat_coalesce,
                    stats.clone(),
                    budget.clone(),
                );
                (id, Rc::new(peer))
            })
            .collect();
        ShardNetwork {
            peers: Rc::new(peers),
            stats,
            append_bytes_max: config.append_bytes_max,
        }
    }

    /// openraft's network factory for `group`: pass it to `Raft::new`.
    pub fn group(&self, group: GroupId) -> GroupNetwork {
        GroupNetwork::new(group, self.clone())
    }

    pub(crate) fn append_bytes_max(&self) -> usize {
        self.append_bytes_max
    }

    pub(crate) fn peer(&self, node: NodeId) -> Option<Rc<Peer>> {
        self.peers.get(&node).cloned()
    }

    /// The shard's counters.
    pub fn stats(&self) -> &Rc<TransportStats> {
        &self.stats
    }

    /// Closes every connection; requests from now on fail (the shard is
    /// stopping).
    pub fn close(&self) {
        for p in self.peers.values() {
            p.close();
        }
    }
}
