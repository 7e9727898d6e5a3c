//! Broker-wide state shared by all shards and the main thread: readiness,
//! shutdown, and the API-key table. Atomics only (the key table is an
//! `ArcSwap`); nothing here blocks.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[derive(Default)]
pub struct BrokerState {
    /// Shards that finished recovering their partitions.
    pub ready_shards: AtomicUsize,
    /// Set by the signal thread on SIGTERM/SIGINT.
    pub shutting_down: AtomicBool,
    /// Shards that stopped serving clients and drained their connections.
    pub drained_shards: AtomicUsize,
    /// Shards that closed every partition (final fsync done).
    pub closed_shards: AtomicUsize,
    /// A shard failed (its error is in the log).
    pub shard_failed: AtomicBool,
    /// Partitions that did not close cleanly at shutdown (the next start
    /// recovers them); a stop with any is not a clean one.
    pub unclean_partitions: AtomicUsize,
    /// One more than the id of a shard whose thread ended (a panic); 0
    /// while none has.
    pub shard_thread_ended: AtomicUsize,
    /// `--auth` and the API-key table (auth/table.rs), loaded before the
    /// shards run and published by the controller after each durable change.
    pub keys: crate::auth::Keys,
}

impl BrokerState {
    pub fn is_ready(&self, shards: usize) -> bool {
        self.ready_shards.load(Ordering::Acquire) == shards && !self.is_shutting_down()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}
