//! One cleanup pass of a partition: retention, compaction, cold retention,
//! as its [`CleanupPolicy`](crate::CleanupPolicy) says. The broker runs one
//! per partition from a background task on the partition's shard; tests call
//! it directly with the clock they want.

use crate::log::partition::PartitionLog;
use crate::{Result, StorageError};

/// What one pass did, for logs and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Hot segments deleted by retention, and their bytes.
    pub segments_deleted: u64,
    pub bytes_deleted: u64,
    /// Hot segments moved to the cold tier, and their bytes.
    pub segments_tiered: u64,
    pub bytes_tiered: u64,
    /// Cold segments deleted by cold retention, and their bytes.
    pub cold_segments_deleted: u64,
    pub cold_bytes_deleted: u64,
    /// Compaction passes that ran to the end (0 when nothing was due).
    pub compaction_passes: u64,
    /// Segments rewritten by compaction, bytes it freed, records it dropped.
    pub compacted_segments: u64,
    pub compaction_bytes_reclaimed: u64,
    pub compaction_records_dropped: u64,
}

impl CleanupReport {
    /// Disk bytes freed in both tiers (moving to the cold tier frees none
    /// overall and is not counted).
    pub fn bytes_reclaimed(&self) -> u64 {
        self.bytes_deleted + self.cold_bytes_deleted + self.compaction_bytes_reclaimed
    }
}

impl PartitionLog {
    /// Runs one cleanup pass with `now_ms` (ms since the Unix epoch) as the
    /// clock: retention (if the policy deletes), compaction (if it
    /// compacts), then cold retention. One pass at a time per partition; a
    /// closed or poisoned partition does nothing. Returns what was done,
    /// even when a step then failed, and the failure. A failure leaves the
    /// log consistent; one after a change was committed poisons it.
    pub async fn cleanup(&self, now_ms: i64) -> (CleanupReport, Result<()>) {
        let shared = self.shared().clone();
        let mut report = CleanupReport::default();
        let Ok(_permit) = shared.maintenance.acquire_permit(1).await else {
            return (report, Ok(()));
        };
        if shared.is_stopped() {
            return (report, Ok(()));
        }
        let policy = shared.config.borrow().cleanup.clone();
        let result = async {
            if policy.delete {
                self.retention_pass(&policy, now_ms, &mut report).await?;
            }
            if policy.compact {
                self.compact_pass(&policy, now_ms, &mut report).await?;
            }
            self.cold_retention_pass(&policy, now_ms, &mut report).await
        }
        .await;
        if let Err(e @ StorageError::FaultInjected(_)) = &result {
            // A simulated crash: the partition does nothing more.
            shared.poison(e);
        }
        (report, result)
    }
}
