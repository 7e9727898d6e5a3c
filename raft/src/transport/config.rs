//! `TransportConfig`: what a shard's raft transport is told at start
//! (phase 2a fills it from the broker's flags).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::limits::{
    APPEND_BYTES_MAX_DEFAULT, HEARTBEAT_COALESCE_US_DEFAULT, INFLIGHT_SHARD_BYTES_DEFAULT,
    RPC_TIMEOUT_MS_DEFAULT,
};
use crate::transport::preamble::{cluster_field, ClusterId};
use crate::transport::tls::PeerTls;
use crate::types::NodeId;

/// One shard's transport settings. `Send + Sync`: built once on the main
/// thread, cloned to each shard.
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// This node (`--node-id`).
    pub node_id: NodeId,
    /// The raft address of every node (`--peers`, resolved at start), this
    /// one included; connections go to these.
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// The roster's hash (`preamble::cluster_hash` of the node ids; its
    /// high 32 bits go in the preamble): a connection from another roster
    /// is refused.
    pub cluster_hash: u64,
    /// The cluster id once known, shared by every shard (set by the
    /// broker when the controller agrees on one): a connection from a node
    /// that knows another id is refused.
    pub cluster_id: ClusterId,
    /// Mutual TLS (`--peer-cert/--peer-key/--peer-ca`); `None` is
    /// `--raft-insecure`: plaintext.
    pub tls: Option<Arc<PeerTls>>,
    /// `--raft-heartbeat-coalesce-us`: how long the first queued heartbeat
    /// to a peer waits for others.
    pub heartbeat_coalesce: Duration,
    /// `--raft-append-bytes-max`: an AppendEntries of more than one entry
    /// over this many bytes is refused with openraft's `PayloadTooLarge`
    /// (openraft sends fewer entries); a single entry always goes.
    pub append_bytes_max: usize,
    /// `--raft-inflight-shard-bytes`: bytes of raft frames being sent or
    /// received on the shard at once.
    pub inflight_shard_bytes: usize,
    /// `--raft-rpc-timeout-ms`: the least time openraft gives an RPC
    /// (`runtime.rs`); set on each shard with its transport.
    pub rpc_timeout: Duration,
}

impl TransportConfig {
    /// A plaintext config with the spec's defaults.
    pub fn new(node_id: NodeId, peers: BTreeMap<NodeId, SocketAddr>, cluster_hash: u64) -> TransportConfig {
        TransportConfig {
            node_id,
            peers,
            cluster_hash,
            cluster_id: ClusterId::default(),
            tls: None,
            heartbeat_coalesce: Duration::from_micros(HEARTBEAT_COALESCE_US_DEFAULT),
            append_bytes_max: APPEND_BYTES_MAX_DEFAULT,
            inflight_shard_bytes: INFLIGHT_SHARD_BYTES_DEFAULT,
            rpc_timeout: Duration::from_millis(RPC_TIMEOUT_MS_DEFAULT),
        }
    }

    /// The preamble's cluster field now: the roster and the id if known.
    pub fn cluster_field(&self) -> u64 {
        cluster_field(self.cluster_hash, self.cluster_id.hash())
    }
}
