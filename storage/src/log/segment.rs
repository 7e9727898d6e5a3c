//! One segment of a partition log: a `.log` file of batches and its sparse
//! index. Lives on the shard that owns its partition.
//!
//! Byte counts: `dirty_bytes` counts every batch given a position (some may
//! still wait to be written); `written_bytes` those whose write completed.
//! `written_bytes <= dirty_bytes` always; durability is tracked per partition.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use glommio::io::BufferedFile;

use crate::batch::BatchHeader;
use crate::format::index::{Footer, IndexEntry, SparseIndex};
use crate::format::index_rule::IndexRule;
use crate::io::dirs;
use crate::write::recent::RecentWrites;
use crate::write::writer::SegmentWriter;
use crate::Offset;

/// The index of a segment: in memory, or only its footer until first needed.
#[derive(Debug)]
pub(crate) enum IndexState {
    Loaded(SparseIndex),
    OnDisk(Footer),
}

/// Source of segment ids: every `Segment` value gets a new one, so a task
/// that awaited can tell whether the segment it looked at was replaced.
static NEXT_SEGMENT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
pub(crate) struct Segment {
    /// Unique per in-memory segment: compaction and retention replace or
    /// remove segments while readers await, and readers compare ids.
    pub id: u64,
    pub base: Offset,
    pub log_path: PathBuf,
    pub index_path: PathBuf,
    /// Open handle; `None` for a sealed segment not read yet, or for a new
    /// segment the writer has not created yet.
    pub file: Option<Rc<BufferedFile>>,
    /// The write side, opened by the first write of this process; dropped
    /// when the segment is sealed.
    pub writer: Option<Rc<SegmentWriter>>,
    /// The newest written bytes, while there is a writer (see `recent.rs`).
    pub recent: Option<Rc<RefCell<RecentWrites>>>,
    /// The file exists on disk.
    pub created: bool,
    pub written_bytes: u64,
    pub dirty_bytes: u64,
    /// Offset after the last batch given a position in this segment.
    pub next_offset: Offset,
    pub max_timestamp_ms: i64,
    pub index: IndexState,
    /// Its index file is on disk and matches the log (rolled or clean close).
    pub sealed: bool,
    /// The sparse-index rule's state (es-format's `index_rule`).
    rule: IndexRule,
    pub opened_at: Instant,
}

impl Segment {
    /// A segment with no batches, starting at `base`.
    pub fn empty(dir: &Path, base: Offset) -> Segment {
        Segment {
            id: NEXT_SEGMENT_ID.fetch_add(1, Ordering::Relaxed),
            base,
            log_path: dirs::log_path(dir, base),
            index_path: dirs::index_path(dir, base),
            file: None,
            writer: None,
            recent: None,
            created: false,
            written_bytes: 0,
            dirty_bytes: 0,
            next_offset: base,
            max_timestamp_ms: i64::MIN,
            index: IndexState::Loaded(SparseIndex::default()),
            sealed: false,
            rule: IndexRule::default(),
            opened_at: Instant::now(),
        }
    }

    /// A sealed segment known from its index footer.
    pub fn from_footer(dir: &Path, base: Offset, footer: Footer) -> Segment {
        Segment {
            created: true,
            written_bytes: footer.log_bytes,
            dirty_bytes: footer.log_bytes,
            next_offset: footer.next_offset,
            max_timestamp_ms: footer.max_timestamp_ms,
            index: IndexState::OnDisk(footer),
            sealed: true,
            ..Segment::empty(dir, base)
        }
    }

    /// Makes a cleanly closed segment active again: its index in memory and
    /// the index rule resumed after its last batch (the sealed index always
    /// ends with an entry for the last batch).
    pub fn resume(&mut self, index: SparseIndex, last: Option<IndexEntry>) {
        self.rule = IndexRule::resume(last, self.written_bytes);
        self.index = IndexState::Loaded(index);
    }

    pub fn is_empty(&self) -> bool {
        self.dirty_bytes == 0
    }

    /// Accounts for a batch placed at `position` (its bytes follow the ones
    /// before it): offsets, timestamps and the sparse-index rule, in one
    /// place for appends and recovery alike. The rule itself is
    /// es-format's `IndexRule`, which `es-tools restore` applies too.
    pub fn note_batch(&mut self, h: &BatchHeader, position: u64, interval: u32) {
        assert_eq!(position, self.dirty_bytes, "batches are placed back to back");
        assert!(h.base_offset >= self.next_offset, "offsets only grow");
        let relative = h.base_offset.0 - self.base.0;
        assert!(relative <= u32::MAX as u64 && position <= u32::MAX as u64);
        self.max_timestamp_ms = self.max_timestamp_ms.max(h.max_timestamp_ms);
        let entry = IndexEntry {
            relative_offset: relative as u32,
            position: position as u32,
            max_timestamp_ms: self.max_timestamp_ms,
        };
        // A zero-width control batch shares its offset with the batch
        // after it: it gets no index entry (a lookup by offset never wants
        // it; a scan forward from the entry before passes over it).
        if !h.is_control() {
            let mut rule = self.rule;
            rule.note(self.loaded_index_mut(), entry, h.batch_len, interval);
            self.rule = rule;
        }
        self.next_offset = h.next_offset();
        self.dirty_bytes += h.batch_len as u64;
    }

    /// Where the segment's accounting stands now, for [`rewind`] to go
    /// back to: the state after its last batch placed so far.
    ///
    /// [`rewind`]: Segment::rewind
    pub fn mark(&self) -> Mark {
        let index_entries = match &self.index {
            IndexState::Loaded(ix) => ix.entries().len(),
            IndexState::OnDisk(footer) => footer.entry_count as usize,
        };
        Mark {
            dirty_bytes: self.dirty_bytes,
            next_offset: self.next_offset,
            max_timestamp_ms: self.max_timestamp_ms,
            index_entries,
            rule: self.rule,
        }
    }

    /// Forgets every batch placed after `mark` was taken (their write
    /// was refused): the accounting is as it was then. Only batches not
    /// yet written go; `written_bytes` is already at the mark.
    pub fn rewind(&mut self, mark: Mark) {
        assert!(
            mark.dirty_bytes <= self.dirty_bytes && mark.next_offset <= self.next_offset,
            "a rewind goes back"
        );
        assert_eq!(
            self.written_bytes, mark.dirty_bytes,
            "only unwritten batches are forgotten"
        );
        if mark.dirty_bytes < self.dirty_bytes {
            self.loaded_index_mut().truncate(mark.index_entries);
        }
        self.dirty_bytes = mark.dirty_bytes;
        self.next_offset = mark.next_offset;
        self.max_timestamp_ms = mark.max_timestamp_ms;
        self.rule = mark.rule;
    }

    fn loaded_index_mut(&mut self) -> &mut SparseIndex {
        match &mut self.index {
            IndexState::Loaded(ix) => ix,
            IndexState::OnDisk(_) => panic!("only a loaded segment takes batches"),
        }
    }

    /// The index file bytes for this segment as it stands, with an entry for
    /// its last batch so the footer's running max timestamp is covered.
    pub fn index_file_bytes(&mut self) -> Vec<u8> {
        assert_eq!(
            self.written_bytes, self.dirty_bytes,
            "seal only a fully written segment"
        );
        let rule = self.rule;
        rule.seal(self.loaded_index_mut());
        let ix = match &self.index {
            IndexState::Loaded(ix) => ix,
            IndexState::OnDisk(_) => unreachable!(),
        };
        ix.encode_file(self.written_bytes, self.next_offset, self.max_timestamp_ms)
    }

    /// Where to start reading for `offset` in this segment's log.
    pub fn position_for(&self, offset: Offset) -> u64 {
        let rel = offset.0.saturating_sub(self.base.0).min(u32::MAX as u64) as u32;
        match &self.index {
            IndexState::Loaded(ix) => ix.floor(rel).map_or(0, |e| e.position as u64),
            IndexState::OnDisk(_) => 0,
        }
    }

    /// Where to start reading for the first record at or after `timestamp_ms`.
    pub fn position_for_time(&self, timestamp_ms: i64) -> u64 {
        match &self.index {
            IndexState::Loaded(ix) => ix.time_floor(timestamp_ms) as u64,
            IndexState::OnDisk(_) => 0,
        }
    }
}

/// A segment's accounting at a batch boundary ([`Segment::mark`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    pub dirty_bytes: u64,
    pub next_offset: Offset,
    max_timestamp_ms: i64,
    index_entries: usize,
    rule: IndexRule,
}
