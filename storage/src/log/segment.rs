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

use glommio::io::{BufferedFile, OpenOptions};

use crate::batch::{self, BatchError, BatchHeader};
use crate::format::index::{Footer, IndexEntry, SparseIndex, FOOTER_BYTES};
use crate::io::cached::read_cached;
use crate::io::dirs;
use crate::log::write_failure::WriteFailure;
use crate::write::recent::RecentWrites;
use crate::write::writer::SegmentWriter;
use crate::{Offset, Result, StorageError};

/// A batch as read from disk: its checked header and its exact bytes (a
/// shared slice of the read that brought it in: taking it copies nothing).
#[derive(Clone, Debug)]
pub struct RawBatch {
    pub header: BatchHeader,
    pub bytes: bytes::Bytes,
}

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
    bytes_since_entry: u64,
    last_batch: Option<IndexEntry>,
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
            bytes_since_entry: 0,
            last_batch: None,
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
        self.bytes_since_entry = last.map_or(0, |e| self.written_bytes - e.position as u64);
        self.last_batch = last;
        self.index = IndexState::Loaded(index);
    }

    pub fn is_empty(&self) -> bool {
        self.dirty_bytes == 0
    }

    /// Accounts for a batch placed at `position` (its bytes follow the ones
    /// before it): offsets, timestamps and the sparse-index rule, in one
    /// place for appends and recovery alike.
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
        let index = self.loaded_index_mut();
        if index.last().is_none() || self.bytes_since_entry >= interval as u64 {
            self.loaded_index_mut().push(entry);
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry += h.batch_len as u64;
        self.last_batch = Some(entry);
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
            bytes_since_entry: self.bytes_since_entry,
            last_batch: self.last_batch,
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
        self.bytes_since_entry = mark.bytes_since_entry;
        self.last_batch = mark.last_batch;
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
        let last = self.last_batch;
        let ix = self.loaded_index_mut();
        if let Some(last) = last {
            if ix.last() != Some(last) {
                ix.push(last);
            }
        }
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
    bytes_since_entry: u64,
    last_batch: Option<IndexEntry>,
}

/// Opens a log file for reading and writing.
pub(crate) async fn open_rw(path: &Path) -> Result<BufferedFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .buffered_open(path)
        .await
        .map_err(|e| StorageError::io(path, e))
}

/// Creates a new, empty log file; fails if it exists.
pub(crate) async fn create_new(path: &Path) -> Result<BufferedFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .buffered_open(path)
        .await
        .map_err(|e| StorageError::io(path, e))
}

/// Writes all of `buf` at `pos`. A short write is an error that says why
/// the write stopped, as the kernel does once asked for the next byte
/// ([`short_write_reason`]): the reason decides whether the partition is
/// poisoned (`write_failure.rs`).
pub(crate) async fn write_all(file: &BufferedFile, path: &Path, buf: Vec<u8>, pos: u64) -> Result<()> {
    let len = buf.len();
    let n = file
        .write_at(buf, pos)
        .await
        .map_err(|e| StorageError::io(path, e))?;
    if n < len {
        return Err(short_write_reason(file, path, n, len, pos).await);
    }
    check_written(path, n, len, pos)
}

/// Why a write of `len` bytes at `pos` took only `wrote`: the error of a
/// one-byte write where it stopped (ENOSPC on a full disk, EFBIG at a file
/// size limit, EIO ...). That byte lies past what the caller counts as
/// written, which it cuts off or never reads. If it goes in, room came
/// back at once: reported as no space (the write is refused, not the
/// partition poisoned: nothing before it was touched).
async fn short_write_reason(
    file: &BufferedFile,
    path: &Path,
    wrote: usize,
    len: usize,
    pos: u64,
) -> StorageError {
    let at = pos + wrote as u64;
    let reason = match file.write_at(vec![0], at).await {
        Err(e) => std::io::Error::from(e),
        Ok(_) => std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!("short write: {wrote} of {len} bytes at {pos}, then room came back"),
        ),
    };
    StorageError::io(path, reason)
}

/// A write of `len` bytes at `pos` that wrote `wrote`: short is an error.
pub(crate) fn check_written(path: &Path, wrote: usize, len: usize, pos: u64) -> Result<()> {
    if wrote != len {
        return Err(StorageError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                format!("short write: {wrote} of {len} bytes at {pos} (disk full?)"),
            ),
        ));
    }
    Ok(())
}

/// Something batches can be read from by position: a local segment file,
/// or a segment in the cold store.
pub(crate) trait ByteSource {
    /// Reads `len` bytes at `pos`; fewer only at the end of the data.
    async fn read_at(&self, pos: u64, len: usize) -> Result<bytes::Bytes>;
}

/// A local segment file as a [`ByteSource`], with the recent writes of an
/// active segment: bytes they hold are served from memory.
pub(crate) struct FileSource<'a> {
    pub file: &'a BufferedFile,
    pub path: &'a Path,
    pub recent: Option<&'a RefCell<RecentWrites>>,
}

impl ByteSource for FileSource<'_> {
    async fn read_at(&self, pos: u64, len: usize) -> Result<bytes::Bytes> {
        let Some(recent) = self.recent else {
            return Ok(read_exact(self.file, self.path, pos, len).await?.into());
        };
        let end = pos + len as u64;
        let mut parts: Vec<bytes::Bytes> = Vec::new();
        let mut at = pos;
        while at < end {
            // Decided anew after every await: the writer may have moved on
            // (bytes it forgot are whole pages in the file by then).
            let held_from = recent.borrow().start();
            let part = if at >= held_from {
                let part = recent.borrow().read(at, (end - at) as usize);
                if part.is_empty() {
                    break;
                }
                part
            } else {
                let upto = end.min(held_from);
                let part = read_exact(self.file, self.path, at, (upto - at) as usize).await?;
                if part.len() < (upto - at) as usize {
                    return Err(StorageError::Corrupt {
                        path: self.path.to_path_buf(),
                        position: at + part.len() as u64,
                        reason: "file shorter than its written length".into(),
                    });
                }
                part.into()
            };
            at += part.len() as u64;
            parts.push(part);
        }
        Ok(match parts.len() {
            0 => bytes::Bytes::new(),
            1 => parts.pop().expect("one part"),
            _ => bytes::Bytes::from(parts.concat()),
        })
    }
}

/// Reads exactly `len` bytes at `pos` (fewer only at end of file).
/// What the page cache holds is copied straight in ([`read_cached`]); only
/// the rest goes through io_uring.
pub(crate) async fn read_exact(file: &BufferedFile, path: &Path, pos: u64, len: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    read_cached(file, pos, len, &mut out);
    while out.len() < len {
        let got = file
            .read_at(pos + out.len() as u64, len - out.len())
            .await
            .map_err(|e| StorageError::io(path, e))?;
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    Ok(out)
}

/// Writes `bytes` as a file (created or truncated) and fdatasyncs it. The
/// caller syncs the directory. A write that fails (no room: `Io`) or
/// whose fsync fails (`Sync`) removes the part written: every such file
/// is derived data or a temporary one not renamed into place yet, so
/// nothing else is lost, and a full disk gets no half file to keep.
pub(crate) async fn write_file_synced(path: &Path, bytes: Vec<u8>) -> Result<()> {
    let file = BufferedFile::create(path)
        .await
        .map_err(|e| StorageError::io(path, e))?;
    let written = async {
        write_all(&file, path, bytes, 0).await?;
        file.fdatasync().await.map_err(|e| StorageError::sync(path, e))
    }
    .await;
    if let Err(e) = written {
        let _ = file.close().await;
        if let Err(gone) = dirs::remove_if_exists(path).await {
            tracing::warn!(file = %path.display(), error = %gone, "a half-written file was not removed");
        }
        return Err(e);
    }
    file.close().await.map_err(|e| StorageError::io(path, e))
}

/// Writes the index file of a segment that takes no more batches, then
/// fsyncs its directory. An index is derived data: without room for it
/// (`write_failure.rs`) the segment goes on with its index in memory, the
/// half-written file is gone (`write_file_synced`), and the next open
/// rebuilds it from the log; logged. Any other failure is returned.
pub(crate) async fn save_index(dir: &Path, path: &Path, bytes: Vec<u8>) -> Result<()> {
    match write_file_synced(path, bytes).await {
        Ok(()) => {}
        Err(e) if !WriteFailure::of(&e).poisons() => {
            tracing::warn!(index = %path.display(), error = %e, "no room for a segment index: kept in memory, the next open rebuilds it");
            return Ok(());
        }
        Err(e) => return Err(e),
    }
    dirs::sync_dir(dir).await
}

/// Reads the footer of an index file, if it exists and is intact.
pub(crate) async fn read_index_footer(path: &Path) -> Option<Footer> {
    let file = BufferedFile::open(path).await.ok()?;
    let len = file.file_size().await.ok()?;
    let tail = if len >= FOOTER_BYTES as u64 {
        read_exact(&file, path, len - FOOTER_BYTES as u64, FOOTER_BYTES)
            .await
            .ok()
    } else {
        None
    };
    let _ = file.close().await;
    Footer::decode(&tail?)
}

/// Reads and checks a whole index file against its footer.
pub(crate) async fn read_index(path: &Path, footer: &Footer) -> Option<SparseIndex> {
    let len = footer.entry_count as usize * crate::format::index::ENTRY_BYTES + FOOTER_BYTES;
    let file = BufferedFile::open(path).await.ok()?;
    let bytes = read_exact(&file, path, 0, len).await.ok();
    let _ = file.close().await;
    SparseIndex::decode_entries(&bytes?, footer)
}

/// Where a read met bytes inside a segment's written part that are not a
/// valid batch (corruption: the write loop only ever writes whole batches
/// there).
#[derive(Clone, Debug)]
pub(crate) struct Damage {
    pub path: PathBuf,
    pub position: u64,
    pub reason: String,
    /// The offset after the last batch the read passed before it, if any.
    pub after: Option<Offset>,
}

impl Damage {
    /// The error a read that found nothing before the damage returns.
    pub fn error(&self) -> StorageError {
        let from = match self.after {
            Some(offset) => format!("from offset {offset} on"),
            None => "from the segment's start on".into(),
        };
        StorageError::Corrupt {
            path: self.path.clone(),
            position: self.position,
            reason: format!(
                "{}; the records {from} in this segment cannot be read (the broker log says more)",
                self.reason
            ),
        }
    }
}

/// Reads whole, checked batches from `file` starting at `start` (a batch
/// boundary) and ending before `end`, stopping once `budget_bytes` is
/// reached (always at least one batch if any is there) or `stop(header)` says
/// so. Bytes that fail their checks stop the read: the batches before them
/// are returned with the [`Damage`]; never the bad bytes.
pub(crate) async fn read_batches(
    src: &impl ByteSource,
    path: &Path,
    start: u64,
    end: u64,
    budget_bytes: usize,
    keep: impl FnMut(&BatchHeader) -> Scan,
) -> Result<(Vec<RawBatch>, Option<Damage>)> {
    let read = read_batches_limited(src, path, start, end, budget_bytes, usize::MAX, keep).await?;
    Ok((read.batches, read.damaged))
}

/// What [`read_batches_limited`] found.
pub(crate) struct SegmentRead {
    pub batches: Vec<RawBatch>,
    pub damaged: Option<Damage>,
    /// The length of the batch the read stopped before because taking it
    /// would have passed `limit_bytes` (no more than its header was read
    /// for it).
    pub over_limit: Option<usize>,
}

/// [`read_batches`], never taking more than `limit_bytes` in all: the read
/// stops before a batch that would pass it, leaves it unread (its header
/// tells its length) and says so (`over_limit`). Memory read stays within
/// the larger of `limit_bytes` and one read-ahead chunk, whatever a client
/// asked for.
pub(crate) async fn read_batches_limited(
    src: &impl ByteSource,
    path: &Path,
    start: u64,
    end: u64,
    budget_bytes: usize,
    limit_bytes: usize,
    mut keep: impl FnMut(&BatchHeader) -> Scan,
) -> Result<SegmentRead> {
    /// Read-ahead when the budget is small: one read usually holds several batches.
    const READ_CHUNK_BYTES_MIN: usize = 64 << 10;
    let mut out = Vec::new();
    let mut used = 0usize;
    let mut pos = start;
    let mut after = None;
    let mut buf = bytes::Bytes::new();
    let mut buf_pos = start; // file position of buf[0]
    let damage = |position: u64, reason: String, after: Option<Offset>| Damage {
        path: path.to_path_buf(),
        position,
        reason,
        after,
    };
    let done = |batches, damaged, over_limit| SegmentRead {
        batches,
        damaged,
        over_limit,
    };
    while pos < end {
        let at = (pos - buf_pos) as usize;
        match batch::check(&buf[at..]) {
            Ok(h) => {
                let len = h.batch_len as usize;
                match keep(&h) {
                    Scan::Skip => {}
                    Scan::Take if used + len > limit_bytes => return Ok(done(out, None, Some(len))),
                    Scan::Take => {
                        out.push(RawBatch {
                            header: h,
                            bytes: buf.slice(at..at + len),
                        });
                        used += len;
                    }
                    Scan::Stop => break,
                }
                pos += len as u64;
                after = Some(h.next_offset());
                if used >= budget_bytes {
                    break;
                }
            }
            Err(BatchError::Incomplete { needed, .. }) => {
                let left = end - pos;
                if left < needed as u64 {
                    let reason = format!("batch of {needed} bytes runs past the written end");
                    return Ok(done(out, Some(damage(pos, reason, after)), None));
                }
                // A batch to take that would pass the limit is not read.
                if used + needed > limit_bytes {
                    if let Ok(h) = BatchHeader::parse(&buf[at..]) {
                        match keep(&h) {
                            Scan::Take => return Ok(done(out, None, Some(needed))),
                            Scan::Stop => break,
                            Scan::Skip => {}
                        }
                    }
                }
                let want = (needed
                    .max(budget_bytes.min(limit_bytes).saturating_sub(used))
                    .max(READ_CHUNK_BYTES_MIN) as u64)
                    .min(left) as usize;
                buf = match src.read_at(pos, want).await {
                    Ok(b) => b,
                    Err(StorageError::Corrupt { position, reason, .. }) => {
                        return Ok(done(out, Some(damage(position, reason, after)), None))
                    }
                    Err(e) => return Err(e),
                };
                buf_pos = pos;
                if buf.len() < want {
                    let reason = "file shorter than its written length".to_string();
                    return Ok(done(out, Some(damage(pos, reason, after)), None));
                }
            }
            Err(BatchError::Malformed(reason)) => {
                return Ok(done(out, Some(damage(pos, reason, after)), None))
            }
        }
    }
    Ok(done(out, None, None))
}

/// What a reader wants done with the next batch.
pub(crate) enum Scan {
    Skip,
    Take,
    Stop,
}
