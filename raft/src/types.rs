//! The type configuration every openraft instance of es uses: `EsRaft`.
//!
//! One config for partition groups and the controller group alike: the
//! application data is a [`Proposal`] (record batches, or a controller
//! command), the response an [`Applied`], the entry an [`EsEntry`] whose
//! data batches are the partition log's own batches (the segment log is
//! the Raft log: docs/design/raft-storage.md).

use crate::entry::EsEntry;
use crate::runtime::GlommioRuntime;
use crate::snapshot::EsSnapshot;

/// A node of the cluster (`--node-id`).
pub type NodeId = u64;

/// A Raft group: 0 is the controller group, each partition replica set
/// has its own.
pub type GroupId = u64;

/// The group id of the controller group.
pub const CONTROLLER_GROUP: GroupId = 0;

openraft::declare_raft_types!(
    /// es's openraft type configuration.
    pub EsRaft:
        D = crate::entry::Proposal,
        R = crate::entry::Applied,
        NodeId = NodeId,
        Node = openraft::EmptyNode,
        Entry = EsEntry,
        SnapshotData = EsSnapshot,
        AsyncRuntime = GlommioRuntime,
);

/// The result openraft's storage traits return.
pub type StorageResult<T> = Result<T, openraft::StorageError<NodeId>>;

/// A log id of es: `(term, index)` (single-term-leader: the leader id of a
/// committed entry is its term alone).
pub type LogId = openraft::LogId<NodeId>;

/// A vote of es.
pub type Vote = openraft::Vote<NodeId>;

/// A membership of es (nodes carry no address: the controller's node
/// registry has them).
pub type Membership = openraft::Membership<NodeId, openraft::EmptyNode>;

/// A stored membership of es.
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::EmptyNode>;

/// The log id `(term, index)`.
pub fn log_id(term: u64, index: u64) -> LogId {
    openraft::LogId::new(openraft::CommittedLeaderId::new(term, 0), index)
}
