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
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::future::Future;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;

use glommio::io::BufferedFile;

use crate::batch::{self, BatchHeader};
use crate::batch_buf::BatchBuf;
use crate::compaction::CompactionState;
use crate::dirs;
use crate::early::{EarlyState, EarlyTicket, EarlyWrite, Prewritten};
use crate::faults::{FaultPoint, Faults, NoSpaceAt};
use crate::fsync::{FsyncBatcher, SyncTarget};
use crate::index::IndexEntry;
use crate::recent::RecentWrites;
use crate::record::{ProducerStamp, Record};
use crate::recovery::{self, Quarantined, Shape, Trimmed};
use crate::segment::{self, Mark, Segment};
use crate::swap::{self, Leftovers};
use crate::tier::{ColdState, ColdTier};
use crate::watermark::{WaitError, Watermark};
use crate::write_failure::WriteFailure;
use crate::writer::SegmentWriter;
use crate::{LogConfig, Offset, Result, StorageError};

/// A handle to a partition log; clones share the same log.
#[derive(Clone)]
pub struct PartitionLog {
    shared: Rc<Shared>,
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

pub(crate) struct Shared {
    pub dir: PathBuf,
    pub config: RefCell<LogConfig>,
    pub inner: RefCell<Inner>,
    pub written: Watermark,
    pub durable: Watermark,
    /// Rewinds finished (`Inner::rewinds_begun` counts those started).
    rewound: Watermark,
    batcher: FsyncBatcher,
    /// One cleanup (retention, compaction, tiering) or index rebuild at a
    /// time: they change which files back which offsets.
    pub maintenance: glommio::sync::Semaphore,
    /// The cold tier, when the log was opened with one.
    pub cold: Option<ColdState>,
    pub compaction: RefCell<CompactionState>,
    pub faults: Faults,
    /// `es_segment_write_duration_seconds`: one write of the write loop
    /// (the fsync that follows is `es_fsync_duration_seconds`).
    write_duration: metrics::Histogram,
    /// Places of corruption reads met and reported (`report_damage`).
    pub damage_reported: RefCell<HashSet<(PathBuf, u64)>>,
    /// The next offset when the log was opened.
    opened_next: Offset,
}

pub(crate) struct Inner {
    pub segments: BTreeMap<Offset, Segment>,
    pub next_offset: Offset,
    pending: VecDeque<Pending>,
    writer_running: bool,
    pub failure: Option<String>,
    pub closed: bool,
    /// Why a rewind is under way (a write found no room): appends are
    /// refused until it is done.
    rewinding: Option<String>,
    rewinds_begun: u64,
    /// The early write of a batch still arriving, if any (`early.rs`).
    pub early: EarlyState,
}

/// Batches placed but not yet written: contiguous bytes of one segment,
/// one part per batch (moved in, never copied to join them).
struct Pending {
    segment: Offset,
    position: u64,
    parts: Vec<BatchBuf>,
    len: u64,
    end: Offset,
    appends: u64,
    /// Pages of the first batch written early (`early.rs`).
    prewritten: Option<Prewritten>,
    /// The segment's accounting before the first batch: where a rewind
    /// goes back to if this write is refused.
    mark: Mark,
}

impl PartitionLog {
    /// Opens (creating if needed) the partition log in `dir`, recovering it:
    /// sealed segments whose index matches their log are trusted without
    /// reading the log; the active segment and any other is scanned and
    /// trimmed after its last valid batch. Without a cold tier: a `tiered`
    /// policy then keeps segments instead of moving them.
    pub async fn open(
        dir: &Path,
        config: LogConfig,
        batcher: FsyncBatcher,
    ) -> Result<(PartitionLog, OpenReport)> {
        PartitionLog::open_with(dir, config, batcher, None).await
    }

    /// Like [`open`](PartitionLog::open), with a cold tier: its segments are
    /// listed, and offsets below the hot tier are read from it.
    pub async fn open_with(
        dir: &Path,
        config: LogConfig,
        batcher: FsyncBatcher,
        cold: Option<ColdTier>,
    ) -> Result<(PartitionLog, OpenReport)> {
        config.validate()?;
        // glommio opens with openat(-1, path): relative paths fail (EBADF).
        let dir = &std::path::absolute(dir).map_err(|e| StorageError::io(dir, e))?;
        dirs::create_dir_all(dir).await?;
        let leftovers = swap::recover(dir).await?;
        let bases = dirs::list_segments(dir).await?;
        let cold = match cold {
            Some(tier) => Some(ColdState::load(tier).await?),
            None => None,
        };
        let mut report = OpenReport {
            segments: bases.len().max(1),
            leftovers,
            cold_segments: cold.as_ref().map_or(0, |c| c.count()),
            ..Default::default()
        };
        let mut segments = BTreeMap::new();
        if bases.is_empty() {
            let mut seg = Segment::empty(dir, Offset(0));
            seg.file = Some(Rc::new(segment::create_new(&seg.log_path).await?));
            seg.created = true;
            dirs::sync_dir(dir).await?;
            if let Some(parent) = dir.parent() {
                dirs::sync_dir(parent).await?;
            }
            segments.insert(seg.base, seg);
        }
        let mut prev_scan: Option<bool> = None; // the segment before: scanned, with offset gaps?
        for (i, &base) in bases.iter().enumerate() {
            let active = i + 1 == bases.len();
            if let Some((_, prev)) = segments.last_key_value() {
                let prev: &Segment = prev;
                if prev.next_offset > base {
                    return Err(StorageError::Corrupt {
                        path: dirs::log_path(dir, base),
                        position: 0,
                        reason: format!(
                            "segment starts at {base} but the one before ends at {}",
                            prev.next_offset
                        ),
                    });
                }
                if prev.next_offset < base {
                    let (from, to) = (prev.next_offset, base);
                    let filler = missing_segment(dir, from, to, prev_scan, &config, &mut report).await?;
                    if let Some(filler) = filler {
                        segments.insert(filler.base, filler);
                    }
                }
            }
            let next_base = bases.get(i + 1).copied();
            let shape = Shape {
                last: active,
                end: next_base,
            };
            let opened = open_segment(dir, base, shape, config.index_interval_bytes, &mut report).await?;
            prev_scan = opened.scanned_gaps;
            let mut seg = opened.seg;
            if active {
                if let Some(q) = &opened.quarantined {
                    // New records must not take the offsets lost: a segment
                    // that starts past them makes that survive a restart.
                    let fresh = roll_past_loss(dir, &mut seg, q.lost.to).await?;
                    segments.insert(seg.base, seg);
                    segments.insert(fresh.base, fresh);
                    continue;
                }
            }
            segments.insert(base, seg);
        }
        let next = segments
            .last_key_value()
            .map(|(_, s)| s.next_offset)
            .expect("one segment at least");
        let shared = Rc::new(Shared {
            dir: dir.to_path_buf(),
            config: RefCell::new(config),
            inner: RefCell::new(Inner {
                segments,
                next_offset: next,
                pending: VecDeque::new(),
                writer_running: false,
                failure: None,
                closed: false,
                rewinding: None,
                rewinds_begun: 0,
                early: EarlyState::default(),
            }),
            written: Watermark::new(next.0),
            durable: Watermark::new(next.0),
            rewound: Watermark::new(0),
            batcher,
            maintenance: glommio::sync::Semaphore::new(1),
            cold,
            compaction: RefCell::new(CompactionState::default()),
            faults: Faults::default(),
            write_duration: metrics::histogram!("es_segment_write_duration_seconds"),
            damage_reported: RefCell::new(HashSet::new()),
            opened_next: next,
        });
        Ok((PartitionLog { shared }, report))
    }

    pub(crate) fn shared(&self) -> &Rc<Shared> {
        &self.shared
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
        *self
            .shared
            .inner
            .borrow()
            .segments
            .keys()
            .next_back()
            .expect("one segment at least")
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
        self.shared
            .inner
            .borrow()
            .segments
            .values()
            .map(|s| s.written_bytes)
            .sum()
    }

    /// Arms a fault-injection point for a crash test (see [`FaultPoint`]);
    /// `None` disarms.
    pub fn arm_fault(&self, point: Option<FaultPoint>) {
        self.shared.faults.arm(point);
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

    /// Appends `records` as one batch and returns once it is written (stage
    /// one). Offsets are assigned in call order. Call [`wait_durable`] with
    /// the returned `next_offset` before acknowledging anything.
    ///
    /// [`wait_durable`]: PartitionLog::wait_durable
    pub async fn append(&self, records: &[Record], producer: ProducerStamp) -> Result<Appended> {
        let appended = self.place(records, producer)?;
        self.shared
            .written
            .wait_for(appended.next_offset.0)
            .await
            .map_err(|e| self.shared.wait_error(e))?;
        Ok(appended)
    }

    /// Appends and waits until the batch is fsynced: the only form whose
    /// result may be acknowledged to a client.
    pub async fn append_durable(&self, records: &[Record], producer: ProducerStamp) -> Result<Appended> {
        let appended = self.place(records, producer)?;
        self.wait_durable(appended.next_offset).await?;
        Ok(appended)
    }

    /// Assigns offsets to `records` and queues them for writing, without
    /// waiting: synchronous, so a caller that must record where a batch went
    /// before anything else runs on the shard (idempotent producers) can.
    /// Nothing is acknowledged before [`wait_durable`] on `next_offset`,
    /// which the caller starts before it next awaits: a batch refused (see
    /// `rewind`) fails the waits in progress for it, while a wait begun
    /// afterwards waits for whatever is placed at those offsets next.
    ///
    /// [`wait_durable`]: PartitionLog::wait_durable
    pub fn append_placed(&self, records: &[Record], producer: ProducerStamp) -> Result<Appended> {
        self.place(records, producer)
    }

    /// Appends a batch a producer built in the batch format (offsets 0, 1,
    /// ... and its producer stamp in the header): checked in full
    /// (`batch::check_produced`), given offsets from the next one, and
    /// queued as it came, without decoding a record. Synchronous like
    /// [`append_placed`](PartitionLog::append_placed); nothing is
    /// acknowledged before [`wait_durable`](PartitionLog::wait_durable).
    /// `early`: the ticket of the [`EarlyWrite`] that wrote the batch's
    /// pages while it arrived, if one did ([`begin_early`]).
    ///
    /// [`begin_early`]: PartitionLog::begin_early
    pub fn append_batch_placed(
        &self,
        batch: impl Into<BatchBuf>,
        early: Option<EarlyTicket>,
    ) -> Result<Appended> {
        let batch = batch.into();
        let (header, keyless) = batch::check_produced_summed(&batch, batch.received_checksum())
            .map_err(|e| StorageError::Invalid(format!("produced batch: {e}")))?;
        self.place_with(
            batch.len(),
            header.record_count as usize,
            keyless,
            early,
            |base| {
                let mut batch = batch;
                batch::rebase(&mut batch, base);
                batch
            },
        )
    }

    /// Where within its page a batch of `len` bytes placed now would
    /// start: the offset a large batch is received at so that it lies in
    /// memory as in the file (`ReceivingBatch`). A guess for a batch still
    /// arriving: whatever is placed first moves it.
    pub fn next_in_page_offset(&self, len: usize) -> usize {
        let inner = self.shared.inner.borrow();
        let config = self.shared.config.borrow();
        let active = inner.segments.values().next_back().expect("one segment at least");
        if !active.is_empty() && must_roll(active, len as u64, &config) {
            return 0;
        }
        (active.dirty_bytes % crate::recent::PAGE_BYTES) as usize
    }

    /// Like [`append_batch_placed`](PartitionLog::append_batch_placed),
    /// returning once the batch is fsynced.
    pub async fn append_batch_durable(
        &self,
        batch: impl Into<BatchBuf>,
        early: Option<EarlyTicket>,
    ) -> Result<Appended> {
        let appended = self.append_batch_placed(batch, early)?;
        self.wait_durable(appended.next_offset).await?;
        Ok(appended)
    }

    /// Starts writing the pages of a produced batch of `len` bytes while it
    /// is still arriving (`early.rs`), where it will go if nothing else is
    /// placed first. Feed it with [`EarlyWrite::arrived`], then place the
    /// whole batch with its ticket. `None` when the partition cannot: it
    /// is closed or failed, another early write is under way, the batch
    /// would start a new segment, the active segment's writer is not open
    /// yet (before its first write) or does not write direct, or the batch
    /// has no whole page past its first one.
    pub fn begin_early(&self, len: usize) -> Option<EarlyWrite> {
        let shared = &self.shared;
        let mut inner = shared.inner.borrow_mut();
        if inner.closed || inner.failure.is_some() || inner.rewinding.is_some() || inner.early.is_busy() {
            return None;
        }
        let config = shared.config.borrow();
        let active = inner.segments.values().next_back().expect("one segment at least");
        if len > config.batch_bytes_max || active.is_empty() || must_roll(active, len as u64, &config) {
            return None;
        }
        let writer = active.writer.clone().filter(|w| w.is_direct())?;
        let (segment, position) = (active.base, active.dirty_bytes);
        EarlyWrite::begin(shared, &mut inner.early, writer, segment, position, len)
    }

    /// Resolves once every record below `offset` is fsynced.
    pub async fn wait_durable(&self, offset: Offset) -> Result<()> {
        self.shared
            .durable
            .wait_for(offset.0)
            .await
            .map_err(|e| self.shared.wait_error(e))
    }

    /// Assigns offsets and a file position to a new batch and queues it for
    /// the writer. Synchronous, so call order is offset order.
    fn place(&self, records: &[Record], producer: ProducerStamp) -> Result<Appended> {
        if records.is_empty() {
            return Err(StorageError::Invalid(
                "an append needs at least one record".into(),
            ));
        }
        let keyless = records.iter().any(|r| r.key.is_none());
        let len = batch::encoded_len(records);
        self.place_with(len, records.len(), keyless, None, |base| {
            let mut out = Vec::with_capacity(len);
            batch::encode(base, records, producer, &mut out);
            BatchBuf::from(out)
        })
    }

    /// Places a batch of `len` bytes holding `count` records, which
    /// `make(base_offset)` returns, on the pending write. Ends any early
    /// write under way; `early` names the batch's own, whose pages are then
    /// not written again if it landed where they went.
    fn place_with(
        &self,
        len: usize,
        count: usize,
        keyless: bool,
        early: Option<EarlyTicket>,
        make: impl FnOnce(Offset) -> BatchBuf,
    ) -> Result<Appended> {
        let shared = &self.shared;
        let mut inner = shared.inner.borrow_mut();
        if inner.closed || inner.failure.is_some() {
            drop(inner);
            return Err(shared.refusal());
        }
        if let Some(reason) = &inner.rewinding {
            return Err(StorageError::Refused {
                path: shared.dir.clone(),
                reason: format!("the log is going back to its last complete write after {reason}"),
            });
        }
        let config = shared.config.borrow().clone();
        if config.cleanup.compact && keyless {
            return Err(StorageError::Invalid(
                "a record has no key: a compacted log keeps the latest record per key, so every record needs one"
                    .into(),
            ));
        }
        if len > config.batch_bytes_max {
            return Err(StorageError::Invalid(format!(
                "batch of {len} bytes exceeds batch_bytes_max {}",
                config.batch_bytes_max
            )));
        }
        let base = inner.next_offset;
        let count = count as u64;
        let roll = {
            let active = inner.segments.values().next_back().expect("one segment at least");
            !active.is_empty()
                && (must_roll(active, len as u64, &config)
                    || base.0 + count - active.base.0 > u32::MAX as u64)
        };
        if roll {
            // Not closed (not for cleanup) until the writer has sealed it.
            if let Some(old) = inner.segments.values_mut().next_back() {
                old.sealed = false;
            }
            inner.segments.insert(base, Segment::empty(&shared.dir, base));
        }
        let Inner {
            segments,
            pending,
            early: early_state,
            ..
        } = &mut *inner;
        let seg = segments.values_mut().next_back().expect("one segment at least");
        let position = seg.dirty_bytes;
        let prewritten = early_state.place(early, seg.base, position);
        // A batch written early starts a write of its own, so that the
        // pages it skips are its own. Any other joins a write not started
        // yet (one larger write beats two; a batch that lies in memory as
        // in the file is still written from its own pages: writer.rs
        // `Plan`).
        let joins_tail = prewritten.is_none()
            && pending
                .back()
                .is_some_and(|p| p.segment == seg.base && p.position + p.len == position);
        if !joins_tail {
            pending.push_back(Pending {
                segment: seg.base,
                position,
                parts: Vec::new(),
                len: 0,
                end: base,
                appends: 0,
                prewritten,
                mark: seg.mark(),
            });
        }
        let job = pending.back_mut().expect("just pushed");
        let bytes = make(base);
        assert_eq!(bytes.len(), len, "a batch is as long as it said");
        let header = BatchHeader::parse(&bytes).expect("we just encoded it");
        job.len += bytes.len() as u64;
        job.parts.push(bytes);
        seg.note_batch(&header, position, config.index_interval_bytes);
        seg.sealed = false;
        job.end = header.next_offset();
        job.appends += 1;
        inner.next_offset = header.next_offset();
        let start_writer = !std::mem::replace(&mut inner.writer_running, true);
        drop(inner);
        if start_writer {
            // glommio runs a task it spawns at once, up to its first await:
            // the write loop may start (and, on an error it meets without
            // waiting, begin a rewind) before this returns. Nothing of
            // `inner` is borrowed here.
            glommio::spawn_local(write_loop(shared.clone())).detach();
        }
        Ok(Appended {
            base_offset: base,
            next_offset: header.next_offset(),
        })
    }

    /// Closes the log cleanly: refuses new appends, waits for queued writes,
    /// fsyncs, and writes the active segment's index so that the next open
    /// scans nothing.
    pub async fn close(&self) -> Result<()> {
        let shared = &self.shared;
        let end = {
            let mut inner = shared.inner.borrow_mut();
            if inner.closed && inner.failure.is_none() {
                return Ok(());
            }
            inner.closed = true;
            inner.early.end();
            inner.next_offset
        };
        // A cleanup in progress sees `closed` and stops at its next step;
        // wait for it, so nothing writes in the directory after close.
        let _maintenance = shared.maintenance.acquire_permit(1).await;
        // Every batch placed is written, or was refused: then the rewind
        // moved the end back, once it is done.
        let mut end = end;
        loop {
            match shared.written.wait_for(end.0).await {
                Ok(()) => break,
                Err(WaitError::Refused(_)) => {
                    let begun = shared.inner.borrow().rewinds_begun;
                    let _ = shared.rewound.wait_for(begun).await;
                    end = shared.inner.borrow().next_offset;
                }
                Err(WaitError::Failed(_)) => return Err(shared.refusal()),
            }
        }
        // A poisoned log is never sealed: sealing would let the next open
        // trust bytes whose fsync failed. Recovery decides at restart.
        if shared.inner.borrow().failure.is_some() {
            return Err(shared.refusal());
        }
        if let Err(e) = shared.seal_active(end).await {
            shared.poison(&e);
            return Err(e);
        }
        shared.written.fail("partition closed");
        shared.durable.fail("partition closed");
        Ok(())
    }
}

impl Shared {
    /// Waits for the writes of early writes that ended unplaced.
    async fn wait_early_ended(&self) {
        let ended = self.inner.borrow_mut().early.take_ended();
        for writes in ended {
            writes.wait().await;
        }
    }

    /// Before `job` is written: when stale early pages (of a batch that
    /// did not land where its early write went: bytes a client chose) lie
    /// past the written end of its segment within a batch header's length
    /// of where the job ends, cuts the file back to its written pages
    /// first. So no write of the log ever ends next to such bytes, and
    /// recovery never finds them where a batch could start
    /// (`recovery.rs`). The early write under way ends too (its pages may
    /// lie in the cut), and the job's own early pages, if any, are written
    /// again with it. Rare: only after an early write went void.
    async fn cut_stale_early(&self, writer: &SegmentWriter, job: &mut Pending) -> Result<()> {
        let from = {
            let mut inner = self.inner.borrow_mut();
            inner.early.sealed_before(job.segment);
            inner.early.stale(job.segment)
        };
        let Some(from) = from else { return Ok(()) };
        if job.position + job.len + crate::batch::HEADER_BYTES as u64 <= from {
            return Ok(());
        }
        self.inner.borrow_mut().early.begin_cut();
        self.wait_early_ended().await;
        if let Some(p) = job.prewritten.take() {
            p.writes.wait().await;
        }
        let pages = crate::recent::page_floor(job.position + crate::recent::PAGE_BYTES - 1);
        let cut = writer.finish(pages).await;
        self.inner.borrow_mut().early.end_cut(job.segment);
        cut
    }

    /// fsyncs the fully written active segment and writes its index, so the
    /// next open trusts it without a scan.
    async fn seal_active(&self, end: Offset) -> Result<()> {
        self.wait_early_ended().await;
        if self
            .inner
            .borrow()
            .segments
            .values()
            .next_back()
            .is_some_and(|s| s.sealed)
        {
            // Sealed: fsynced, its index on disk matching it (opened clean
            // and not written since, or sealed by a roll given back): a
            // close costs no fsync.
            if end.0 > self.durable.get() {
                self.durable.advance(end.0);
            }
            return Ok(());
        }
        let (file, writer, written, log_path, index_path, index_bytes) = {
            let mut inner = self.inner.borrow_mut();
            let seg = inner
                .segments
                .values_mut()
                .next_back()
                .expect("one segment at least");
            (
                seg.file.clone(),
                seg.writer.clone(),
                seg.written_bytes,
                seg.log_path.clone(),
                seg.index_path.clone(),
                seg.index_file_bytes(),
            )
        };
        if let Some(writer) = writer {
            writer.finish(written).await?;
        }
        let file = file.expect("a fully written active segment is open");
        file.fdatasync()
            .await
            .map_err(|e| StorageError::sync(&log_path, e))?;
        if end.0 > self.durable.get() {
            self.durable.advance(end.0);
        }
        segment::save_index(&self.dir, &index_path, index_bytes).await
    }

    /// The first offset of the hot tier.
    pub fn hot_start(&self) -> Offset {
        *self
            .inner
            .borrow()
            .segments
            .keys()
            .next()
            .expect("one segment at least")
    }

    /// Closed or poisoned: cleanup stops.
    pub fn is_stopped(&self) -> bool {
        let inner = self.inner.borrow();
        inner.closed || inner.failure.is_some()
    }

    /// The error of an append whose wait on `written` or `durable` ended
    /// without it.
    fn wait_error(&self, e: WaitError) -> StorageError {
        match e {
            WaitError::Refused(reason) => StorageError::Refused {
                path: self.dir.clone(),
                reason,
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
    }

    /// The write loop's `job` (the first not written) failed with `e`:
    /// counted by kind; a failure that leaves bytes in doubt poisons the
    /// partition, one that only found no room is refused ([`rewind`]). The
    /// write loop ends either way (nothing is queued after a rewind).
    ///
    /// [`rewind`]: Shared::rewind
    async fn write_failed(&self, job: Pending, e: StorageError) {
        let kind = WriteFailure::of(&e);
        kind.count();
        if kind == WriteFailure::Descriptors {
            metrics::counter!("es_descriptors_exhausted_total", "op" => "append").increment(1);
        }
        if kind.poisons() {
            self.poison(&e);
            return;
        }
        let reason = e.to_string();
        let begun = {
            let mut inner = self.inner.borrow_mut();
            inner.rewinding = Some(reason.clone());
            inner.rewinds_begun += 1;
            inner.rewinds_begun
        };
        let rewound = self.rewind(job, &reason).await;
        {
            let mut inner = self.inner.borrow_mut();
            inner.rewinding = None;
            inner.writer_running = false;
        }
        if let Err(e) = rewound {
            WriteFailure::of(&e).count();
            self.poison(&e);
        }
        self.rewound.advance(begun);
    }

    /// Refuses `job` and every batch queued behind it, and takes the log
    /// back to `written`, the end of its last complete write (where `job`
    /// starts): once the early writes still in flight have landed, the
    /// segments' accounting goes back to `job`'s mark, `next_offset` to
    /// `written` (the offsets are given out again), and the file is cut at
    /// `job`'s position and fdatasynced, so neither a reader nor a restart
    /// ever finds the refused bytes; then their waiters get
    /// `StorageError::Refused`. Appends are refused meanwhile. What was
    /// written before stays, and becomes durable with the sync already
    /// due for it. A roll whose new file was never created is undone: the
    /// segment before it, not sealed yet (`create_rolled`), is active
    /// again. An error here (the cut or its fsync failed) poisons.
    async fn rewind(&self, job: Pending, reason: &str) -> Result<()> {
        let to = self.written.get();
        tracing::warn!(
            partition = %self.dir.display(),
            %reason,
            offset = to,
            "a write found no room: it is refused and the log goes back to its last complete write; writes go on"
        );
        let dropped: Vec<Pending> = {
            let mut inner = self.inner.borrow_mut();
            inner.early.end();
            std::iter::once(job).chain(inner.pending.drain(..)).collect()
        };
        // Early pages still in flight land before the cut, never after it.
        self.wait_early_ended().await;
        for job in &dropped {
            if let Some(p) = &job.prewritten {
                p.writes.wait().await;
            }
        }
        let first = &dropped[0];
        let (base, position) = (first.segment, first.position);
        let cut = {
            let mut inner = self.inner.borrow_mut();
            assert_eq!(
                first.mark.next_offset.0, to,
                "the refused write starts where the log was written"
            );
            let later: Vec<Offset> = inner
                .segments
                .range((Bound::Excluded(base), Bound::Unbounded))
                .map(|(b, _)| *b)
                .collect();
            for b in later {
                let seg = inner.segments.remove(&b).expect("just listed");
                assert!(!seg.created, "no write reached a segment after a refused one");
            }
            inner.early.cut_from(base);
            inner.next_offset = Offset(to);
            let seg = inner
                .segments
                .get_mut(&base)
                .expect("the refused write's segment");
            assert_eq!(
                seg.written_bytes, position,
                "the refused write starts at the written end"
            );
            seg.rewind(first.mark);
            if let Some(recent) = &seg.recent {
                assert_eq!(recent.borrow().end(), position, "a failed write holds nothing");
            }
            if seg.created {
                let file = seg.file.clone().expect("a created active segment is open");
                Some((file, seg.log_path.clone()))
            } else {
                assert!(
                    seg.is_empty(),
                    "only a rolled segment is created by its first write"
                );
                inner.segments.remove(&base);
                assert!(!inner.segments.is_empty(), "a rolled segment has one before it");
                None
            }
        };
        if let Some((file, path)) = cut {
            file.truncate(position)
                .await
                .map_err(|e| StorageError::io(&path, e))?;
            file.fdatasync().await.map_err(|e| StorageError::sync(&path, e))?;
        }
        // Told once the log is back: a retry then finds it taking writes.
        self.written.refuse_above(to, reason);
        self.durable.refuse_above(to, reason);
        Ok(())
    }

    /// The writer of segment `base` (the one the write loop writes), opened
    /// on first use: after creating the file of a rolled segment, or on a
    /// segment this process found on disk.
    async fn writer_for(&self, base: Offset) -> Result<(Rc<SegmentWriter>, Rc<RefCell<RecentWrites>>)> {
        let file = {
            let inner = self.inner.borrow();
            let seg = &inner.segments[&base];
            if let (Some(w), Some(r)) = (&seg.writer, &seg.recent) {
                return Ok((w.clone(), r.clone()));
            }
            seg.file.clone()
        };
        let file = match file {
            Some(f) => f,
            None => {
                self.create_rolled(base).await?;
                let inner = self.inner.borrow();
                inner.segments[&base].file.clone().expect("just created")
            }
        };
        let (path, written) = {
            let inner = self.inner.borrow();
            let seg = &inner.segments[&base];
            (seg.log_path.clone(), seg.written_bytes)
        };
        let config = self.config.borrow().clone();
        let (writer, recent) = SegmentWriter::open(
            &path,
            written,
            file,
            config.direct_writes,
            config.recent_writes_bytes,
        )
        .await?;
        let (writer, recent) = (Rc::new(writer), Rc::new(RefCell::new(recent)));
        let mut inner = self.inner.borrow_mut();
        let seg = inner
            .segments
            .get_mut(&base)
            .expect("the writer's segment exists");
        assert_eq!(seg.written_bytes, written, "only the write loop writes");
        seg.writer = Some(writer.clone());
        seg.recent = Some(recent.clone());
        Ok((writer, recent))
    }

    /// Seals segment `base`'s predecessor and creates `base`'s file: the
    /// roll, in the order recovery relies on (old log fsynced and its index
    /// written before the new log exists).
    async fn create_rolled(&self, base: Offset) -> Result<()> {
        let prev = {
            let mut inner = self.inner.borrow_mut();
            let prev = inner.segments.range_mut(..base).next_back().map(|(_, s)| s);
            prev.map(|s| {
                (
                    s.file.clone(),
                    s.writer.clone(),
                    s.written_bytes,
                    s.log_path.clone(),
                    s.index_path.clone(),
                    s.index_file_bytes(),
                )
            })
        };
        if let Some((file, writer, written, log_path, index_path, index_bytes)) = prev {
            if let Some(writer) = writer {
                writer.finish(written).await?;
            }
            if let Some(file) = file {
                file.fdatasync()
                    .await
                    .map_err(|e| StorageError::sync(&log_path, e))?;
            }
            self.faults.check_no_space(NoSpaceAt::RollIndex, &index_path)?;
            segment::write_file_synced(&index_path, index_bytes).await?;
        }
        let path = dirs::log_path(&self.dir, base);
        self.faults.check_no_space(NoSpaceAt::RollCreate, &path)?;
        let file = Rc::new(segment::create_new(&path).await?);
        if let Err(e) = dirs::sync_dir(&self.dir).await {
            // Not created after all, so that a retry can create it (the
            // roll is refused and rewound, or the partition poisoned).
            drop(file);
            if let Err(removed) = glommio::io::remove(&path).await {
                return Err(StorageError::io(&path, removed));
            }
            return Err(e);
        }
        // Only now is the old segment closed: until the new one exists, a
        // write refused for want of room (`rewind`) makes the old one the
        // active segment again, and no cleanup may have taken it.
        let (closed_id, closed_file) = {
            let mut inner = self.inner.borrow_mut();
            let closed = match inner.segments.range_mut(..base).next_back() {
                Some((_, s)) => {
                    s.sealed = true;
                    s.writer = None;
                    s.recent = None;
                    // Its read handle goes to the shard's cache of closed
                    // segments' files.
                    (s.id, s.file.take())
                }
                None => (0, None),
            };
            let seg = inner
                .segments
                .get_mut(&base)
                .expect("the writer's segment exists");
            seg.file = Some(file);
            seg.created = true;
            closed
        };
        if let Some(file) = closed_file.and_then(|f| Rc::try_unwrap(f).ok()) {
            crate::segment_files::adopt(closed_id, file).await;
        }
        Ok(())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Its closed segments' files leave the shard's cache with it.
        for seg in self.inner.get_mut().segments.values() {
            crate::segment_files::forget(seg.id);
        }
    }
}

impl SyncTarget for Shared {
    fn sync(self: Rc<Self>) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let (file, writer, path, upto) = {
                let inner = self.inner.borrow();
                if inner.failure.is_some() {
                    return;
                }
                let seg = inner
                    .segments
                    .values()
                    .rev()
                    .find(|s| s.created)
                    .expect("a partition has a created segment");
                (
                    seg.file.clone(),
                    seg.writer.clone(),
                    seg.log_path.clone(),
                    self.written.get(),
                )
            };
            if upto <= self.durable.get() {
                return;
            }
            let file = file.expect("a created active segment is open");
            // Where the writes went through the shard's disk threads, so
            // does their sync (`disk_threads.rs`).
            let synced = match writer.as_ref().and_then(|w| w.disk_threads()) {
                Some(threads) => threads.fdatasync().await,
                None => file.fdatasync().await.map_err(std::io::Error::from),
            };
            self.synced(&path, upto, synced);
        })
    }
}

impl Shared {
    /// The end of a sync that started once everything up to offset `upto`
    /// was written: `durable` reaches `upto`, or the partition is poisoned.
    fn synced(&self, path: &Path, upto: u64, result: std::io::Result<()>) {
        match result {
            Ok(()) => {
                if upto > self.durable.get() && self.inner.borrow().failure.is_none() {
                    assert!(upto <= self.written.get(), "durable <= written");
                    self.durable.advance(upto);
                }
            }
            Err(e) => {
                WriteFailure::Fsync.count();
                self.poison(&StorageError::sync(path, e));
            }
        }
    }
}

/// Writes queued batches in order, one write per contiguous run, and hands
/// the partition to the fsync batcher. Detached: a caller that stops waiting
/// does not stop the write its offsets were promised to.
async fn write_loop(shared: Rc<Shared>) {
    loop {
        let mut job = {
            let mut inner = shared.inner.borrow_mut();
            match inner.pending.pop_front() {
                Some(job) => job,
                None => {
                    inner.writer_running = false;
                    return;
                }
            }
        };
        // Early writes that ended unplaced may cover the pages this (or a
        // roll's truncation) writes: they land first.
        shared.wait_early_ended().await;
        let (writer, recent) = match shared.writer_for(job.segment).await {
            Ok(w) => w,
            Err(e) => return shared.write_failed(job, e).await,
        };
        if let Err(e) = shared.cut_stale_early(&writer, &mut job).await {
            return shared.write_failed(job, e).await;
        }
        let len = job.len;
        // Through disk threads, the thread that writes can fdatasync right
        // after (no hop through this shard in between) when this partition
        // has no sync in flight: the sync the batcher would start next.
        let target: Rc<dyn SyncTarget> = shared.clone();
        let no_space = shared.faults.no_space(NoSpaceAt::SegmentWrite);
        let sync_after = writer.disk_threads().is_some() && !shared.batcher.is_syncing(&target) && !no_space;
        let started = std::time::Instant::now();
        let parts = std::mem::take(&mut job.parts);
        let sync_started = match writer
            .write(
                &recent,
                parts,
                job.position,
                job.prewritten.take(),
                sync_after,
                no_space,
            )
            .await
        {
            Ok(s) => s,
            Err(e) => return shared.write_failed(job, e).await,
        };
        shared.write_duration.record(started.elapsed().as_secs_f64());
        crate::recent_budget::after_write(&recent);
        {
            let mut inner = shared.inner.borrow_mut();
            if inner.failure.is_some() {
                return;
            }
            let next = inner.next_offset;
            let seg = inner
                .segments
                .get_mut(&job.segment)
                .expect("the writer's segment exists");
            assert_eq!(seg.written_bytes, job.position, "writes land back to back");
            seg.written_bytes = job.position + len;
            assert!(seg.written_bytes <= seg.dirty_bytes, "written <= dirty");
            assert!(job.end <= next, "written <= next offset");
        }
        shared.written.advance(job.end.0);
        match sync_started {
            // Only this loop starts this partition's syncs: none started
            // while the write ran.
            Some(synced) => {
                let (owner, path, upto) = (shared.clone(), writer.path().to_path_buf(), job.end.0);
                let sync = async move { owner.synced(&path, upto, synced.ended().await) };
                shared.batcher.adopt(target, job.appends, Box::pin(sync));
            }
            None => shared.batcher.mark_dirty(target, job.appends),
        }
    }
}

/// A segment as [`open_segment`] opened it.
struct Opened {
    seg: Segment,
    /// `Some` when its log was scanned: whether its offsets had gaps
    /// (compaction leaves them), so its last batch may end before its
    /// offsets do.
    scanned_gaps: Option<bool>,
    quarantined: Option<Quarantined>,
}

/// Opens one segment found on disk: trusts it if its index footer matches
/// the log exactly (and, for the active segment, the index loads), else
/// scans it, trims a torn tail, quarantines corruption (or refuses) and,
/// unless active, seals it with a fresh index.
async fn open_segment(
    dir: &Path,
    base: Offset,
    shape: Shape,
    interval: u32,
    report: &mut OpenReport,
) -> Result<Opened> {
    let active = shape.last;
    let log_path = dirs::log_path(dir, base);
    let index_path = dirs::index_path(dir, base);
    let file = segment::open_rw(&log_path).await?;
    let log_len = file
        .file_size()
        .await
        .map_err(|e| StorageError::io(&log_path, e))?;
    let trusted = |seg| Opened {
        seg,
        scanned_gaps: None,
        quarantined: None,
    };
    if let Some(footer) = segment::read_index_footer(&index_path).await {
        if footer.log_bytes == log_len && footer.next_offset >= base {
            if !active {
                let _ = file.close().await;
                return Ok(trusted(Segment::from_footer(dir, base, footer)));
            }
            if let Some(ix) = segment::read_index(&index_path, &footer).await {
                let mut seg = Segment::from_footer(dir, base, footer);
                let last: Option<IndexEntry> = ix.last();
                seg.resume(ix, last);
                seg.file = Some(Rc::new(file));
                return Ok(trusted(seg));
            }
        }
    }
    let (seg, recovered, gaps) = scan_segment(dir, base, file, shape, interval).await?;
    report.scanned.push((log_path, recovered.trimmed));
    if let Some(q) = &recovered.quarantined {
        report.quarantined.push(q.clone());
    }
    Ok(Opened {
        seg,
        scanned_gaps: Some(gaps),
        quarantined: recovered.quarantined,
    })
}

/// Rebuilds a segment from its log: scans it, trims a torn tail,
/// quarantines corruption (or refuses: `recovery.rs`), then seals it with
/// a fresh index, or, for the active segment (`shape.last`), removes any
/// stale index (it would describe a log that recovery may have cut and
/// that will grow again). Also returns whether its offsets had gaps.
async fn scan_segment(
    dir: &Path,
    base: Offset,
    file: BufferedFile,
    shape: Shape,
    interval: u32,
) -> Result<(Segment, recovery::Recovered, bool)> {
    let mut seg = Segment::empty(dir, base);
    let (recovered, scanned) = recovery::recover_segment(&file, &mut seg, interval, shape).await?;
    seg.created = true;
    if let Some(q) = &recovered.quarantined {
        // The offsets lost stay this segment's: none is given out again.
        seg.next_offset = seg.next_offset.max(q.lost.to);
    }
    if shape.last {
        match glommio::io::remove(&seg.index_path)
            .await
            .map_err(std::io::Error::from)
        {
            Ok(()) => dirs::sync_dir(dir).await?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StorageError::io(&seg.index_path, e)),
        }
        seg.file = Some(Rc::new(file));
    } else {
        let bytes = seg.index_file_bytes();
        segment::save_index(dir, &seg.index_path, bytes).await?;
        seg.sealed = true;
        let _ = file.close().await;
    }
    Ok((seg, recovered, scanned.gaps))
}

/// After corruption was cut off the active segment `seg`: seals it, its
/// offsets reaching `to` (the lost ones included), and creates the empty
/// segment `to` that new records go to.
async fn roll_past_loss(dir: &Path, seg: &mut Segment, to: Offset) -> Result<Segment> {
    assert!(
        to > seg.base && to >= seg.next_offset,
        "the log moves past what it lost"
    );
    seg.next_offset = to;
    let bytes = seg.index_file_bytes();
    segment::write_file_synced(&seg.index_path, bytes).await?;
    seg.sealed = true;
    let mut fresh = Segment::empty(dir, to);
    fresh.file = Some(Rc::new(segment::create_new(&fresh.log_path).await?));
    fresh.created = true;
    dirs::sync_dir(dir).await?;
    Ok(fresh)
}

/// Offsets `from..to` lie between two segments and none holds them: a
/// segment file went missing (a segment's offsets always reach the next
/// one's base: rolls and compaction keep them so). Unless the segment
/// before was scanned and may have lost its last records to compaction
/// (`prev_scan`: its offsets had gaps, or the log is compacted), which
/// leaves such a gap legitimately, this is data loss: refused, or, where
/// recovery may drop data, reported and filled with an empty segment so
/// that no later start reports it again and no record takes those
/// offsets.
async fn missing_segment(
    dir: &Path,
    from: Offset,
    to: Offset,
    prev_scan: Option<bool>,
    config: &LogConfig,
    report: &mut OpenReport,
) -> Result<Option<Segment>> {
    if prev_scan.is_some_and(|gaps| gaps || config.cleanup.compact) {
        tracing::warn!(
            partition = %dir.display(),
            offsets = %format!("{from}..{to}"),
            "no segment holds these offsets; compaction may have dropped them"
        );
        return Ok(None);
    }
    metrics::counter!("es_storage_corruptions_total", "found" => "recovery").increment(1);
    let what = format!("no segment holds offsets {from}..{to}: a segment file is missing");
    if !recovery::accept_data_loss() {
        tracing::error!(
            partition = %dir.display(),
            offsets_lost = %format!("{from}..{to}"),
            "a segment is missing: refusing to open the partition (nothing changed)"
        );
        return Err(StorageError::DataLoss {
            path: dir.to_path_buf(),
            what,
        });
    }
    let mut seg = Segment::empty(dir, from);
    let file = segment::create_new(&seg.log_path).await?;
    let _ = file.close().await;
    seg.created = true;
    seg.next_offset = to;
    let bytes = seg.index_file_bytes();
    segment::write_file_synced(&seg.index_path, bytes).await?;
    dirs::sync_dir(dir).await?;
    seg.sealed = true;
    tracing::error!(
        partition = %dir.display(),
        offsets_lost = %format!("{from}..{to}"),
        filler = %seg.log_path.display(),
        "a segment is missing (data loss accepted): an empty segment takes its offsets"
    );
    report.missing.push((from, to));
    Ok(Some(seg))
}

/// Whether a batch of `len` bytes must start a new segment after `active`
/// (not empty): by size or by age.
fn must_roll(active: &Segment, len: u64, config: &LogConfig) -> bool {
    active.dirty_bytes + len > config.segment_bytes
        || config
            .segment_age
            .is_some_and(|age| active.opened_at.elapsed() >= age)
}
