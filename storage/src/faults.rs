//! Named fault-injection points, for crash tests of the multi-step cleanup
//! changes (segment delete, compaction swap, cold move).
//!
//! A test arms one point with `PartitionLog::arm_fault`; the next time the
//! cleanup reaches it, the step stops right there as if the process had
//! died: it returns `StorageError::FaultInjected`, the partition is poisoned
//! (it does nothing more), and the files stay exactly as that step left
//! them. The test then drops the log and reopens the directory, which is
//! what recovery after a crash at that point sees. Unarmed, a point is one
//! `Cell` read.

use std::cell::Cell;

use crate::{Result, StorageError};

/// A place in a multi-step cleanup change where a crash is simulated.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// Retention: a segment's `.log` is unlinked, its `.index` not yet.
    RetentionLogRemoved,
    /// Retention: one segment is fully removed (directory synced), the next
    /// not started.
    RetentionSegmentRemoved,
    /// Tiering: the cold store confirmed the copy, the hot copy is untouched.
    TierCopied,
    /// Compaction: `.cleaned` outputs written and synced, no manifest yet.
    CompactionOutputWritten,
    /// Compaction: the swap manifest is durable (the commit point), nothing
    /// renamed yet.
    CompactionCommitted,
    /// Compaction: the output's index renamed into place, its log not yet.
    CompactionIndexRenamed,
    /// Compaction: the output renamed into place, inputs not yet removed.
    CompactionOutputRenamed,
    /// Compaction: inputs removed, the manifest not yet.
    CompactionInputsRemoved,
}

impl FaultPoint {
    /// Every point, in the order a cleanup reaches them.
    pub const ALL: [FaultPoint; 8] = [
        FaultPoint::RetentionLogRemoved,
        FaultPoint::RetentionSegmentRemoved,
        FaultPoint::TierCopied,
        FaultPoint::CompactionOutputWritten,
        FaultPoint::CompactionCommitted,
        FaultPoint::CompactionIndexRenamed,
        FaultPoint::CompactionOutputRenamed,
        FaultPoint::CompactionInputsRemoved,
    ];
}

/// The armed point of one partition, if any.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    armed: Cell<Option<FaultPoint>>,
}

impl Faults {
    pub fn arm(&self, point: Option<FaultPoint>) {
        self.armed.set(point);
    }

    /// `Err(FaultInjected)` if `point` is armed (once: it disarms).
    pub fn check(&self, point: FaultPoint) -> Result<()> {
        if self.armed.get() == Some(point) {
            self.armed.set(None);
            return Err(StorageError::FaultInjected(point));
        }
        Ok(())
    }
}
