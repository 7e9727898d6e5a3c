//! What a shard of a cluster node knows of the leaders of the partitions
//! it owns (the same shard index owns a partition on every node): its own
//! replica when it leads, else the leader's latest report
//! (cluster/reports.rs) unless this node's replica is in a later term,
//! else the leader its replica follows. Describe's leader fields
//! (`Op::LeaderViews`) and the counts of `GET /v1/cluster` and the metrics
//! (`Op::PartitionCounts`) read it; nothing here waits.

use std::time::Duration;

use es_raft::NodeId;

use crate::cluster::leader_report::LeaderReport;
use crate::cluster::reports::local_report;
use crate::shard::Shard;

/// A partition's leader as this shard knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderView {
    pub leader: NodeId,
    pub term: u64,
    /// The leader's own account: this node's replica leading (age zero) or
    /// a peer's report `age` old; `None` when only this node's follower
    /// names the leader (no report from it yet).
    pub report: Option<LeaderReport>,
    pub age: Duration,
}

/// The partitions of this shard's part of the cluster, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionCounts {
    /// Partitions assigned (every node's, not only this node's replicas).
    pub total: u64,
    /// Without a leader that takes produces: none known, or one that has
    /// not heard from a quorum within twice the election timeout.
    pub leaderless: u64,
    /// With a leader that counts fewer replicas in sync than it has.
    pub under_replicated: u64,
}

impl PartitionCounts {
    pub fn add(&mut self, other: PartitionCounts) {
        self.total += other.total;
        self.leaderless += other.leaderless;
        self.under_replicated += other.under_replicated;
    }
}

/// The leader of `topic`/`partition` (a partition this shard owns) as this
/// shard knows it, if it knows one.
pub fn view(shard: &Shard, topic: &str, partition: u32) -> Option<LeaderView> {
    let t = shard.raft.as_ref()?;
    let local = shard.partitions.borrow().replica(topic, partition);
    if let Some(r) = local.as_ref().and_then(|raft| local_report(shard, raft)) {
        return Some(LeaderView {
            leader: shard.config.node_id,
            term: r.term,
            report: Some(r),
            age: Duration::ZERO,
        });
    }
    let group = match &local {
        Some(raft) => Some(raft.group()),
        None => shard
            .catalog
            .assignment()
            .replicas(topic, partition)
            .map(|r| r.group),
    };
    let local_term = local.as_ref().map_or(0, |r| r.term());
    if let Some(h) = group.and_then(|g| t.control.reports.fresh(g)) {
        if h.report.term >= local_term {
            return Some(LeaderView {
                leader: h.leader,
                term: h.report.term,
                age: h.received.elapsed(),
                report: Some(h.report),
            });
        }
    }
    let raft = local?;
    let leader = raft.leader().filter(|&l| l != shard.config.node_id)?;
    Some(LeaderView {
        leader,
        term: raft.term(),
        report: None,
        age: Duration::ZERO,
    })
}

/// Counts the partitions of the controller's assignment this shard owns.
pub fn counts(shard: &Shard) -> PartitionCounts {
    let mut c = PartitionCounts::default();
    let assignment = shard.catalog.assignment();
    for (topic, partitions) in &assignment.topics {
        for (p, assigned) in partitions.iter().enumerate() {
            let p = p as u32;
            if shard.owner(topic, p) != shard.id {
                continue;
            }
            c.total += 1;
            match view(shard, topic, p) {
                None => c.leaderless += 1,
                Some(LeaderView { report: Some(r), .. }) => {
                    if !r.available {
                        c.leaderless += 1;
                    } else if under_replicated(&r, assigned.replicas.len()) {
                        c.under_replicated += 1;
                    }
                }
                // A leader named by this node's follower, not heard from
                // yet: led, its replicas' progress unknown.
                Some(_) => {}
            }
        }
    }
    c
}

/// Whether a leader's report counts fewer replicas in sync than there are
/// (its voters; the assignment's `assigned` while it reports none).
pub fn under_replicated(r: &LeaderReport, assigned: usize) -> bool {
    let voters = if r.replicas.is_empty() {
        assigned
    } else {
        r.replicas.len()
    };
    r.replicas.iter().filter(|p| p.in_sync).count() < voters
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::leader_report::ReplicaProgress;

    #[test]
    fn under_replicated_counts_replicas_in_sync() {
        let progress = |in_sync: &[bool]| LeaderReport {
            group: 1,
            term: 1,
            high_watermark: 0,
            log_start_offset: 0,
            log_end_offset: 0,
            available: true,
            replicas: in_sync
                .iter()
                .enumerate()
                .map(|(i, &in_sync)| ReplicaProgress {
                    node_id: i as u64 + 1,
                    in_sync,
                    lag: 0,
                })
                .collect(),
        };
        assert!(!under_replicated(&progress(&[true, true, true]), 3));
        assert!(under_replicated(&progress(&[true, false, true]), 3));
        assert!(!under_replicated(&progress(&[true]), 1));
        assert!(under_replicated(&progress(&[]), 3), "nothing known in sync");
    }
}
