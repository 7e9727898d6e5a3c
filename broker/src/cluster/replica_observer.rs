//! `ReplicaMetrics`: a partition replica's observer (es_raft's
//! `ReplicaObserver`), recording each produce's commit latency
//! (`es_raft_commit_latency_seconds`: submitted, proposed, committed on a
//! majority, applied) and each proposed entry's batches
//! (`es_raft_entry_batches`: the Proposer's coalescing) in the exporter's
//! histograms. Set on every replica as it opens (ops/open.rs).

use std::time::Duration;

use es_raft::{PartitionRaft, ReplicaObserver};
use metrics::Histogram;

/// The histograms a replica records into (shared by every replica).
pub struct ReplicaMetrics {
    commit: Histogram,
    batches: Histogram,
}

impl ReplicaObserver for ReplicaMetrics {
    fn committed(&self, latency: Duration) {
        self.commit.record(latency.as_secs_f64());
    }

    fn proposed(&self, batches: usize, _bytes: usize) {
        self.batches.record(batches as f64);
    }
}

/// Makes `raft` record into the histograms.
pub fn observe(raft: &PartitionRaft) {
    raft.stats().set_observer(Some(Box::new(ReplicaMetrics {
        commit: metrics::histogram!("es_raft_commit_latency_seconds"),
        batches: metrics::histogram!("es_raft_entry_batches"),
    })));
}
