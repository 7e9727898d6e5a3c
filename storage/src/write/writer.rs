//! `SegmentWriter`: how the active segment's bytes reach its file. Lives on
//! the shard that owns the partition; only the partition's write loop uses
//! it, one write at a time.
//!
//! **Direct** (the default): the file is opened a second time with
//! `O_DIRECT` and written page by page from memory the log owns, so the
//! kernel neither copies the bytes into its page cache nor allocates pages
//! for them: that copy into fresh pages cost more CPU than everything else
//! a produce does, and capped what the disk takes
//! (docs/design/direct-writes.md). Direct writes must start and
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
//! started disk threads, through those (`io/disk_threads/`): the same pages
//! at the same positions, only made by a blocking `pwrite` on another
//! thread. Through disk threads, a batch received into page-aligned memory
//! where it lands (`batch_buf.rs`) is written from that memory, not copied
//! (`plan.rs`; a write that joins several batches is one `pwritev` of their
//! pages and of copies of the others').
//!
//! Readers keep using a buffered handle; Linux drops cached pages of a range
//! a direct write covers, before and after the write.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures::channel::oneshot;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};

use crate::io::disk_threads::{SyncAfter, ThreadedFile};
use crate::io::files;
use crate::io::page_buf::{page_floor, PAGE_BYTES};
use crate::limits::DIRECT_WRITE_BYTES_MAX;
use crate::write::batch_buf::BatchBuf;
use crate::write::direct_buf::DirectBuf;
use crate::write::early::Prewritten;
use crate::write::plan::{place, Plan};
use crate::write::recent::RecentWrites;
use crate::{Result, StorageError};

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
        let file = match crate::io::device::dma_open(path, OpenOptions::new().read(true).write(true)).await {
            Ok(f) => f,
            Err(e) => {
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
            let page = files::read_exact(&buffered, path, floor, have).await?;
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
    /// of the bytes past `pos` and `recent` as it was: the caller cuts the
    /// file back to `pos` or poisons the partition (`write_failure.rs`).
    ///
    /// `sync_after`: when the writes go through disk threads (and none was
    /// written early), the thread that makes the last write fdatasyncs the
    /// file right after it; the returned [`SyncAfter`] is that sync's end.
    /// `None`: no sync was started (the caller syncs as usual).
    ///
    /// `no_space`: a test's full disk (`NoSpaceAt::SegmentWrite`): the
    /// bytes are written, then the write fails with ENOSPC.
    pub(crate) async fn write(
        &self,
        recent: &RefCell<RecentWrites>,
        mut parts: Vec<BatchBuf>,
        pos: u64,
        early: Option<Prewritten>,
        sync_after: bool,
        no_space: bool,
    ) -> Result<Option<SyncAfter>> {
        let injected = || {
            StorageError::io(
                self.path(),
                std::io::Error::new(std::io::ErrorKind::StorageFull, "no space (injected by a test)"),
            )
        };
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
                files::write_all(file, path, bytes, pos).await?;
                if no_space {
                    return Err(injected());
                }
                recent.borrow_mut().forget_upto(end);
            }
            SegmentWriter::Direct { file, path, threads } => {
                // Through disk threads, batches that lie in page-aligned
                // memory as they will in the file are written from there.
                let placed = place(parts, pos, recent, threads.is_some());
                let plan = Plan::new(&placed, pos);
                let range = |from, to, sync| write_range(file, threads, path, recent, &plan, from, to, sync);
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
                if no_space {
                    return Err(injected());
                }
                let mut recent = recent.borrow_mut();
                let mut at = pos;
                for part in placed {
                    let n = part.as_ref().len() as u64;
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
                Ok(wrote) => files::check_written(path, wrote, total, pos).is_ok(),
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

/// Writes the file positions `[from, to)` of the direct write `plan` (its
/// `pos <= from <= to <= end`), whole pages: a partial first page starts
/// with the bytes `recent` holds before `pos`, a partial last page ends
/// in zeros.
#[allow(clippy::too_many_arguments)]
async fn write_range(
    file: &DmaFile,
    threads: &Option<ThreadedFile>,
    path: &Path,
    recent: &RefCell<RecentWrites>,
    plan: &Plan<'_>,
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
        let buf = plan.buffer(file, threads, recent, floor, floor + total as u64);
        let last = at + n as u64 >= to;
        let wrote = match threads {
            Some(threads) if last && sync_after => {
                let (wrote, synced) = buf.write_then_sync(threads, path, floor).await?;
                started_sync = Some(synced);
                wrote
            }
            _ => buf.write(file, threads, path, floor).await?,
        };
        let aligned = wrote > 0 && (wrote as u64).is_multiple_of(PAGE_BYTES);
        if wrote < total && aligned && started_sync.is_none() {
            // A short direct write (io_uring's; disk threads go on by
            // themselves) stops on a page boundary: the rest goes on from
            // there, so a write that cannot finish fails with the kernel's
            // reason (ENOSPC, EFBIG, EIO), which decides what the caller
            // does (`write_failure.rs`).
            at = floor + wrote as u64;
            continue;
        }
        files::check_written(path, wrote, total, floor)?;
        at += n as u64;
    }
    Ok(started_sync)
}
