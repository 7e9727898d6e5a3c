//! Idempotent producers: id allocation on the controller shard (`ids.rs`),
//! what each shard knows of ids (`known.rs`), each partition's window of
//! recent batches (`idempotence.rs`) and its snapshots across restarts,
//! what one shard holds of all these (`local.rs`),
//! the expiry of idle ids, and the transport-neutral id request
//! (`admin.rs`).

pub mod admin;
pub mod expiry;
pub mod idempotence;
pub mod ids;
pub mod known;
pub mod local;
pub mod snapshot;
