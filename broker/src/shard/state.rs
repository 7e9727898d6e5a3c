//! Broker-wide state shared by all shards and the main thread: readiness,
//! shutdown, and the API-key table. Atomics only (the key table is an
//! `ArcSwap`); nothing here blocks.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// `controller_leader` while the controller group knows no leader.
pub const NO_LEADER: u64 = u64::MAX;

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
    /// Cluster mode: the controller group's leader as this node knows it,
    /// [`NO_LEADER`] while none (shard 0 keeps it: cluster/health.rs).
    pub controller_leader: AtomicU64,
    /// Cluster mode: partition replicas assigned to this node and not open
    /// yet. The reconciler that opens them keeps it (0 when it has none to
    /// open); `/ready` waits for 0.
    pub replicas_opening: AtomicUsize,
}

impl Default for BrokerState {
    fn default() -> BrokerState {
        BrokerState {
            ready_shards: AtomicUsize::new(0),
            shutting_down: AtomicBool::new(false),
            drained_shards: AtomicUsize::new(0),
            closed_shards: AtomicUsize::new(0),
            shard_failed: AtomicBool::new(false),
            unclean_partitions: AtomicUsize::new(0),
            shard_thread_ended: AtomicUsize::new(0),
            keys: crate::auth::Keys::default(),
            controller_leader: AtomicU64::new(NO_LEADER),
            replicas_opening: AtomicUsize::new(0),
        }
    }
}

impl BrokerState {
    pub fn is_ready(&self, shards: usize) -> bool {
        self.ready_shards.load(Ordering::Acquire) == shards && !self.is_shutting_down()
    }

    /// The controller group's leader, if this node knows one.
    pub fn controller_leader(&self) -> Option<u64> {
        match self.controller_leader.load(Ordering::Acquire) {
            NO_LEADER => None,
            l => Some(l),
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}
