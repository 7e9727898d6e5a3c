//! Idempotent producers: id allocation on the controller shard (`ids.rs`),
//! what each shard knows of ids (`known.rs`), each partition's window of
//! recent batches (`idempotence.rs`) and its snapshots across restarts,
//! what one shard holds of all these (`local.rs`),
//! the expiry of idle ids, and the transport-neutral id request
//! (`admin.rs`). On a cluster node, ids come from the controller group
//! instead (`cluster.rs`).

pub mod admin;
pub mod cluster;
pub mod expiry;
pub mod idempotence;
pub mod ids;
pub mod known;
pub mod local;
pub mod snapshot;
