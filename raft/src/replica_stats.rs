//! `ReplicaStats`: a partition replica's counters, read by the broker,
//! which names and exports them (this crate registers no metrics).
//!
//! Counters only grow. Two figures a counter cannot carry go to an
//! optional [`ReplicaObserver`] the broker sets: each produce's commit
//! latency (submit to apply) and each proposal's size (batches per entry:
//! the Proposer's coalescing).

use std::cell::{Cell, RefCell};
use std::time::Duration;

use crate::proposer::ProduceError;

/// Told of each commit and each proposal as they happen (a histogram's
/// input); runs on the replica's shard, so it must be quick.
pub trait ReplicaObserver {
    /// A produce was answered with its offset `latency` after it was
    /// submitted (queued, proposed, committed on a majority, applied).
    fn committed(&self, latency: Duration);
    /// An entry of `batches` produced batches (`bytes` in all) was proposed.
    fn proposed(&self, batches: usize, bytes: usize);
}

/// A replica's counters; see the module's notes.
#[derive(Default)]
pub struct ReplicaStats {
    /// Entries the Proposer proposed (`client_write` calls).
    pub entries_proposed: Cell<u64>,
    /// Produced batches in those entries: over `entries_proposed`, the
    /// mean coalescing.
    pub batches_proposed: Cell<u64>,
    /// Produces answered with their offset.
    pub produced: Cell<u64>,
    /// Produces refused with `NotLeader`.
    pub not_leader: Cell<u64>,
    /// Produces refused with `LeaderNotAvailable`.
    pub leader_not_available: Cell<u64>,
    /// Produces answered `OutcomeUnknown`.
    pub outcome_unknown: Cell<u64>,
    /// Produces refused as `Invalid`.
    pub invalid: Cell<u64>,
    /// Idempotent produces refused by the partition's window (`Refused`:
    /// fenced, out of order, an old sequence).
    pub producer_refused: Cell<u64>,
    /// Retries of idempotent batches answered with the first write's
    /// offsets, nothing written (also counted in `produced`).
    pub duplicates: Cell<u64>,
    /// Sum of the commit latencies of `produced`, in microseconds.
    pub commit_latency_us_sum: Cell<u64>,
    /// Terms this replica has seen begin after it opened (each is an
    /// election somewhere in the group).
    pub elections: Cell<u64>,
    /// Times this replica became leader.
    pub became_leader: Cell<u64>,
    /// Snapshots `retain_below` triggered (descriptors: O(1) each).
    pub snapshots_triggered: Cell<u64>,
    /// Purges `retain_below` asked openraft for.
    pub purges_asked: Cell<u64>,
    /// Bytes of stored batches this replica streamed to followers in
    /// snapshot transfers (`es_raft_snapshot_bytes_total{dir="sent"}`).
    pub snapshot_bytes_sent: Cell<u64>,
    /// Bytes of stored batches this replica received and staged in
    /// snapshot transfers (`{dir="received"}`).
    pub snapshot_bytes_received: Cell<u64>,
    /// Snapshot transfers this replica finished as the sender.
    pub snapshots_sent: Cell<u64>,
    /// Snapshots this replica installed from a leader's transfer, and of
    /// those, how many replaced its whole log (its applied end was below
    /// the leader's first hot offset).
    pub snapshots_installed: Cell<u64>,
    pub whole_log_installs: Cell<u64>,
    /// Times this replica's group stopped on a storage error (its log
    /// store failed: a full disk), and times it started again after one
    /// (`restart.rs`).
    pub storage_failures: Cell<u64>,
    pub storage_restarts: Cell<u64>,
    observer: RefCell<Option<Box<dyn ReplicaObserver>>>,
}

impl ReplicaStats {
    /// Sets (or with `None` clears) the observer.
    pub fn set_observer(&self, observer: Option<Box<dyn ReplicaObserver>>) {
        *self.observer.borrow_mut() = observer;
    }

    pub(crate) fn add(c: &Cell<u64>, n: u64) {
        c.set(c.get().saturating_add(n));
    }

    pub(crate) fn note_committed(&self, latency: Duration) {
        bump(&self.produced);
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.commit_latency_us_sum
            .set(self.commit_latency_us_sum.get().saturating_add(us));
        if let Some(o) = self.observer.borrow().as_ref() {
            o.committed(latency);
        }
    }

    pub(crate) fn note_proposed(&self, batches: usize, bytes: usize) {
        bump(&self.entries_proposed);
        self.batches_proposed
            .set(self.batches_proposed.get() + batches as u64);
        if let Some(o) = self.observer.borrow().as_ref() {
            o.proposed(batches, bytes);
        }
    }

    pub(crate) fn note_refused(&self, e: &ProduceError) {
        bump(match e {
            ProduceError::NotLeader { .. } => &self.not_leader,
            ProduceError::LeaderNotAvailable(_) => &self.leader_not_available,
            ProduceError::OutcomeUnknown(_) => &self.outcome_unknown,
            ProduceError::Invalid(_) => &self.invalid,
            ProduceError::Refused(_) => &self.producer_refused,
        });
    }
}

pub(crate) fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}
