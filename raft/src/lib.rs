//! es-raft: replication for es, everything that faces openraft.
//!
//! openraft 0.9.25 lives behind this crate only, so that a move to 0.10
//! stays here (docs/design/raft-storage.md). Table of contents:
//!
//! - `types`: `EsRaft`, the type configuration, and the id types.
//! - `config`: openraft's configuration for a partition group.
//! - `runtime`: `GlommioRuntime`, openraft's runtime on a glommio shard.
//! - `entry`: `EsEntry`, what a client proposes and what it gets back.
//! - `snapshot`: `EsSnapshot`, a snapshot's data.
//! - `sm_snapshot`: the snapshot meta's JSON, ids and keeping, shared by
//!   the controller's and a partition's state machines.
//! - `snapshot_send`: `SnapshotSource`, a leader streaming a snapshot.
//! - `snapshot_recv`: `SnapshotReceiver`, a follower staging one.
//! - `snapshot_install`: installing a staged snapshot in the log, and
//!   finishing an install a crash interrupted.
//! - `membership`: a membership as bytes (control batches, images).
//! - `mem_store`: an in-memory log store and state machine (tests, and the
//!   reference the storage conformance suite is checked against).
//! - `log_store`: `LogStore`, the Raft log over a partition log.
//! - `partition_sm`: `PartitionSm`, a partition replica's state machine.
//! - `producer_window`: `ProducerWindow`, a partition's idempotent window
//!   (applied on every replica).
//! - `meta`: `RaftMeta`, a replica's vote, purge point and snapshot.
//! - `group`: `PartitionRaft`, a partition replica's Raft group (what the
//!   broker holds per replica).
//! - `restart`: a replica's group started again after its log store
//!   failed (a full disk), once the disk takes writes.
//! - `group_instance`: one openraft instance of a replica and what is
//!   built over it (store, state machine, Proposer).
//! - `group_start`: `Initialize`, how a new partition's group starts (the
//!   preferred replica first).
//! - `proposer`: `Proposer`, a leader's produce queue: concurrent produces
//!   coalesced into one entry per round; `ProduceError`, the answers.
//! - `replica_stats`: `ReplicaStats`, a replica's counters.
//! - `election_timer`: `ElectionTimer`, a shard's election timeouts (one
//!   ticker for all its groups; openraft's own timer is off).
//! - `pre_vote`: what an expired election clock does first: ask the
//!   voters whether it could win (openraft 0.9 has no pre-vote).
//! - `limits`: every bound of this crate, with its unit and reason.
//! - `transport`: the network between replicas (frames, mutual TLS,
//!   heartbeat coalescing, the server's group registry).
//! - `controller`: the controller group (raft0): the cluster's metadata,
//!   commands forwarded to its leader, read barriers.

pub mod config;
pub mod controller;
pub mod election_timer;
pub mod entry;
pub mod group;
mod group_instance;
mod group_start;
pub mod limits;
pub mod log_store;
pub mod mem_store;
pub mod membership;
pub mod meta;
pub mod partition_sm;
pub mod pre_vote;
pub mod producer_window;
pub mod proposer;
pub mod replica_stats;
mod restart;
pub mod runtime;
pub mod sm_snapshot;
pub mod snapshot;
pub mod snapshot_image;
pub mod snapshot_install;
pub mod snapshot_recv;
pub mod snapshot_send;
pub mod transport;
pub mod types;

pub use config::partition_config;
pub use entry::{Applied, EntryBatch, EsEntry, EsPayload, Proposal};
pub use group::{BatchRules, GroupConfig, MetricsWatch, PartitionRaft};
pub use group_start::Initialize;
pub use log_store::LogStore;
pub use meta::RaftMeta;
pub use partition_sm::PartitionSm;
pub use producer_window::{ProducerFields, ProducerWindow};
pub use proposer::{ProduceError, Proposer, ProposerConfig};
pub use replica_stats::{ReplicaObserver, ReplicaStats};
pub use runtime::{rpc_timeout_floor, set_raft_task_queue, set_rpc_timeout_floor, GlommioRuntime};
pub use snapshot::{EsSnapshot, StagedSuffix};
pub use types::{log_id, EsRaft, GroupId, LogId, NodeId, StorageResult, Vote, CONTROLLER_GROUP};

/// openraft, re-exported: callers outside this crate name its types
/// through here, so that the version stays one line of `raft/Cargo.toml`.
pub use openraft;
