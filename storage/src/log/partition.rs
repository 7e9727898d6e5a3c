//! `PartitionLog`: the ordered, durable log of one partition.
//!
//! Lives on the shard that owns the partition (`!Send`, no locks). Appends
//! complete in two stages:
//!
//! 1. **written**: offsets are assigned at once, in call order; a detached
//!    writer task writes queued batches back to back (coalescing whatever
//!    queued up meanwhile into one write) and advances `written`. Written
//!    records are readable by callers that ask for them (replication).
//! 2. **durable**: the shard's [`FsyncBatcher`] fdatasyncs the active segment
//!    and advances `durable`. Nothing may be acknowledged before this.
//!
//! Invariant: `durable <= written <= next_offset` (the "dirty" mark),
//! asserted on every update. A failed fsync, or a write that failed for
//! any reason but want of room or of a descriptor, poisons the partition:
//! it refuses writes until restart, when recovery decides what survived. A
//! write that found no room (ENOSPC, EDQUOT) or no descriptor (EMFILE,
//! ENFILE: `write_failure.rs`) is refused instead, with every batch queued
//! behind it, and the log goes back to `written` (the end of its last
//! complete write): `next_offset` moves back there, the file is cut there,
//! durably, and the next append is written as usual (see `rewind`).
//!
//! Descriptors: the active segment keeps its log open (and, once written,
//! its writer's); a closed segment's log is opened by the shard's bounded
//! cache when read (`segment_files.rs`).

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::cleanup::compaction::CompactionState;
use crate::cleanup::swap::Leftovers;
use crate::log::faults::{FaultPoint, Faults, NoSpaceAt};
use crate::log::fsync::FsyncBatcher;
use crate::log::recovery::{Quarantined, Trimmed};
use crate::log::segment::Mark;
use crate::log::segment_set::SegmentSet;
use crate::log::watermark::{WaitError, Watermark};
use crate::tier::state::ColdState;
use crate::write::batch_buf::BatchBuf;
use crate::write::early::{EarlyState, EarlyTicket, Prewritten};
use crate::{LogConfig, Offset, Result, StorageError};

/// A handle to a partition log; clones share the same log.
#[derive(Clone)]
pub struct PartitionLog {
    pub(super) shared: Rc<LogState>,
}

/// Where an append landed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Offset after the last record: durable once `durable_offset()` reaches it.
    pub next_offset: Offset,
}

/// What opening a partition found, for logs and tests.
#[derive(Clone, Debug, Default)]
pub struct OpenReport {
    pub segments: usize,
    /// Log files whose batches were scanned (not cleanly closed, or with a
    /// missing or mismatched index), and what each scan trimmed.
    pub scanned: Vec<(PathBuf, Option<Trimmed>)>,
    /// What was done about a cleanup (compaction swap, retention delete)
    /// interrupted by a crash.
    pub leftovers: Leftovers,
    /// Segments found in the cold tier.
    pub cold_segments: usize,
    /// Corrupt data copied aside and cut off (only when recovery may drop
    /// data: `set_accept_data_loss`; otherwise open fails).
    pub quarantined: Vec<Quarantined>,
    /// Offset ranges no segment held (a segment file gone): filled with an
    /// empty segment (only when recovery may drop data; otherwise open
    /// fails).
    pub missing: Vec<(Offset, Offset)>,
}

pub(crate) struct LogState {
    pub(crate) dir: PathBuf,
    pub(crate) config: RefCell<LogConfig>,
    pub(super) inner: RefCell<Inner>,
    pub(crate) written: Watermark,
    pub(crate) durable: Watermark,
    /// A replicated log's Raft entries (`entries.rs`): every entry with an
    /// index below `written_index` is written, below `durable_index`
    /// fsynced. A zero-width control batch moves no offset mark, so
    /// entries are tracked by index. 0 in a log without entries.
    pub(crate) written_index: Watermark,
    pub(crate) durable_index: Watermark,
    /// Whether the log is replicated (its high watermark set by a state
    /// machine: `entries.rs`); a standalone log's high watermark is
    /// `durable`, and `committed` stays 0.
    pub(crate) replicated: std::cell::Cell<bool>,
    /// A replicated log's committed mark: the offset after the last
    /// applied entry, set by its state machine. Clients read below
    /// `min(committed, written)` (a follower may learn that an entry is
    /// committed before its own copy is written).
    pub(crate) committed: Watermark,
    /// Retention, compaction and tiering touch only segments that end at or
    /// below this offset (a replicated log's purge point); `u64::MAX` for a
    /// standalone log.
    pub(crate) cleanup_limit: std::cell::Cell<u64>,
    /// Live read holds (`read_hold.rs`): id → the offset cleanup stays
    /// below.
    pub(crate) holds: RefCell<std::collections::BTreeMap<u64, u64>>,
    pub(crate) next_hold: std::cell::Cell<u64>,
    /// Rewinds finished (`Inner::rewinds_begun` counts those started).
    pub(super) rewound: Watermark,
    pub(super) batcher: FsyncBatcher,
    /// One cleanup (retention, compaction, tiering) or index rebuild at a
    /// time: they change which files back which offsets.
    pub(crate) maintenance: glommio::sync::Semaphore,
    /// The cold tier, when the log was opened with one.
    pub(crate) cold: Option<ColdState>,
    pub(crate) compaction: RefCell<CompactionState>,
    pub(crate) faults: Faults,
    /// `es_segment_write_duration_seconds`: one write of the write loop
    /// (the fsync that follows is `es_fsync_duration_seconds`).
    pub(super) write_duration: metrics::Histogram,
    /// Places of corruption reads met and reported (`report_damage`).
    pub(crate) damage_reported: RefCell<HashSet<(PathBuf, u64)>>,
    /// The next offset when the log was opened.
    pub(super) opened_next: Offset,
}

pub(super) struct Inner {
    pub(super) segments: SegmentSet,
    pub(super) next_offset: Offset,
    pub(super) pending: VecDeque<Pending>,
    pub(super) writer_running: bool,
    pub(super) failure: Option<String>,
    pub(super) closed: bool,
    /// Why a rewind is under way (a write found no room): appends are
    /// refused until it is done.
    pub(super) rewinding: Option<String>,
    pub(super) rewinds_begun: u64,
    /// The early write of a batch still arriving, if any (`early.rs`).
    pub(super) early: EarlyState,
    /// The index after the last Raft entry placed (0: none, `entries.rs`).
    pub(super) placed_index: u64,
    /// An uncommitted suffix is being cut (`truncate.rs`): nothing is
    /// placed until it is done, so the cut sees a log that stands still.
    pub(super) truncating: bool,
}

/// Batches placed but not yet written: contiguous bytes of one segment,
/// one part per batch (moved in, never copied to join them).
pub(super) struct Pending {
    pub(crate) segment: Offset,
    pub(crate) position: u64,
    pub(crate) parts: Vec<BatchBuf>,
    pub(crate) len: u64,
    pub(crate) end: Offset,
    pub(crate) appends: u64,
    /// Pages of the first batch written early (`early.rs`).
    pub(crate) prewritten: Option<Prewritten>,
    /// The segment's accounting before the first batch: where a rewind
    /// goes back to if this write is refused.
    pub(crate) mark: Mark,
    /// The index after the last Raft entry that ends in this write (0: none).
    pub(crate) end_index: u64,
}

impl PartitionLog {
    pub(crate) fn shared(&self) -> &Rc<LogState> {
        &self.shared
    }

    /// Whether `other` is a handle to this same log (not another log
    /// opened on the same directory).
    pub fn same_log(&self, other: &PartitionLog) -> bool {
        Rc::ptr_eq(&self.shared, &other.shared)
    }

    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The first offset still in the log, in either tier.
    pub fn log_start_offset(&self) -> Offset {
        let hot = self.hot_start_offset();
        self.cold_start_offset().map_or(hot, |c| c.min(hot))
    }

    /// The first offset of the hot tier (the local segments).
    pub fn hot_start_offset(&self) -> Offset {
        self.shared.hot_start()
    }

    /// The first offset of the cold tier, when it holds offsets below the
    /// hot tier.
    pub fn cold_start_offset(&self) -> Option<Offset> {
        let hot = self.hot_start_offset();
        self.shared
            .cold
            .as_ref()
            .and_then(|c| c.first())
            .filter(|&c| c < hot)
    }

    /// Base of the active segment: every offset below it is in a closed
    /// segment (once the writer sealed it), the part cleanup works on.
    pub fn active_base(&self) -> Offset {
        self.shared.inner.borrow().segments.active().base
    }

    /// Segments in the cold tier and their bytes.
    pub fn cold_segments(&self) -> (usize, u64) {
        self.shared
            .cold
            .as_ref()
            .map_or((0, 0), |c| (c.count(), c.bytes()))
    }

    /// Bytes in the hot tier (every segment's log, the active one included).
    pub fn hot_bytes(&self) -> u64 {
        self.shared.inner.borrow().segments.written_bytes()
    }

    /// Arms a fault-injection point for a crash test (see [`FaultPoint`]);
    /// `None` disarms.
    pub fn arm_fault(&self, point: Option<FaultPoint>) {
        self.shared.faults.arm(point);
    }

    /// Arms `point` to fire the `passes + 1`th time it is reached (a point
    /// reached once per segment: the crash after the nth).
    pub fn arm_fault_nth(&self, point: FaultPoint, passes: u32) {
        self.shared.faults.arm_nth(Some(point), passes);
    }

    /// Makes the log's writes at `at` fail as on a full disk, for a test,
    /// until called with `None` (see [`NoSpaceAt`]).
    pub fn arm_no_space(&self, at: Option<NoSpaceAt>) {
        self.shared.faults.arm_no_space(at);
    }

    /// How many times a write found no room and the log went back to its
    /// last complete write (offsets after it were given out again).
    pub fn rewinds(&self) -> u64 {
        self.shared.inner.borrow().rewinds_begun
    }

    /// The offset the next appended record will get.
    pub fn next_offset(&self) -> Offset {
        self.shared.inner.borrow().next_offset
    }

    /// Whether a record was appended since the log was opened (state
    /// derived from the log, saved at open, is still current if not).
    pub fn appended_since_open(&self) -> bool {
        self.next_offset() != self.shared.opened_next
    }

    /// Every record below this is in the segment files.
    pub fn written_offset(&self) -> Offset {
        Offset(self.shared.written.get())
    }

    /// Every record below this is fsynced: the high watermark of a single node.
    pub fn durable_offset(&self) -> Offset {
        Offset(self.shared.durable.get())
    }

    /// Changes how the log rolls from now on (segment size and age); the
    /// segments already written stay as they are.
    pub fn set_config(&self, config: LogConfig) -> Result<()> {
        config.validate()?;
        *self.shared.config.borrow_mut() = config;
        Ok(())
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.shared.inner.borrow().segments.len()
    }

    /// Why the partition refuses writes, if it does.
    pub fn failure(&self) -> Option<String> {
        self.shared.inner.borrow().failure.clone()
    }

    /// Resolves once every record below `offset` is fsynced.
    pub async fn wait_durable(&self, offset: Offset) -> Result<()> {
        self.shared
            .durable
            .wait_for(offset.0)
            .await
            .map_err(|e| self.shared.wait_error(e))
    }
}

impl LogState {
    /// The hot segments, to read.
    pub(crate) fn segments(&self) -> std::cell::Ref<'_, SegmentSet> {
        std::cell::Ref::map(self.inner.borrow(), |inner| &inner.segments)
    }

    /// The hot segments, to change through their named mutations (which
    /// assert the set's invariants: `segment_set.rs`).
    pub(crate) fn segments_mut(&self) -> std::cell::RefMut<'_, SegmentSet> {
        std::cell::RefMut::map(self.inner.borrow_mut(), |inner| &mut inner.segments)
    }

    /// Whether the early write `ticket` is the one under way
    /// (`write/early.rs`).
    pub(crate) fn early_is_current(&self, ticket: EarlyTicket) -> bool {
        self.inner.borrow().early.is_current(ticket)
    }

    /// Ends the early write `ticket` if it is the one under way.
    pub(crate) fn end_early_if(&self, ticket: EarlyTicket) {
        self.inner.borrow_mut().early.end_if(ticket);
    }

    /// The first offset of the hot tier.
    pub fn hot_start(&self) -> Offset {
        self.inner.borrow().segments.first().base
    }

    /// Closed or poisoned: cleanup stops.
    pub fn is_stopped(&self) -> bool {
        let inner = self.inner.borrow();
        inner.closed || inner.failure.is_some()
    }

    /// The error of an append whose wait on `written` or `durable` ended
    /// without it.
    pub(super) fn wait_error(&self, e: WaitError) -> StorageError {
        match e {
            WaitError::Refused(reason) => StorageError::Refused {
                path: self.dir.clone(),
                reason,
            },
            WaitError::Truncated(at) => StorageError::Truncated {
                path: self.dir.clone(),
                at,
            },
            WaitError::Failed(_) => self.refusal(),
        }
    }

    /// The error an append gets from a closed or poisoned partition.
    pub fn refusal(&self) -> StorageError {
        let inner = self.inner.borrow();
        match &inner.failure {
            Some(reason) => StorageError::Poisoned {
                path: self.dir.clone(),
                reason: reason.clone(),
            },
            None => StorageError::Closed {
                path: self.dir.clone(),
            },
        }
    }

    pub fn poison(&self, err: &StorageError) {
        let reason = err.to_string();
        tracing::error!(partition = %self.dir.display(), %reason, "partition refuses writes until restart");
        let mut inner = self.inner.borrow_mut();
        inner.failure.get_or_insert(reason.clone());
        inner.pending.clear();
        inner.writer_running = false;
        inner.early.end();
        drop(inner);
        self.written.fail(&reason);
        self.durable.fail(&reason);
        self.written_index.fail(&reason);
        self.durable_index.fail(&reason);
        self.committed.fail(&reason);
    }
}

impl Drop for LogState {
    fn drop(&mut self) {
        // Its closed segments' files leave the shard's cache with it.
        for seg in self.inner.get_mut().segments.iter() {
            crate::io::segment_files::forget(seg.id);
        }
    }
}
