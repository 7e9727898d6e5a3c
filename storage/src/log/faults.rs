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
//!
//! [`NoSpaceAt`] is the other kind: a write of the log that fails as on a
//! full disk, every time until disarmed, for tests of the refusal and
//! rewind that follow (`rewind.rs`).

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
    /// Truncation: a segment after the cut is removed (log renamed to
    /// `.deleting`, index unlinked, directory fsynced); reached once per
    /// segment, newest first.
    TruncateSegmentRemoved,
    /// Truncation: the cut segment is cut and fdatasynced, its stale index
    /// not yet removed.
    TruncateCut,
}

impl FaultPoint {
    /// Every point, in the order a cleanup reaches them.
    pub const ALL: [FaultPoint; 10] = [
        FaultPoint::RetentionLogRemoved,
        FaultPoint::RetentionSegmentRemoved,
        FaultPoint::TierCopied,
        FaultPoint::CompactionOutputWritten,
        FaultPoint::CompactionCommitted,
        FaultPoint::CompactionIndexRenamed,
        FaultPoint::CompactionOutputRenamed,
        FaultPoint::CompactionInputsRemoved,
        FaultPoint::TruncateSegmentRemoved,
        FaultPoint::TruncateCut,
    ];
}

/// A write of the log that a test makes fail as a full disk does (ENOSPC),
/// every time it is reached until disarmed
/// (`PartitionLog::arm_no_space`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum NoSpaceAt {
    /// A segment write: its bytes reach the file, then the write fails
    /// (a write that took some blocks before the disk ran out).
    SegmentWrite,
    /// A roll: the sealed segment's index file is written, then the write
    /// fails.
    RollIndex,
    /// A roll: creating the new segment's file fails (nothing created).
    RollCreate,
}

/// The armed points of one partition, if any.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// The point armed, and how many times it is passed before it fires.
    armed: Cell<Option<(FaultPoint, u32)>>,
    no_space: Cell<Option<NoSpaceAt>>,
}

impl Faults {
    pub fn arm(&self, point: Option<FaultPoint>) {
        self.arm_nth(point, 0);
    }

    /// Arms `point` to fire the `passes + 1`th time it is reached.
    pub fn arm_nth(&self, point: Option<FaultPoint>, passes: u32) {
        self.armed.set(point.map(|p| (p, passes)));
    }

    pub fn arm_no_space(&self, at: Option<NoSpaceAt>) {
        self.no_space.set(at);
    }

    /// Whether writes at `at` fail for want of room now.
    pub fn no_space(&self, at: NoSpaceAt) -> bool {
        self.no_space.get() == Some(at)
    }

    /// `Err` (ENOSPC on `path`) if `at` is armed.
    pub fn check_no_space(&self, at: NoSpaceAt, path: &std::path::Path) -> Result<()> {
        if self.no_space(at) {
            return Err(StorageError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::StorageFull, "no space (injected by a test)"),
            ));
        }
        Ok(())
    }

    /// `Err(FaultInjected)` if `point` is armed (once: it disarms).
    pub fn check(&self, point: FaultPoint) -> Result<()> {
        match self.armed.get() {
            Some((p, 0)) if p == point => {
                self.armed.set(None);
                Err(StorageError::FaultInjected(point))
            }
            Some((p, n)) if p == point => {
                self.armed.set(Some((p, n - 1)));
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
