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
//! started disk threads, through those (`disk_threads.rs`): the same pages
//! at the same positions, only made by a blocking `pwrite` on another
//! thread. Through disk threads, a batch received into page-aligned memory
//! where it lands (`batch_buf.rs`) is written from that memory, not copied
//! ([`Plan`]; a write that joins several batches is one `pwritev` of their
//! pages and of copies of the others').
//!
//! Readers keep using a buffered handle; Linux drops cached pages of a range
//! a direct write covers, before and after the write.

use std::cell::RefCell;
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use futures::channel::oneshot;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};

use crate::batch_buf::{BatchBuf, Pages};
use crate::direct_buf::DirectBuf;
use crate::disk_threads::{PageBuf, SyncAfter, ThreadedFile, WriteBuf};
use crate::early::Prewritten;
use crate::recent::{page_floor, RecentWrites, PAGE_BYTES};
use crate::segment;
use crate::{Result, StorageError};

/// Largest single direct write: bigger writes go in pieces of this size, so
/// the aligned staging buffer of a write stays bounded however many appends
/// a write coalesced. 2 MiB reaches the disk's full speed (one 1 MiB
/// write + fdatasync already does: docs/design/direct-writes.md).
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
        let file = match crate::device::dma_open(path, OpenOptions::new().read(true).write(true)).await {
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
                segment::write_all(file, path, bytes, pos).await?;
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

/// A batch of a direct write once the write's position is known: in
/// memory of its own, laid out as the file's pages (`batch_buf.rs`), or
/// anywhere, then copied into the write's buffers.
enum Placed {
    Pages(Pages),
    Buf(BatchBuf),
}

impl AsRef<[u8]> for Placed {
    fn as_ref(&self) -> &[u8] {
        match self {
            Placed::Pages(pages) => pages.as_ref(),
            Placed::Buf(buf) => buf,
        }
    }
}

impl Placed {
    fn into_bytes(self) -> bytes::Bytes {
        match self {
            Placed::Pages(pages) => bytes::Bytes::from_owner(pages),
            Placed::Buf(buf) => buf.into_bytes(),
        }
    }
}

/// `parts`, written back to back from `pos`, each as [`Placed`]: a batch
/// received in page-aligned memory at the in-page offset where it lands
/// (`pages`: only disk threads write from such memory) gets its first
/// page's earlier bytes (the log's, held in `recent`, or the batches' of
/// this write before it) and is written as it lies. Counted
/// (`es_paged_batch_writes_total`: how often a batch received where its
/// log was expected to end landed there).
fn place(parts: Vec<BatchBuf>, pos: u64, recent: &RefCell<RecentWrites>, pages: bool) -> Vec<Placed> {
    let mut placed: Vec<Placed> = Vec::with_capacity(parts.len());
    let mut at = pos;
    for part in parts {
        let len = part.len() as u64;
        if !pages || part.in_page_head().is_none() {
            placed.push(Placed::Buf(part));
            at += len;
            continue;
        }
        // The bytes before it in its page: the log's, then this write's.
        // Taken as pages if it lies after them (`into_pages` checks).
        let floor = page_floor(at);
        let mut before = vec![0; (at - floor) as usize];
        file_bytes(recent, &placed, pos, floor, &mut before);
        let outcome = match part.into_pages(&before) {
            Ok(p) => {
                placed.push(Placed::Pages(p));
                "in_place"
            }
            Err(part) => {
                placed.push(Placed::Buf(part));
                "copied"
            }
        };
        metrics::counter!("es_paged_batch_writes_total", "outcome" => outcome).increment(1);
        at += len;
    }
    placed
}

/// The bytes before `pos` in its page: earlier writes', held in `recent`.
fn earlier_bytes(recent: &RefCell<RecentWrites>, pos: u64) -> Vec<u8> {
    let floor = page_floor(pos);
    let mut held = Vec::with_capacity((pos - floor) as usize);
    recent.borrow().copy_range(floor, pos, &mut held);
    assert_eq!(held.len() as u64, pos - floor, "the partial page is held whole");
    held
}

/// Fills `out` with the file's bytes from `from` on (page aligned, inside
/// a write of `placed` at `pos`): bytes of earlier writes before `pos`
/// (held in `recent`), then the batches', then zeros past their end.
fn file_bytes(
    recent: &RefCell<RecentWrites>,
    placed: &[impl AsRef<[u8]>],
    pos: u64,
    from: u64,
    out: &mut [u8],
) {
    assert!(
        from >= page_floor(pos),
        "a write starts at the page holding its position"
    );
    let end = pos + placed.iter().map(|p| p.as_ref().len() as u64).sum::<u64>();
    let from_parts = from.max(pos);
    let skip = (from_parts - from) as usize;
    if from < from_parts {
        out[..skip].copy_from_slice(&earlier_bytes(recent, from_parts));
    }
    let data = (end.min(from + out.len() as u64).max(from_parts) - from) as usize;
    copy_out(placed, (from_parts - pos) as usize, &mut out[skip..data]);
    out[data..].fill(0);
}

/// Where each page of a direct write of `placed` at `pos` comes from: the
/// file pages of a batch in memory of its own are written from there (a
/// page two batches share, from the later one's first page, which holds
/// the earlier one's last bytes), every other page is filled by copying.
struct Plan<'a> {
    placed: &'a [Placed],
    pos: u64,
    /// File pages `[from, to)` written from the pages of `placed[i]`, whose
    /// first page is file page `base`: in order, disjoint, page aligned.
    shared: Vec<Shared>,
}

struct Shared {
    from: u64,
    to: u64,
    part: usize,
    base: u64,
}

/// Some consecutive file pages of a write (see [`Plan::pieces`]).
enum Piece<'a> {
    /// Pages `range` of a batch's own memory.
    Shared {
        pages: &'a Arc<PageBuf>,
        range: Range<usize>,
    },
    /// The file pages `[from, to)`, copied ([`Plan::fill`]).
    Copied { from: u64, to: u64 },
}

impl<'a> Plan<'a> {
    fn new(placed: &'a [Placed], pos: u64) -> Plan<'a> {
        let mut shared = Vec::new();
        let mut at = pos;
        for (i, part) in placed.iter().enumerate() {
            let next = at + part.as_ref().len() as u64;
            if let Placed::Pages(_) = part {
                let from = page_floor(at);
                let to = if i + 1 == placed.len() || next.is_multiple_of(PAGE_BYTES) {
                    next.next_multiple_of(PAGE_BYTES)
                } else {
                    page_floor(next)
                };
                if from < to {
                    shared.push(Shared {
                        from,
                        to,
                        part: i,
                        base: from,
                    });
                }
            }
            at = next;
        }
        Plan { placed, pos, shared }
    }

    /// The buffer of the file pages `[from, to)` (page aligned, inside the
    /// write): pages of batches as they lie where the plan has them,
    /// copies elsewhere.
    fn buffer(
        &self,
        file: &DmaFile,
        threads: &Option<ThreadedFile>,
        recent: &RefCell<RecentWrites>,
        from: u64,
        to: u64,
    ) -> DirectBuf {
        if threads.is_none() {
            return DirectBuf::filled(file, threads, (to - from) as usize, |out| {
                self.fill(recent, from, out)
            });
        }
        let pieces = self.pieces(from, to);
        // Every copied run of this write in one buffer of its own, as a
        // write of copies only had (so a write takes at most one of the
        // shard's kept buffers however its batches alternate).
        let copied: usize = pieces
            .iter()
            .map(|p| match p {
                Piece::Copied { from, to } => (to - from) as usize,
                Piece::Shared { .. } => 0,
            })
            .sum();
        let staging = (copied > 0).then(|| {
            let mut buf = PageBuf::for_write(copied);
            let mut at = 0;
            for p in &pieces {
                if let Piece::Copied { from, to } = p {
                    let n = (to - from) as usize;
                    self.fill(recent, *from, &mut buf[at..at + n]);
                    at += n;
                }
            }
            Arc::new(buf)
        });
        let mut at = 0;
        let bufs = pieces
            .into_iter()
            .map(|piece| match piece {
                Piece::Shared { pages, range } => WriteBuf::shared(pages, range),
                Piece::Copied { from, to } => {
                    let n = (to - from) as usize;
                    let staged = staging.as_ref().expect("copied runs have a buffer");
                    at += n;
                    WriteBuf::shared(staged, at - n..at)
                }
            })
            .collect();
        DirectBuf::Thread(WriteBuf::joined(bufs))
    }

    /// The file pages `[from, to)` (page aligned) in pieces, in order:
    /// pages of a batch's own memory, and runs of pages to copy.
    fn pieces(&self, from: u64, to: u64) -> Vec<Piece<'a>> {
        let mut pieces = Vec::new();
        let mut at = from;
        while at < to {
            let next = self.shared.iter().find(|s| s.to > at);
            match next {
                Some(s) if s.from <= at => {
                    let upto = s.to.min(to);
                    let Placed::Pages(pages) = &self.placed[s.part] else {
                        unreachable!("shared pages are a paged batch's");
                    };
                    pieces.push(Piece::Shared {
                        pages: &pages.pages,
                        range: (at - s.base) as usize..(upto - s.base) as usize,
                    });
                    at = upto;
                }
                _ => {
                    let upto = next.map_or(to, |s| s.from.min(to));
                    pieces.push(Piece::Copied { from: at, to: upto });
                    at = upto;
                }
            }
        }
        pieces
    }

    /// Fills `out` with the file's bytes from `from` (page aligned) on:
    /// bytes of earlier writes before `pos` (held in `recent`), then this
    /// write's, then zeros after its end.
    fn fill(&self, recent: &RefCell<RecentWrites>, from: u64, out: &mut [u8]) {
        file_bytes(recent, self.placed, self.pos, from, out);
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
        segment::check_written(path, wrote, total, floor)?;
        at += n as u64;
    }
    Ok(started_sync)
}

/// Copies `out.len()` bytes of the concatenation of `parts`, from byte
/// `from` on, into `out`.
fn copy_out(parts: &[impl AsRef<[u8]>], mut from: usize, out: &mut [u8]) {
    let mut filled = 0;
    for part in parts {
        let part = part.as_ref();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReceivingBatch;

    const PAGE: usize = PAGE_BYTES as usize;

    /// How a part of a test write arrives.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Kind {
        /// In its own pages, at the in-page offset where it lands.
        Right,
        /// In its own pages, somewhere else in the page.
        Wrong,
        /// In an ordinary buffer.
        Heap,
    }

    fn bytes(seed: usize, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + seed * 13 + i / 4096) as u8).collect()
    }

    /// The file bytes the plan's pieces give for pages `[from, to)`.
    fn image(plan: &Plan<'_>, recent: &RefCell<RecentWrites>, from: u64, to: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in plan.pieces(from, to) {
            match piece {
                Piece::Shared { pages, range } => out.extend_from_slice(&pages[range]),
                Piece::Copied { from, to } => {
                    let mut page = vec![0xAA; (to - from) as usize];
                    plan.fill(recent, from, &mut page);
                    out.extend_from_slice(&page);
                }
            }
        }
        out
    }

    #[test]
    fn batches_in_their_own_pages_are_written_from_there_as_a_copy_would_be() {
        let cases: &[&[(Kind, usize)]] = &[
            &[(Kind::Right, 70_000)],
            &[
                (Kind::Right, 70_000),
                (Kind::Right, 65_536),
                (Kind::Right, 81_920),
            ],
            &[(Kind::Right, 8 * PAGE), (Kind::Right, 70_001)],
            &[(Kind::Right, 70_000), (Kind::Heap, 300), (Kind::Right, 66_000)],
            &[(Kind::Heap, 5000), (Kind::Right, 66_000), (Kind::Heap, 10)],
            &[
                (Kind::Right, 70_000),
                (Kind::Wrong, 66_000),
                (Kind::Right, 66_000),
            ],
            &[(Kind::Heap, 100), (Kind::Heap, 200)],
            // Shorter than a page, within one and across a boundary.
            &[(Kind::Right, 300), (Kind::Right, 3000), (Kind::Right, 70_000)],
            &[(Kind::Right, 3000)],
        ];
        for pos in [0u64, 1000, 4000, 4095, 3 * PAGE as u64 + 17] {
            for &parts in cases {
                check_plan(pos, parts);
            }
        }
    }

    /// A write of `parts` at `pos`: the plan's pages equal a copy of the
    /// bytes, whole and cut anywhere; batches in their own pages at the
    /// right offset are written from there, nothing copied when all are.
    fn check_plan(pos: u64, parts: &[(Kind, usize)]) {
        let what = format!("at {pos}: {parts:?}");
        let floor = page_floor(pos);
        let earlier = bytes(99, (pos - floor) as usize);
        let recent = RefCell::new(RecentWrites::new(floor, 1 << 20));
        if !earlier.is_empty() {
            recent
                .borrow_mut()
                .push(floor, bytes::Bytes::from(earlier.clone()));
        }
        let mut expected = earlier.clone();
        let mut bufs = Vec::new();
        let mut at = pos;
        for (i, &(kind, len)) in parts.iter().enumerate() {
            let b = bytes(i, len);
            expected.extend_from_slice(&b);
            let in_page = (at % PAGE_BYTES) as usize;
            bufs.push(match kind {
                Kind::Heap => BatchBuf::from(b),
                Kind::Right | Kind::Wrong => {
                    let shift = if kind == Kind::Wrong { 8 } else { 0 };
                    let mut r = ReceivingBatch::new(in_page + shift, len);
                    r.extend_from_slice(&b);
                    r.finish()
                }
            });
            at += len as u64;
        }
        let end = at;
        expected.resize((end.next_multiple_of(PAGE_BYTES) - floor) as usize, 0);

        let placed = place(bufs, pos, &recent, true);
        let kinds: Vec<bool> = placed.iter().map(|p| matches!(p, Placed::Pages(_))).collect();
        let want: Vec<bool> = parts.iter().map(|(k, _)| *k == Kind::Right).collect();
        assert_eq!(kinds, want, "written as they lie: {what}");
        let plan = Plan::new(&placed, pos);
        let to = end.next_multiple_of(PAGE_BYTES);
        assert_eq!(image(&plan, &recent, floor, to), expected, "whole: {what}");
        // Any run of pages, as a write cut in pieces takes them.
        for cut in [PAGE as u64, 5 * PAGE as u64, 17 * PAGE as u64] {
            let cut = (floor + cut).min(to);
            let (a, b) = ((cut - floor) as usize, expected.len());
            assert_eq!(
                image(&plan, &recent, floor, cut),
                expected[..a],
                "head to {cut}: {what}"
            );
            assert_eq!(
                image(&plan, &recent, cut, to),
                expected[a..b],
                "tail from {cut}: {what}"
            );
        }
        // Copied pages: only where no batch of its own covers them.
        let copied: u64 = plan
            .pieces(floor, to)
            .iter()
            .map(|p| match p {
                Piece::Copied { from, to } => to - from,
                Piece::Shared { .. } => 0,
            })
            .sum();
        if want.iter().all(|&w| w) {
            assert_eq!(copied, 0, "nothing copied: {what}");
        }
        if !want.iter().any(|&w| w) {
            assert_eq!(copied, to - floor, "all copied: {what}");
        }
        // The recent bytes are the batches, wherever they lie.
        let mut got = Vec::new();
        for p in placed {
            got.extend_from_slice(&p.into_bytes());
        }
        assert_eq!(got, expected[earlier.len()..(end - floor) as usize], "{what}");
    }

    proptest::proptest! {
        #[test]
        fn any_mix_of_batches_is_planned_as_a_copy_would_be(
            pos in 0u64..3 * PAGE_BYTES,
            parts in proptest::collection::vec((0..3u8, 1usize..20_000), 1..6),
        ) {
            let parts: Vec<(Kind, usize)> = parts
                .into_iter()
                .map(|(k, len)| ([Kind::Right, Kind::Wrong, Kind::Heap][k as usize], len))
                .collect();
            check_plan(pos, &parts);
        }
    }

    #[test]
    fn a_paged_batch_through_io_uring_is_copied() {
        let recent = RefCell::new(RecentWrites::new(0, 1 << 20));
        let mut r = ReceivingBatch::new(0, 70_000);
        r.extend_from_slice(&bytes(1, 70_000));
        let placed = place(vec![r.finish()], 0, &recent, false);
        assert!(matches!(placed[..], [Placed::Buf(_)]));
        assert!(Plan::new(&placed, 0).shared.is_empty());
    }
}
