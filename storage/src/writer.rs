//! `SegmentWriter`: how the active segment's bytes reach its file. Lives on
//! the shard that owns the partition; only the partition's write loop uses
//! it, one write at a time.
//!
//! **Direct** (the default): the file is opened a second time with
//! `O_DIRECT` and written page by page from memory the log owns, so the
//! kernel neither copies the bytes into its page cache nor allocates pages
//! for them: on the machines we measured, that copy into fresh pages cost
//! more CPU than everything else a produce does, and capped the disk at a
//! third of what it takes (docs/benchmarks.md). Direct writes must start and
//! end on page boundaries, so each write begins at the page holding the end
//! of the log, rewriting that page's bytes (from [`RecentWrites`]) ahead of
//! the new ones, and pads its last page with zeros. The file's length is
//! therefore rounded up to a page while the segment is active; sealing
//! truncates it to the bytes written, and recovery drops a zero padding
//! after the last batch (`recovery.rs`). Rewriting a page that holds
//! acknowledged bytes is safe: the new page carries the same bytes there,
//! so whichever of the old and new sectors a crash leaves, they hold them.
//!
//! **Buffered**: plain positioned writes through the page cache, for
//! filesystems that refuse `O_DIRECT` (the writer falls back on its own) or
//! when `LogConfig::direct_writes` is off.
//!
//! Direct writes go through io_uring (`DmaFile`), or, when the shard
//! started disk threads, through those (`disk_threads.rs`): the same pages
//! at the same positions, only made by a blocking `pwrite` on another
//! thread.
//!
//! Readers keep using a buffered handle; Linux drops cached pages of a range
//! a direct write covers, before and after the write.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures::channel::oneshot;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};

use crate::batch_buf::{BatchBuf, Pages};
use crate::direct_buf::DirectBuf;
use crate::disk_threads::{SyncAfter, ThreadedFile};
use crate::early::Prewritten;
use crate::recent::{page_floor, RecentWrites, PAGE_BYTES};
use crate::segment;
use crate::{Result, StorageError};

/// Largest single direct write: bigger writes go in pieces of this size, so
/// the aligned staging buffer of a write stays bounded however many appends
/// a write coalesced. 2 MiB reaches the disk's full speed here (one 1 MiB
/// write + fdatasync already does: docs/benchmarks.md).
pub const DIRECT_WRITE_BYTES_MAX: usize = 2 << 20;

/// The write side of an active segment (see the module doc).
pub(crate) enum SegmentWriter {
    Direct {
        file: DmaFile,
        path: PathBuf,
        /// The shard's disk threads and a duplicate of `file`'s descriptor
        /// for them, when the shard started any.
        threads: Option<ThreadedFile>,
    },
    Buffered {
        file: Rc<BufferedFile>,
        path: PathBuf,
    },
}

impl std::fmt::Debug for SegmentWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SegmentWriter::Direct { path, .. } => write!(f, "SegmentWriter::Direct({})", path.display()),
            SegmentWriter::Buffered { path, .. } => write!(f, "SegmentWriter::Buffered({})", path.display()),
        }
    }
}

impl SegmentWriter {
    /// A writer for the segment at `path`, whose written bytes end at
    /// `written`, and the recent-writes buffer that goes with it (holding
    /// the partial last page, read back from the file). `buffered` is the
    /// segment's buffered handle: the fallback when direct I/O is off or
    /// refused.
    pub async fn open(
        path: &Path,
        written: u64,
        buffered: Rc<BufferedFile>,
        direct: bool,
        recent_bytes: usize,
    ) -> Result<(SegmentWriter, RecentWrites)> {
        let buffered_writer = |file| {
            (
                SegmentWriter::Buffered {
                    file,
                    path: path.to_path_buf(),
                },
                RecentWrites::new(written, recent_bytes),
            )
        };
        if !direct {
            return Ok(buffered_writer(buffered));
        }
        let file = match OpenOptions::new().read(true).write(true).dma_open(path).await {
            Ok(f) => f,
            Err(e) => {
                let e = std::io::Error::from(e);
                if e.raw_os_error() == Some(libc::EINVAL) {
                    tracing::warn!(
                        file = %path.display(),
                        "the filesystem refuses direct I/O (O_DIRECT): writing through the page cache"
                    );
                    return Ok(buffered_writer(buffered));
                }
                return Err(StorageError::io(path, e));
            }
        };
        if file.alignment() > PAGE_BYTES {
            tracing::warn!(
                file = %path.display(),
                alignment = file.alignment(),
                "direct I/O needs a larger alignment than a page here: writing through the page cache"
            );
            let _ = file.close().await;
            return Ok(buffered_writer(buffered));
        }
        // SAFETY: `file` is open for the whole of this call.
        let fd = unsafe { BorrowedFd::borrow_raw(file.as_raw_fd()) };
        let threads = ThreadedFile::dup_of(fd).map_err(|e| StorageError::io(path, e))?;
        let floor = page_floor(written);
        let mut recent = RecentWrites::new(floor, recent_bytes);
        if floor < written {
            // Through the buffered handle: the page cache copy, if any, is
            // dropped by the kernel when the first direct write covers it.
            let have = (written - floor) as usize;
            let page = segment::read_exact(&buffered, path, floor, have).await?;
            if page.len() < have {
                return Err(StorageError::Corrupt {
                    path: path.to_path_buf(),
                    position: floor,
                    reason: format!("file shorter than its written length {written}"),
                });
            }
            recent.push(floor, bytes::Bytes::from(page));
        }
        Ok((
            SegmentWriter::Direct {
                file,
                path: path.to_path_buf(),
                threads,
            },
            recent,
        ))
    }

    /// Writes `parts` (contiguous) at `pos`, the end of what was written
    /// before, then hands them to `recent`. `early`: pages of the first
    /// part already written while it arrived (`early.rs`), not written
    /// again (unless an early write failed); the rest of the bytes go out
    /// while those writes finish. An error leaves the file with any prefix
    /// of the bytes: the caller poisons the partition.
    ///
    /// `sync_after`: when the writes go through disk threads (and none was
    /// written early), the thread that makes the last write fdatasyncs the
    /// file right after it; the returned [`SyncAfter`] is that sync's end.
    /// `None`: no sync was started (the caller syncs as usual).
    pub(crate) async fn write(
        &self,
        recent: &RefCell<RecentWrites>,
        mut parts: Vec<BatchBuf>,
        pos: u64,
        early: Option<Prewritten>,
        sync_after: bool,
    ) -> Result<Option<SyncAfter>> {
        let mut started_sync = None;
        assert_eq!(recent.borrow().end(), pos, "writes land back to back");
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let end = pos + len as u64;
        match self {
            SegmentWriter::Buffered { file, path } => {
                assert!(early.is_none(), "only direct writers write early");
                // The page cache holds what this writes: nothing to keep.
                let bytes = if parts.len() == 1 {
                    parts.pop().expect("one part").into_vec()
                } else {
                    let mut all = Vec::with_capacity(len);
                    parts.iter().for_each(|p| all.extend_from_slice(p));
                    all
                };
                segment::write_all(file, path, bytes, pos).await?;
                recent.borrow_mut().forget_upto(end);
            }
            SegmentWriter::Direct { file, path, threads } => {
                // One batch in page-aligned memory that lies as the file's
                // pages will: written as it lies, through disk threads.
                let paged = parts.len() == 1 && parts[0].in_page_head().is_some();
                let pages = match threads {
                    Some(_) if paged => in_place(&mut parts, &earlier_bytes(recent, pos)),
                    _ => None,
                };
                let source = match &pages {
                    Some(pages) => Source::Pages(pages),
                    None => Source::Parts(&parts),
                };
                let range =
                    |from, to, sync| write_range(file, threads, path, recent, &source, pos, from, to, sync);
                match early {
                    None => started_sync = range(pos, end, sync_after).await?,
                    Some(p) => {
                        assert!(
                            pos < p.from && p.from < p.to && p.to <= end && p.to.is_multiple_of(PAGE_BYTES),
                            "early pages lie inside the write, after its header"
                        );
                        // Other pages than the early ones: all at once.
                        let (head, tail, early_ok) = futures::join!(
                            range(pos, p.from, false),
                            range(p.to, end, false),
                            p.writes.wait()
                        );
                        head?;
                        tail?;
                        if !early_ok {
                            range(p.from, p.to, false).await?;
                        }
                    }
                }
                let mut recent = recent.borrow_mut();
                if let Some(pages) = pages {
                    recent.push(pos, bytes::Bytes::from_owner(pages));
                }
                let mut at = pos;
                for part in parts {
                    let n = part.len() as u64;
                    recent.push(at, part.into_bytes());
                    at += n;
                }
            }
        }
        Ok(started_sync)
    }

    /// Writes `pages` (whole pages) at `pos` (page aligned) in a detached
    /// task, outside the write loop: an early write (`early.rs`). The
    /// receiver says whether the write succeeded; a failure is only
    /// logged, the write loop then writes those bytes itself.
    pub(crate) fn write_pages_detached(self: &Rc<Self>, pages: &[u8], pos: u64) -> oneshot::Receiver<bool> {
        assert!(
            pos.is_multiple_of(PAGE_BYTES) && (pages.len() as u64).is_multiple_of(PAGE_BYTES),
            "early writes are whole pages"
        );
        let (tx, rx) = oneshot::channel();
        let SegmentWriter::Direct { file, threads, .. } = &**self else {
            unreachable!("only direct writers write early");
        };
        let buf = DirectBuf::filled(file, threads, pages.len(), |out| out.copy_from_slice(pages));
        let writer = self.clone();
        glommio::spawn_local(async move {
            let SegmentWriter::Direct { file, path, threads } = &*writer else {
                unreachable!("only direct writers write early");
            };
            let total = buf.len();
            let ok = match buf.write(file, threads, path, pos).await {
                Ok(wrote) => segment::check_written(path, wrote, total, pos).is_ok(),
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "an early write failed: the batch is written again whole");
                    false
                }
            };
            let _ = tx.send(ok);
        })
        .detach();
        rx
    }

    /// The segment file's path.
    pub fn path(&self) -> &Path {
        match self {
            SegmentWriter::Direct { path, .. } | SegmentWriter::Buffered { path, .. } => path,
        }
    }

    pub fn is_direct(&self) -> bool {
        matches!(self, SegmentWriter::Direct { .. })
    }

    /// Makes the file exactly `len` bytes long (dropping a direct writer's
    /// zero padding) before the segment is sealed. The caller fdatasyncs.
    pub async fn finish(&self, len: u64) -> Result<()> {
        match self {
            SegmentWriter::Buffered { .. } => Ok(()),
            SegmentWriter::Direct { file, path, .. } => {
                file.truncate(len).await.map_err(|e| StorageError::io(path, e))
            }
        }
    }

    /// The shard's disk threads and this writer's descriptor for them, when
    /// its direct writes go through them (then so do the partition's
    /// fdatasyncs).
    pub(crate) fn disk_threads(&self) -> Option<&ThreadedFile> {
        match self {
            SegmentWriter::Direct { threads, .. } => threads.as_ref(),
            SegmentWriter::Buffered { .. } => None,
        }
    }
}

/// The bytes of a direct write: its batches, copied into an aligned
/// buffer per write, or one batch's own pages (`batch_buf.rs`), the first
/// of them the page holding the write's start, written as they lie.
enum Source<'a> {
    Parts(&'a [BatchBuf]),
    Pages(&'a Pages),
}

/// The pages of the one batch in `parts`, which lies in page-aligned
/// memory, if it lies as in the file: `before`, the bytes before it in its
/// first page, say where that is. Counted either way
/// (`es_paged_batch_writes_total`: how often a batch received where the
/// log was expected to end landed there).
fn in_place(parts: &mut Vec<BatchBuf>, before: &[u8]) -> Option<Pages> {
    match parts.pop().expect("one part").into_pages(before) {
        Ok(pages) => {
            metrics::counter!("es_paged_batch_writes_total", "outcome" => "in_place").increment(1);
            Some(pages)
        }
        Err(batch) => {
            metrics::counter!("es_paged_batch_writes_total", "outcome" => "copied").increment(1);
            parts.push(batch);
            None
        }
    }
}

/// The bytes before `pos` in its page: earlier writes', held in `recent`.
fn earlier_bytes(recent: &RefCell<RecentWrites>, pos: u64) -> Vec<u8> {
    let floor = page_floor(pos);
    let mut held = Vec::with_capacity((pos - floor) as usize);
    recent.borrow().copy_range(floor, pos, &mut held);
    assert_eq!(held.len() as u64, pos - floor, "the partial page is held whole");
    held
}

/// Writes the file positions `[from, to)` of a direct write of `source` at
/// `pos` (`pos <= from <= to <= pos + len`), whole pages: a partial first
/// page starts with the bytes `recent` holds before `pos`, a partial last
/// page ends in zeros.
#[allow(clippy::too_many_arguments)]
async fn write_range(
    file: &DmaFile,
    threads: &Option<ThreadedFile>,
    path: &Path,
    recent: &RefCell<RecentWrites>,
    source: &Source<'_>,
    pos: u64,
    from: u64,
    to: u64,
    sync_after: bool,
) -> Result<Option<SyncAfter>> {
    let mut started_sync = None;
    let mut at = from;
    while at < to {
        let floor = page_floor(at);
        let head = (at - floor) as usize;
        let n = ((to - at) as usize).min(DIRECT_WRITE_BYTES_MAX - head);
        let total = (head + n).next_multiple_of(PAGE_BYTES as usize);
        let buf = match source {
            // Its first page already holds the earlier bytes, its last
            // page ends in zeros (`ReceivingBatch`).
            Source::Pages(pages) => {
                let at = (floor - page_floor(pos)) as usize;
                DirectBuf::shared(&pages.pages, at..at + total)
            }
            Source::Parts(parts) => DirectBuf::filled(file, threads, total, |page| {
                // The partial page: bytes of earlier writes (held in
                // `recent`), then this write's bytes up to `at`.
                let from_parts = floor.max(pos);
                let skip = (from_parts - floor) as usize;
                if floor < from_parts {
                    page[..skip].copy_from_slice(&earlier_bytes(recent, from_parts));
                }
                copy_out(parts, (from_parts - pos) as usize, &mut page[skip..head + n]);
                page[head + n..].fill(0);
            }),
        };
        let last = at + n as u64 >= to;
        let wrote = match threads {
            Some(threads) if last && sync_after => {
                let (wrote, synced) = buf.write_then_sync(threads, path, floor).await?;
                started_sync = Some(synced);
                wrote
            }
            _ => buf.write(file, threads, path, floor).await?,
        };
        segment::check_written(path, wrote, total, floor)?;
        at += n as u64;
    }
    Ok(started_sync)
}

/// Copies `out.len()` bytes of the concatenation of `parts`, from byte
/// `from` on, into `out`.
fn copy_out(parts: &[BatchBuf], mut from: usize, out: &mut [u8]) {
    let mut filled = 0;
    for part in parts {
        if filled == out.len() {
            break;
        }
        if from >= part.len() {
            from -= part.len();
            continue;
        }
        let n = (part.len() - from).min(out.len() - filled);
        out[filled..filled + n].copy_from_slice(&part[from..from + n]);
        filled += n;
        from = 0;
    }
    assert_eq!(filled, out.len(), "parts hold the bytes asked for");
}
