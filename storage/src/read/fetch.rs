//! Reading a partition: batches and records by offset across both tiers,
//! and seek by time.
//!
//! Reads take no lock. Cleanup replaces or removes segments while a read
//! awaits; a read holds the file handle of the segment it is reading (the
//! bytes stay readable after an unlink or a rename over the name), and
//! after every await it checks, by segment id, that the segment it looked
//! up is still the one in the map, and looks again if not. A closed
//! segment's handle comes from the shard's bounded cache
//! (`segment_files.rs`), the active segment's from the segment itself.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use glommio::io::BufferedFile;

use crate::batch;
use crate::format::index::SparseIndex;
use crate::io::files;
use crate::io::segment_files::{self, Held};
use crate::limits::DAMAGE_REPORTS_MAX;
use crate::log::partition::{LogState, PartitionLog};
use crate::log::recovery::{self, Shape, Tail};
use crate::log::segment::{IndexState, Segment};
use crate::log::segment_set::SegmentSet;
use crate::read::scan;
use crate::read::scan::{Damage, FileSource, RawBatch, Scan};
use crate::record::StoredRecord;
use crate::tier::state::ColdStep;
use crate::write::recent::RecentWrites;
use crate::{io::dirs, Offset, Result, StorageError};

/// Records read, and where the next read should start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordsRead {
    /// Records with offsets in `[from, upto)`, in order. Compacted logs
    /// have gaps, so offsets need not be consecutive.
    pub records: Vec<StoredRecord>,
    /// Where to read next: past every batch returned, or `upto` when
    /// everything below it was read. Past the last record whenever the read
    /// skipped a gap, so a reader never asks for the same gap twice.
    pub next_offset: Offset,
}

/// What [`PartitionLog::read_batches_into`] appended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BatchesRead {
    /// Whole batches appended, in offset order.
    pub batches: u32,
    /// Where to read next (as in [`RecordsRead::next_offset`]).
    pub next_offset: Offset,
    /// Set when nothing was read because the first batch is larger than
    /// the read's limit (`read_batches_limited`): that batch's length.
    pub first_batch_bytes: Option<usize>,
}

/// What [`PartitionLog::read_records_limited`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitedRecords {
    pub read: RecordsRead,
    /// As in [`BatchesRead::first_batch_bytes`].
    pub first_batch_bytes: Option<usize>,
}

/// What `read_span` found: batches, where to read next, and the length of
/// a first batch it left unread for being over the limit.
type Span = (Vec<RawBatch>, Offset, Option<usize>);

/// One step of a read in the hot tier.
enum HotStep {
    Read {
        batches: Vec<RawBatch>,
        stopped: bool,
        next: Option<Offset>,
        damaged: Option<Damage>,
        /// The batch the read stopped before, over its limit: its length.
        over_limit: Option<usize>,
    },
    /// The segment was replaced or removed while the read awaited.
    Retry,
}

impl PartitionLog {
    /// Reads whole batches holding offsets from `from` up to (not including)
    /// `upto`, stopping after about `max_bytes` (always at least one batch
    /// when one is there). Pass `committed_offset()` as `upto` to serve
    /// clients. Every read here is a client's: a replicated log's control
    /// batches (zero-width, no records) are left out.
    /// Offsets below the hot tier come from the cold tier. `from` below the
    /// log start offset is `StorageError::OffsetOutOfRange`.
    pub async fn read_batches(&self, from: Offset, max_bytes: usize, upto: Offset) -> Result<Vec<RawBatch>> {
        Ok(self.read_span(from, max_bytes, upto, usize::MAX).await?.0)
    }

    /// Like [`read_batches`](PartitionLog::read_batches), appending each
    /// batch's bytes, exactly as stored, to `out`: slices of the buffers
    /// they were read into, not copies (a reply sends them as they are).
    /// A replicated log's batches are version 2 (its Raft stamp in the
    /// header); a reply in the version 1 layout gives each its
    /// `batch::downgrade_header` and sends its records as they are.
    /// Stops after the batch that brings the records taken to `max_records`
    /// (always at least one batch when one is there).
    pub async fn read_batches_into(
        &self,
        from: Offset,
        max_bytes: usize,
        max_records: usize,
        upto: Offset,
        out: &mut Vec<bytes::Bytes>,
    ) -> Result<BatchesRead> {
        self.read_batches_limited(from, max_bytes, max_records, upto, usize::MAX, out)
            .await
    }

    /// [`read_batches_into`](PartitionLog::read_batches_into), taking at
    /// most `limit_bytes` of batches in all (a hard limit, where
    /// `max_bytes` is a soft one): a batch that would pass it is left for
    /// the next read, and when the first batch alone is larger nothing is
    /// read and `first_batch_bytes` says how large it is, so that a caller
    /// that must account for the memory first can make room and ask again.
    pub async fn read_batches_limited(
        &self,
        from: Offset,
        max_bytes: usize,
        max_records: usize,
        upto: Offset,
        limit_bytes: usize,
        out: &mut Vec<bytes::Bytes>,
    ) -> Result<BatchesRead> {
        let (batches, next_offset, first_batch_bytes) =
            self.read_span(from, max_bytes, upto, limit_bytes).await?;
        let mut read = BatchesRead {
            batches: 0,
            next_offset,
            first_batch_bytes,
        };
        let mut records = 0usize;
        for b in batches {
            if records >= max_records {
                read.next_offset = b.header.base_offset.max(from);
                break;
            }
            read.batches += 1;
            records += b.header.record_count as usize;
            out.push(b.bytes);
        }
        Ok(read)
    }

    /// Like [`read_batches`](PartitionLog::read_batches), decoded into records
    /// with offsets in `[from, upto)`.
    pub async fn read(&self, from: Offset, max_bytes: usize, upto: Offset) -> Result<Vec<StoredRecord>> {
        Ok(self.read_records(from, max_bytes, upto).await?.records)
    }

    /// Like [`read`](PartitionLog::read), with where to read next.
    pub async fn read_records(&self, from: Offset, max_bytes: usize, upto: Offset) -> Result<RecordsRead> {
        Ok(self
            .read_records_limited(from, max_bytes, upto, usize::MAX)
            .await?
            .read)
    }

    /// [`read_records`](PartitionLog::read_records) within `limit_bytes`
    /// of batches, as [`read_batches_limited`](PartitionLog::read_batches_limited).
    pub async fn read_records_limited(
        &self,
        from: Offset,
        max_bytes: usize,
        upto: Offset,
        limit_bytes: usize,
    ) -> Result<LimitedRecords> {
        let (batches, next_offset, first_batch_bytes) =
            self.read_span(from, max_bytes, upto, limit_bytes).await?;
        let mut records = Vec::new();
        for b in batches {
            let got = batch::records(&b.header, &b.bytes).map_err(|e| StorageError::Corrupt {
                path: self.dir().to_path_buf(),
                position: 0,
                reason: format!("batch at offset {}: {e}", b.header.base_offset),
            })?;
            records.extend(got.into_iter().filter(|r| r.offset >= from && r.offset < upto));
        }
        Ok(LimitedRecords {
            read: RecordsRead { records, next_offset },
            first_batch_bytes,
        })
    }

    /// Batches from `from` to `upto`: about `max_bytes` of them (soft),
    /// never more than `limit_bytes` (hard; see `read_batches_limited`).
    async fn read_span(
        &self,
        from: Offset,
        max_bytes: usize,
        upto: Offset,
        limit_bytes: usize,
    ) -> Result<Span> {
        let shared = self.shared();
        let mut out: Vec<RawBatch> = Vec::new();
        let mut used = 0usize;
        let mut cursor = from;
        let mut cut_short = false;
        let out_of_range = |offset: Offset| StorageError::OffsetOutOfRange {
            offset: offset.0,
            log_start: self.log_start_offset().0,
        };
        if from < upto && from < self.log_start_offset() {
            return Err(out_of_range(from));
        }
        while cursor < upto {
            let budget = max_bytes.saturating_sub(used);
            let limit = limit_bytes.saturating_sub(used);
            let hot_start = shared.hot_start();
            let (batches, stopped, next, damaged, over_limit) = if cursor < hot_start {
                let step = match &shared.cold {
                    Some(cold) => cold.read(cursor, budget, limit, upto, hot_start).await?,
                    None => ColdStep::NotCovered,
                };
                match step {
                    ColdStep::Read {
                        batches,
                        stopped,
                        next,
                        damaged,
                        over_limit,
                    } => (batches, stopped, Some(next), damaged, over_limit),
                    ColdStep::Vanished => continue,
                    ColdStep::NotCovered if out.is_empty() => return Err(out_of_range(cursor)),
                    ColdStep::NotCovered => {
                        // Cleanup removed what came next while we read.
                        cut_short = true;
                        break;
                    }
                }
            } else {
                match self.read_hot(cursor, budget, limit, upto).await? {
                    HotStep::Read {
                        batches,
                        stopped,
                        next,
                        damaged,
                        over_limit,
                    } => (batches, stopped, next, damaged, over_limit),
                    HotStep::Retry => continue,
                }
            };
            used += batches.iter().map(|b| b.bytes.len()).sum::<usize>();
            out.extend(batches);
            if let Some(d) = damaged {
                // The records before the damage are served; the damage,
                // never: the read after them starts at it and gets the error.
                shared.report_damage(&d);
                if out.is_empty() {
                    return Err(d.error());
                }
                cut_short = true;
                break;
            }
            if !out.is_empty() && used >= max_bytes {
                cut_short = true;
                break;
            }
            // The next batch to take does not fit the limit: a first one
            // is left unread and its length said; after others, the read
            // ends before it.
            if let Some(len) = over_limit {
                if out.is_empty() {
                    return Ok((out, from, Some(len)));
                }
                cut_short = true;
                break;
            }
            match next {
                Some(n) if !stopped && n > cursor => cursor = n,
                _ => break,
            }
        }
        let next = match out.last() {
            Some(b) if cut_short => b.header.next_offset().min(upto),
            _ => upto,
        };
        Ok((out, next.max(from), None))
    }

    /// Reads from the hot segment holding `cursor` (which is at or past the
    /// hot start).
    async fn read_hot(&self, cursor: Offset, budget: usize, limit: usize, upto: Offset) -> Result<HotStep> {
        let shared = self.shared();
        let Some(base) = shared.segment_for(cursor) else {
            return Ok(HotStep::Retry);
        };
        if !shared.ensure_index(base).await? {
            return Ok(HotStep::Retry);
        }
        let Some((file, path, start, end, next, recent)) =
            shared.reader(base, |s| s.position_for(cursor)).await?
        else {
            return Ok(HotStep::Retry);
        };
        let mut stopped = false;
        let src = FileSource {
            file: &file,
            path: &path,
            recent: recent.as_deref(),
        };
        let read = scan::read_batches_limited(&src, &path, start, end, budget, limit, |h| {
            if h.base_offset >= upto {
                stopped = true;
                Scan::Stop
            } else if h.next_offset() <= cursor || h.is_control() {
                // A control batch (a replicated log's blank or membership
                // entry) holds no record: no reader for clients takes it.
                Scan::Skip
            } else {
                Scan::Take
            }
        })
        .await?;
        Ok(HotStep::Read {
            batches: read.batches,
            stopped,
            next,
            damaged: read.damaged,
            over_limit: read.over_limit,
        })
    }

    /// The first offset below `upto` whose record timestamp is at or after
    /// `timestamp_ms`; `None` if there is none yet. Searches the hot tier
    /// only.
    pub async fn offset_for_timestamp(&self, timestamp_ms: i64, upto: Offset) -> Result<Option<Offset>> {
        Ok(self
            .record_for_timestamp(timestamp_ms, upto)
            .await?
            .map(|(offset, _)| offset))
    }

    /// The first record below `upto` with the largest timestamp of the
    /// hot tier's records (Kafka's ListOffsets "max timestamp", KIP-734):
    /// its offset and timestamp. `None` if the hot tier holds no record
    /// below `upto`, or if its largest timestamp belongs to a record at or
    /// past `upto` (written, not yet durable: ask again once it is).
    pub async fn max_timestamp_record(&self, upto: Offset) -> Result<Option<(Offset, i64)>> {
        let largest = self
            .shared()
            .segments()
            .iter()
            .filter(|s| s.base < upto)
            .map(|s| s.max_timestamp_ms)
            .max();
        match largest {
            Some(t) if t > i64::MIN => self.record_for_timestamp(t, upto).await,
            _ => Ok(None),
        }
    }

    /// [`offset_for_timestamp`](Self::offset_for_timestamp), with the
    /// found record's own timestamp.
    pub async fn record_for_timestamp(
        &self,
        timestamp_ms: i64,
        upto: Offset,
    ) -> Result<Option<(Offset, i64)>> {
        let shared = self.shared();
        'search: loop {
            let candidates: Vec<Offset> = {
                shared
                    .segments()
                    .iter()
                    .filter(|s| s.max_timestamp_ms >= timestamp_ms && s.base < upto)
                    .map(|s| s.base)
                    .collect()
            };
            for base in candidates {
                if !shared.ensure_index(base).await? {
                    continue 'search;
                }
                let Some((file, path, start, end, _, recent)) =
                    shared.reader(base, |s| s.position_for_time(timestamp_ms)).await?
                else {
                    continue 'search;
                };
                let src = FileSource {
                    file: &file,
                    path: &path,
                    recent: recent.as_deref(),
                };
                let (found, damaged) = scan::read_batches(&src, &path, start, end, 1, |h| {
                    if h.base_offset >= upto {
                        Scan::Stop
                    } else if h.max_timestamp_ms < timestamp_ms {
                        Scan::Skip
                    } else {
                        Scan::Take
                    }
                })
                .await?;
                if let Some(d) = damaged.filter(|_| found.is_empty()) {
                    shared.report_damage(&d);
                    return Err(d.error());
                }
                for b in found {
                    let records = batch::records(&b.header, &b.bytes).map_err(|e| StorageError::Corrupt {
                        path: path.clone(),
                        position: 0,
                        reason: e.to_string(),
                    })?;
                    if let Some(r) = records
                        .iter()
                        .find(|r| r.timestamp_ms >= timestamp_ms && r.offset < upto)
                    {
                        return Ok(Some((r.offset, r.timestamp_ms)));
                    }
                }
            }
            return Ok(None);
        }
    }
}

/// What `LogState::reader` hands a read: the file, its path, the byte range
/// to read and the base of the next segment.
pub(crate) type Reader = (
    Held,
    PathBuf,
    u64,
    u64,
    Option<Offset>,
    Option<Rc<RefCell<RecentWrites>>>,
);

impl LogState {
    /// The segment holding `offset`, or the first one if it is below them all.
    pub(crate) fn segment_for(&self, offset: Offset) -> Option<Offset> {
        Some(self.segments().base_for(offset))
    }

    /// A file handle and the readable byte range of segment `base`, starting
    /// where `start` says, and the base of the segment after it. `None` if
    /// the segment was replaced or removed meanwhile.
    pub(crate) async fn reader(
        &self,
        base: Offset,
        start: impl Fn(&Segment) -> u64,
    ) -> Result<Option<Reader>> {
        let (file, path, id) = {
            let segments = self.segments();
            let Some(seg) = segments.get(base) else {
                return Ok(None);
            };
            (seg.file.clone(), seg.log_path.clone(), seg.id)
        };
        let same = |segments: &SegmentSet| segments.is_same(base, id);
        let file = match file {
            Some(f) => Held::Active(f),
            None => {
                let opened = segment_files::open(id, &path).await;
                if !same(&self.segments()) {
                    // Removed meanwhile: its file must not stay cached.
                    segment_files::forget(id);
                    return Ok(None);
                }
                Held::Closed(opened?)
            }
        };
        let segments = self.segments();
        if !same(&segments) {
            return Ok(None);
        }
        let seg = segments.expect(base);
        let next = segments.next_base(base);
        Ok(Some((
            file,
            path,
            start(seg),
            seg.written_bytes,
            next,
            seg.recent.clone(),
        )))
    }

    /// Loads a sealed segment's index on first use, rebuilding it from the
    /// log if the file turns out damaged. `false` if the segment was
    /// replaced or removed meanwhile.
    pub(crate) async fn ensure_index(&self, base: Offset) -> Result<bool> {
        let (footer, index_path, id) = {
            let segments = self.segments();
            let Some(seg) = segments.get(base) else {
                return Ok(false);
            };
            match &seg.index {
                IndexState::Loaded(_) => return Ok(true),
                IndexState::OnDisk(f) => (*f, seg.index_path.clone(), seg.id),
            }
        };
        match files::read_index(&index_path, &footer).await {
            Some(loaded) => Ok(self.segments_mut().load_index(base, id, loaded)),
            None => {
                // A rebuild rewrites the index file: not while a cleanup
                // changes files.
                let Ok(_permit) = self.maintenance.acquire_permit(1).await else {
                    return Ok(false);
                };
                self.rebuild_index(base, id).await
            }
        }
    }

    /// Rescans segment `base` (if it is still the segment `id` with an
    /// unloaded index) and rewrites its index. The caller holds the
    /// maintenance permit. Changes nothing in the log: a batch that fails
    /// its checks is corruption, reported (`report_damage`) and left in
    /// place; the index then covers the batches before it, and reads that
    /// reach it get the error.
    pub(crate) async fn rebuild_index(&self, base: Offset, id: u64) -> Result<bool> {
        let footer = {
            let segments = self.segments();
            match segments.get(base) {
                Some(seg) if seg.id == id => match &seg.index {
                    IndexState::Loaded(_) => return Ok(true),
                    IndexState::OnDisk(footer) => *footer,
                },
                _ => return Ok(false),
            }
        };
        let (log_path, index_path) = (dirs::log_path(&self.dir, base), dirs::index_path(&self.dir, base));
        tracing::warn!(index = %index_path.display(), "index damaged; rebuilding it from the log");
        let interval = self.config.borrow().index_interval_bytes;
        let file = BufferedFile::open(&log_path)
            .await
            .map_err(|e| StorageError::io(&log_path, e))?;
        let mut fresh = Segment::empty(&self.dir, base);
        let shape = Shape {
            last: false,
            end: Some(footer.next_offset),
        };
        let scanned = recovery::scan(&file, &mut fresh, interval, shape).await;
        let _ = file.close().await;
        let scanned = scanned?;
        let fresh = match scanned.tail {
            Tail::Clean => {
                // Compaction may have dropped the segment's last records:
                // its offsets still end where the footer says.
                fresh.next_offset = fresh.next_offset.max(footer.next_offset);
                fresh.created = true;
                let bytes = fresh.index_file_bytes();
                files::save_index(&self.dir, &index_path, bytes).await?;
                fresh.sealed = true;
                fresh
            }
            tail => {
                let reason = match tail {
                    Tail::Damaged { reason, .. } | Tail::Torn(reason) => reason,
                    Tail::Padding | Tail::Clean => "zeros where a batch should start".into(),
                };
                self.report_damage(&Damage {
                    path: log_path.clone(),
                    position: scanned.end,
                    reason,
                    after: Some(fresh.next_offset),
                });
                let ix = std::mem::replace(&mut fresh.index, IndexState::Loaded(SparseIndex::default()));
                let mut seg = Segment::from_footer(&self.dir, base, footer);
                seg.index = ix;
                seg
            }
        };
        match self.segments_mut().replace_rebuilt(base, id, fresh) {
            Some(fresh_id) => {
                segment_files::rekey(id, fresh_id);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Logs (at error level) and counts corruption a read met, once per
    /// place in a file while the partition is open.
    pub(crate) fn report_damage(&self, d: &Damage) {
        let first = {
            let mut seen = self.damage_reported.borrow_mut();
            let key = (d.path.clone(), d.position);
            if seen.contains(&key) {
                false
            } else {
                if seen.len() < DAMAGE_REPORTS_MAX {
                    seen.insert(key);
                }
                true
            }
        };
        if !first {
            tracing::debug!(file = %d.path.display(), position = d.position, "a read met known corrupt data");
            return;
        }
        metrics::counter!("es_storage_corruptions_total", "found" => "read").increment(1);
        tracing::error!(
            file = %d.path.display(),
            position = d.position,
            reason = %d.reason,
            after_offset = d.after.map(|o| o.0),
            "corrupt data in a segment: reads get the records before it, then corrupt_data"
        );
    }
}
