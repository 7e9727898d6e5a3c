//! Topics: metadata and its `meta.json`, the catalog every shard reads, the
//! controller that changes it (shard 0), the transport-neutral topic
//! operations (`admin.rs`), and the clean-up of partitions' files
//! (retention and tiering passes, deleted directories, directory removal).

pub mod admin;
pub mod catalog;
pub mod cleanup;
pub mod controller;
pub mod fsops;
pub mod topic;
pub mod trash;
