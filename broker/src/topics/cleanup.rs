//! The per-shard cleanup task: every `--cleanup-interval-ms`, one cleanup
//! pass (retention, compaction, tiering: `PartitionLog::cleanup`) over each
//! partition this shard owns, one partition at a time. It runs in its own
//! glommio task queue with a small share of the shard, so produce and fetch
//! keep their latency while a compaction rewrites segments; the storage
//! engine yields between bounded steps. Each pass ends with the consumer
//! groups' offset retention (`coordinator::clean_offsets`). Also the
//! shard's cold store. On the controller, each tick also sweeps expired
//! producer ids (producers/expiry.rs).
//!
//! In cluster mode purge is retention (the spec's §5.2): a replica's
//! cleanup touches only what its Raft group purged (`PartitionRaft::
//! retain_below` raises the log's cleanup limit), so each pass first asks
//! the group to purge up to its own retention cut (`retain`). Every
//! replica, leader and followers, does so on its own; a replica that was
//! away longer than retention gets the leader's log by snapshot
//! (docs/design/raft-snapshots.md).

use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use es_storage::{CleanupReport, ColdStore, ColdTier, LocalDirColdStore};
use futures::FutureExt;
use glommio::{Latency, Shares};

use crate::limits::CLEANUP_SHARES;
use crate::operate::config::Config;
use crate::shard::Shard;

/// The cold store partitions of this broker use (`--cold-dir`).
pub fn cold_store(config: &Config) -> Rc<dyn ColdStore> {
    Rc::new(LocalDirColdStore::new(config.cold_dir()))
}

/// A partition's name in the cold store.
pub fn cold_key(topic: &str, partition: u32) -> String {
    format!("{topic}/{partition}")
}

/// The cold tier a partition opens with.
pub fn cold_tier(config: &Config, topic: &str, partition: u32) -> ColdTier {
    ColdTier {
        store: cold_store(config),
        partition: cold_key(topic, partition),
    }
}

/// Starts this shard's cleanup task (it stops at shutdown).
pub fn spawn(shard: Rc<Shard>) {
    let queue = glommio::executor().create_task_queue(
        Shares::Static(CLEANUP_SHARES),
        Latency::NotImportant,
        "cleanup",
    );
    match glommio::spawn_local_into(run(shard), queue) {
        Ok(task) => {
            task.detach();
        }
        Err(e) => tracing::error!(error = %e, "cleanup task did not start; logs will not be cleaned"),
    }
}

async fn run(shard: Rc<Shard>) {
    let interval = Duration::from_millis(shard.config.cleanup_interval_ms);
    loop {
        let tick = glommio::timer::sleep(interval).fuse();
        let stopping = shard.shutdown.wait_for(1).fuse();
        futures::pin_mut!(tick, stopping);
        futures::select! {
            _ = tick => {},
            _ = stopping => return,
        }
        if shard.is_shutting_down() {
            return;
        }
        pass(&shard).await;
        if shard.id == crate::shard::CONTROLLER_SHARD {
            crate::producers::expiry::sweep(&shard).await;
        }
    }
}

/// One pass over the partitions this shard owns now, then over the
/// consumer groups it coordinates (offset retention).
async fn pass(shard: &Rc<Shard>) {
    let logs = shard.partitions.borrow().logs();
    for (topic, partition, log) in logs {
        if shard.is_shutting_down() {
            return;
        }
        let replica = shard.partitions.borrow().replica(&topic, partition);
        if let Some(raft) = replica {
            retain(&topic, partition, &raft, &log).await;
        }
        let (report, result) = log.cleanup(now_ms()).await;
        record(&topic, partition, &report);
        if let Err(e) = result {
            metrics::counter!("es_cleanup_errors_total").increment(1);
            tracing::warn!(%topic, partition, error = %e, "cleanup failed; the log is unchanged past the last finished step");
        }
    }
    if !shard.is_shutting_down() {
        crate::groups::coordinator::clean_offsets(shard, now_ms()).await;
    }
}

/// Cluster mode: purges this replica's Raft log up to its retention cut
/// (`PartitionLog::retention_cut`: what the topic's `retention_ms` /
/// `retention_bytes` would delete now), snapshot first, so that cleanup
/// may then delete it: purge ≤ snapshot ≤ applied ≤ committed. Each
/// replica purges at its own cut; a follower that was away longer than
/// retention then needs entries the leader purged and gets them by
/// snapshot. On a leader the purge also reaches the least offset every
/// replica matched (`PartitionRaft::matched_offset_min`), which no
/// replica needs from the log any more: what compaction works below.
async fn retain(topic: &str, partition: u32, raft: &es_raft::PartitionRaft, log: &es_storage::PartitionLog) {
    let cut = log.retention_cut(now_ms()).map(|o| o.0);
    let Some(target) = cut.max(raft.matched_offset_min()) else {
        return;
    };
    if let Err(e) = raft.retain_below(target).await {
        tracing::warn!(%topic, partition, error = %e, "purge before cleanup failed; retention waits");
    }
}

fn record(topic: &str, partition: u32, r: &CleanupReport) {
    if *r == CleanupReport::default() {
        return;
    }
    let reclaimed = |kind: &'static str, bytes: u64| {
        metrics::counter!("es_cleanup_bytes_reclaimed_total", "kind" => kind).increment(bytes);
    };
    reclaimed("retention", r.bytes_deleted);
    reclaimed("compaction", r.compaction_bytes_reclaimed);
    reclaimed("cold_retention", r.cold_bytes_deleted);
    metrics::counter!("es_retention_segments_deleted_total").increment(r.segments_deleted);
    metrics::counter!("es_tiered_segments_moved_total").increment(r.segments_tiered);
    metrics::counter!("es_tiered_bytes_moved_total").increment(r.bytes_tiered);
    metrics::counter!("es_cold_segments_deleted_total").increment(r.cold_segments_deleted);
    metrics::counter!("es_compaction_runs_total").increment(r.compaction_passes);
    metrics::counter!("es_compaction_segments_rewritten_total").increment(r.compacted_segments);
    metrics::counter!("es_compaction_records_dropped_total").increment(r.compaction_records_dropped);
    tracing::info!(
        %topic,
        partition,
        deleted = r.segments_deleted,
        tiered = r.segments_tiered,
        cold_deleted = r.cold_segments_deleted,
        compacted = r.compacted_segments,
        bytes_reclaimed = r.bytes_reclaimed(),
        "cleanup"
    );
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
