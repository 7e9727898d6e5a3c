//! `TransportError`: what can go wrong between two raft peers.

use thiserror::Error;

use crate::types::{GroupId, NodeId};

/// A failure of the raft transport. Each becomes an openraft
/// `RPCError::Unreachable` on the sending side (openraft backs off and
/// retries), except a too-large AppendEntries (`PayloadTooLarge`).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// Bytes a peer sent that are not a valid frame or payload.
    #[error("malformed raft frame: {0}")]
    Malformed(String),
    /// The peer answered with an Error frame (`unknown_group`, `not_ready`, ...).
    #[error("node {node} answered {code}: {message}")]
    Remote {
        node: NodeId,
        code: String,
        message: String,
    },
    /// No connection to the peer (connect failed, lost, or backing off).
    #[error("node {node} unreachable: {why}")]
    Unreachable { node: NodeId, why: String },
    /// The connection ended after the request was sent and before its
    /// answer: the peer may have acted on it.
    #[error("node {node}: connection lost before the answer: {why}")]
    Lost { node: NodeId, why: String },
    /// The peer is not in this shard's peer list.
    #[error("node {0} is not a known peer")]
    UnknownPeer(NodeId),
    /// A frame this node would send is over the frame limit.
    #[error("group {group}: a frame of {bytes} bytes is over the raft frame limit")]
    TooLarge { group: GroupId, bytes: usize },
    /// The transport was closed (the shard is stopping).
    #[error("the raft transport is closed")]
    Closed,
}

/// Error codes an Error frame carries.
pub mod code {
    /// No group of that id on the receiving shard (not applied yet, or gone).
    pub const UNKNOWN_GROUP: &str = "unknown_group";
    /// The group exists but cannot answer yet (opening, or stopped).
    pub const NOT_READY: &str = "not_ready";
    /// The request could not be decoded.
    pub const MALFORMED: &str = "malformed";
    /// A control frame this shard has no handler for (or its handler
    /// does not take that kind).
    pub const UNSUPPORTED: &str = "unsupported";
}
