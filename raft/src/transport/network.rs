//! `ShardNetwork`: a shard's client side of the raft transport: one
//! [`Peer`] per other node (one connection each, shared by every group on
//! the shard), the shard's byte budget and counters. [`ShardNetwork::group`]
//! gives each group openraft's network factory.

use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;

use crate::limits::FRAME_BYTES_MAX;
use crate::snapshot_send::SnapshotSource;
use crate::transport::budget::InflightBudget;
use crate::transport::codec;
use crate::transport::config::TransportConfig;
use crate::transport::error::TransportError;
use crate::transport::frame::{self, RaftKind};
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
                    config.cluster_id.clone(),
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
        GroupNetwork::new(group, self.clone(), None)
    }

    /// [`group`](Self::group), for a group that sends snapshots from
    /// `source` (a partition replica: `snapshot_send.rs`).
    pub(crate) fn group_with_snapshots(&self, group: GroupId, source: Rc<SnapshotSource>) -> GroupNetwork {
        GroupNetwork::new(group, self.clone(), Some(source))
    }

    /// Sends the control request `kind` with `payload` to `target` (its
    /// same shard) and returns the response's payload. An Error frame is
    /// `Remote`; a connection that ends after the request went out is
    /// `Lost` (the peer may have acted on it); failures before it went out
    /// are `Unreachable`, `UnknownPeer` or `Closed`. No timeout: callers
    /// bound the wait.
    pub async fn control_call(
        &self,
        target: NodeId,
        kind: RaftKind,
        payload: &[u8],
    ) -> Result<Bytes, TransportError> {
        if !kind.is_control() {
            return Err(TransportError::Malformed(format!(
                "{kind:?} is not a control request"
            )));
        }
        self.request(target, kind, payload).await
    }

    /// Asks `target` (its same shard) for a pre-vote
    /// (`crate::pre_vote`); errors as [`control_call`](Self::control_call).
    /// No timeout: callers bound the wait.
    pub(crate) async fn pre_vote(
        &self,
        target: NodeId,
        req: &codec::PreVoteRequest,
    ) -> Result<codec::PreVoteReply, TransportError> {
        let mut payload = Vec::new();
        codec::encode_pre_vote(&mut payload, req);
        let body = self.request(target, RaftKind::PreVote, &payload).await?;
        codec::decode_pre_vote_reply(body)
    }

    /// Sends the request `kind` with `payload` to `target`; the response's
    /// payload.
    async fn request(&self, target: NodeId, kind: RaftKind, payload: &[u8]) -> Result<Bytes, TransportError> {
        let peer = self.peer(target).ok_or(TransportError::UnknownPeer(target))?;
        let f = frame::encode(kind, 0, payload);
        if f.len() > FRAME_BYTES_MAX {
            return Err(TransportError::TooLarge {
                group: 0,
                bytes: f.len(),
            });
        }
        let (k, body) = peer.call(f).await?;
        if k == RaftKind::Error {
            let e = codec::decode_error(body)?;
            return Err(TransportError::Remote {
                node: target,
                code: e.code,
                message: e.message,
            });
        }
        if k != kind.response() {
            return Err(TransportError::Malformed(format!("{k:?} answers {kind:?}")));
        }
        Ok(body)
    }

    /// Asks `target` to answer an empty Heartbeats frame (0x42 with no
    /// heartbeat: answered at once, touching no group), over the shared
    /// connection, opening it if needed: whether the peer is reachable and
    /// serving now. No timeout: callers bound the wait.
    pub async fn ping(&self, target: NodeId) -> Result<(), TransportError> {
        let peer = self.peer(target).ok_or(TransportError::UnknownPeer(target))?;
        let mut payload = Vec::new();
        codec::encode_heartbeats(&mut payload, &[]);
        let (k, body) = peer
            .call(frame::encode(RaftKind::Heartbeats, 0, &payload))
            .await?;
        if k == RaftKind::Error {
            let e = codec::decode_error(body)?;
            return Err(TransportError::Remote {
                node: target,
                code: e.code,
                message: e.message,
            });
        }
        if k != RaftKind::Heartbeats.response() {
            return Err(TransportError::Malformed(format!("{k:?} answers a ping")));
        }
        Ok(())
    }

    /// Whether this shard's connection to `node` is open now.
    pub fn connected(&self, node: NodeId) -> bool {
        self.peers.get(&node).is_some_and(|p| p.is_connected())
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
