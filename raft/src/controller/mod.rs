//! The controller group ("raft0", group 0): the cluster's metadata
//! replicated on shard 0 of every node, all nodes voters
//! (docs/design/raft-controller.md; the spec's §3).
//!
//! - `state`: `ClusterState` (cluster uuid, node registry, topics with
//!   their partition groups and replicas) and how a command changes it.
//! - `command`: `ControllerCommand`, `Refusal`, the outcome's encoding.
//! - `producers`: `ProducerRegistry`, producer ids and epochs
//!   (`InitProducer`).
//! - `offsets`: `GroupOffsets`, consumer groups' committed offsets
//!   (`CommitOffsets`, `DeleteGroup`).
//! - `store`: `ControllerStore`, the group's log (a version 2 partition
//!   log; a command is a one-record batch).
//! - `machine`: `ControllerSm`, the state machine (apply, snapshots, the
//!   applied-state watch).
//! - `config`: `ControllerConfig`, and openraft's config from it.
//! - `error`: `ControllerError`.
//! - `handle`: `Controller`: open, propose (forwarded to the leader),
//!   read barrier, state, shutdown.
//! - `restart`: the group started again after its log store failed (a
//!   full disk), once the disk takes writes.
//! - `service`: the answers to the controller's control frames (0x48
//!   ControllerPropose, 0x49 ControllerReadIndex).

pub mod command;
pub mod config;
pub mod error;
pub mod handle;
pub mod machine;
pub mod offsets;
pub mod producers;
mod restart;
pub mod service;
pub mod state;
pub mod store;

pub use command::{refusal, ControllerCommand, Refusal};
pub use config::ControllerConfig;
pub use error::ControllerError;
pub use handle::{new_uuid, Controller};
pub(crate) use machine::read_image_meta;
pub use machine::{AppliedState, ControllerSm};
pub use offsets::{offsets_json, Committed, GroupOffsets};
pub use producers::{Issued, ProducerRegistry};
pub use state::{ClusterState, NodeInfo, PartitionAssignment, TopicRecord};
pub use store::ControllerStore;
/// The channel of [`Controller::applied`] (tokio's watch, which needs no
/// tokio runtime).
pub use tokio::sync::watch;
