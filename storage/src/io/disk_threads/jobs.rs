//! What a shard's disk threads run: the jobs the shard queues (a write, a
//! sync, or a write then a sync), the thread's loop, and the buffers a
//! write takes (`WriteBuf`). The threads run blocking calls; never a shard.

use std::fs::File; // blocking-ok: its calls run on the disk threads, never on a shard
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex}; // blocking-ok: the queue lock is taken by disk threads only, never a shard
use std::time::Instant;

use futures::channel::oneshot;

use crate::io::page_buf::PageBuf;
use crate::io::page_buf::PAGE_BYTES;
use crate::limits::IOV_MAX;

pub(super) enum Job {
    Write {
        file: Arc<File>,
        buf: WriteBuf,
        pos: u64,
        /// The result, and the buffer back for reuse.
        done: oneshot::Sender<(io::Result<usize>, WriteBuf)>,
    },
    Sync {
        file: Arc<File>,
        done: oneshot::Sender<io::Result<()>>,
    },
    /// A write, then at once (no hop through the shard) an fdatasync of
    /// the file: two answers.
    WriteSync {
        file: Arc<File>,
        buf: WriteBuf,
        pos: u64,
        done: oneshot::Sender<(io::Result<usize>, WriteBuf)>,
        synced: oneshot::Sender<io::Result<()>>,
    },
}

/// The fdatasync a [`DiskThreads::write_then_sync`] started after its
/// write. Dropping it does not stop the sync.
pub(crate) struct SyncAfter(pub(super) oneshot::Receiver<io::Result<()>>);

impl SyncAfter {
    /// The sync's result, once it has ended.
    pub async fn ended(self) -> io::Result<()> {
        self.0.await.unwrap_or_else(|_| Err(gone()))
    }
}

pub(super) fn gone() -> io::Error {
    io::Error::other("the shard's disk threads have stopped")
}

/// A disk thread: takes jobs until the shard drops the queue, recording
/// in `waited` how long each waited for a thread
/// (`es_disk_thread_wait_seconds`: long waits say `--disk-threads` is too
/// few for the shard's busy partitions).
pub(super) fn run(
    queue: &Mutex<mpsc::Receiver<(Job, Instant)>>,
    in_flight: &AtomicUsize,
    waited: &metrics::Histogram,
) {
    // Off the count before the job's last answer (see `ThreadPool::in_flight`).
    let finished = || in_flight.fetch_sub(1, Ordering::AcqRel);
    loop {
        // Blocking here is the point: this is not a shard's thread.
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let job = job.map(|(job, queued)| {
            waited.record(queued.elapsed().as_secs_f64());
            job
        });
        match job {
            Ok(Job::Write { file, buf, pos, done }) => {
                let wrote = write_all_at(&file, &buf.slices(), pos);
                finished();
                let _ = done.send((wrote, buf));
            }
            Ok(Job::Sync { file, done }) => {
                let synced = file.sync_data();
                finished();
                let _ = done.send(synced);
            }
            Ok(Job::WriteSync {
                file,
                buf,
                pos,
                done,
                synced,
            }) => {
                let wrote = write_all_at(&file, &buf.slices(), pos);
                let ok = wrote.is_ok();
                let _ = done.send((wrote, buf));
                let result = if ok {
                    file.sync_data()
                } else {
                    Err(io::Error::other("the write before this sync failed"))
                };
                finished();
                let _ = synced.send(result);
            }
            Err(_) => return,
        }
    }
}

/// Writes all of `bufs`, one after another, at `pos`: one `pwrite` for
/// one buffer, one `pwritev` for several; a short write continues where
/// it stopped (whole pages: a direct write stops on a page boundary); 0
/// bytes written is an error. Returns the bytes written.
fn write_all_at(file: &File, bufs: &[&[u8]], pos: u64) -> io::Result<usize> {
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let mut at = 0;
    while at < total {
        let n = match write_some_at(file, bufs, at, pos + at as u64) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the disk took no bytes")),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        at += n;
    }
    Ok(at)
}

/// One write of the bytes of `bufs` from byte `skip` of their
/// concatenation on, at `pos`: how many it took.
fn write_some_at(file: &File, bufs: &[&[u8]], mut skip: usize, pos: u64) -> io::Result<usize> {
    if let [one] = bufs {
        return file.write_at(&one[skip..], pos);
    }
    let mut iov = Vec::with_capacity(bufs.len());
    for b in bufs {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        iov.push(libc::iovec {
            iov_base: b[skip..].as_ptr() as *mut libc::c_void,
            iov_len: b.len() - skip,
        });
        skip = 0;
    }
    let count = iov.len().min(IOV_MAX);
    let offset = libc::off_t::try_from(pos).map_err(|_| io::Error::other("write position past off_t"))?;
    // SAFETY: `iov[..count]` describe readable slices of `bufs`, alive for
    // this call; pwritev only reads them.
    let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), count as libc::c_int, offset) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// What a disk thread writes: a page buffer of the write's own, or whole
/// pages of a shared one that the write only reads (a batch received
/// straight into page-aligned memory: `batch_buf.rs`).
pub(crate) enum WriteBuf {
    Own(PageBuf),
    Shared(Arc<PageBuf>, Range<usize>),
    /// Several of the above, written one after another at the write's
    /// position by one `pwritev` (a write of several batches that lie in
    /// memory of their own: `writer.rs`).
    Joined(Vec<WriteBuf>),
}

impl WriteBuf {
    /// Pages `range` of `pages` (page aligned, whole pages).
    pub fn shared(pages: &Arc<PageBuf>, range: Range<usize>) -> WriteBuf {
        let page = PAGE_BYTES as usize;
        assert!(
            range.start.is_multiple_of(page) && range.end.is_multiple_of(page) && range.start < range.end,
            "a shared write is whole pages"
        );
        assert!(range.end <= pages.len(), "a shared write lies inside its buffer");
        WriteBuf::Shared(pages.clone(), range)
    }

    /// Several buffers written one after another (at least one; none of
    /// them joined itself).
    pub fn joined(mut bufs: Vec<WriteBuf>) -> WriteBuf {
        assert!(
            !bufs.iter().any(|b| matches!(b, WriteBuf::Joined(_))),
            "joined buffers are flat"
        );
        match bufs.len() {
            0 => panic!("a write has bytes"),
            1 => bufs.pop().expect("one"),
            _ => WriteBuf::Joined(bufs),
        }
    }

    /// Its bytes, in the order they are written.
    pub fn slices(&self) -> Vec<&[u8]> {
        match self {
            WriteBuf::Own(buf) => vec![buf],
            WriteBuf::Shared(pages, range) => vec![&pages[range.clone()]],
            WriteBuf::Joined(bufs) => bufs.iter().flat_map(WriteBuf::slices).collect(),
        }
    }

    /// How many bytes it writes.
    pub fn len(&self) -> usize {
        match self {
            WriteBuf::Own(buf) => buf.len(),
            WriteBuf::Shared(_, range) => range.len(),
            WriteBuf::Joined(bufs) => bufs.iter().map(WriteBuf::len).sum(),
        }
    }

    /// Keeps its own buffers for this shard's next write (see
    /// [`PageBuf::for_write`]), and a shared one this was the last holder
    /// of (a joined write's copies); other shared ones are let go.
    pub(super) fn recycle(self) {
        match self {
            WriteBuf::Own(buf) => buf.recycle(),
            WriteBuf::Shared(pages, _) => {
                if let Ok(buf) = Arc::try_unwrap(pages) {
                    buf.recycle();
                }
            }
            WriteBuf::Joined(bufs) => bufs.into_iter().for_each(WriteBuf::recycle),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::page_buf::kept_page_bufs;
    use crate::limits::POOLED_MIN_BYTES;

    #[test]
    fn joined_buffers_are_written_in_order_in_one_go_or_several() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new() // blocking-ok: a test, not a shard
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        // Three buffers; then more than one pwritev takes (IOV_MAX), so the
        // write goes on where the first call stopped.
        let three: Vec<Vec<u8>> = vec![vec![1; 10], vec![2; 4096], vec![3; 7]];
        let many: Vec<Vec<u8>> = (0..IOV_MAX + 5).map(|i| vec![i as u8; 3]).collect();
        for (bufs, pos) in [(three, 100u64), (many, 0)] {
            let slices: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
            let want = bufs.concat();
            assert_eq!(write_all_at(&file, &slices, pos).unwrap(), want.len());
            let mut got = vec![0; want.len()];
            file.read_exact_at(&mut got, pos).unwrap();
            assert_eq!(got, want);
        }
        // Skipping into the second buffer, as after a short write.
        let (a, b) = ([5u8; 4], [6u8; 4]);
        assert_eq!(write_some_at(&file, &[&a, &b], 6, 0).unwrap(), 2);
        let mut got = [0; 2];
        file.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(got, [6, 6]);
    }

    #[test]
    fn a_joined_write_buffer_is_its_parts_in_order() {
        let pages = Arc::new(PageBuf::zeroed(3 * PAGE_BYTES as usize));
        let mut own = PageBuf::zeroed(PAGE_BYTES as usize);
        own[0] = 9;
        let page = PAGE_BYTES as usize;
        let joined = WriteBuf::joined(vec![WriteBuf::Own(own), WriteBuf::shared(&pages, page..3 * page)]);
        assert_eq!(joined.len(), 3 * page);
        let slices = joined.slices();
        assert_eq!(slices.len(), 2);
        assert_eq!((slices[0][0], slices[1].len()), (9, 2 * page));
        assert!(matches!(
            WriteBuf::joined(vec![WriteBuf::shared(&pages, 0..page)]),
            WriteBuf::Shared(..)
        ));
    }

    #[test]
    fn a_shared_buffer_is_kept_once_its_last_holder_is_done() {
        // Run on a thread of its own: the pool is per thread.
        std::thread::spawn(|| {
            let page = PAGE_BYTES as usize;
            let staged = Arc::new(PageBuf::for_write(POOLED_MIN_BYTES));
            let at = staged.as_ptr() as usize;
            let other = Arc::new(PageBuf::zeroed(page));
            let joined = WriteBuf::joined(vec![
                WriteBuf::shared(&staged, 0..page),
                WriteBuf::shared(&other, 0..page),
                WriteBuf::shared(&staged, page..2 * page),
            ]);
            drop(staged);
            joined.recycle();
            // The staging buffer is back in the pool; the batch's pages,
            // still held elsewhere, are not.
            assert_eq!(kept_page_bufs(), 1);
            assert_eq!(PageBuf::for_write(POOLED_MIN_BYTES).as_ptr() as usize, at);
            assert_eq!(Arc::strong_count(&other), 1, "the write let its share go");
        })
        .join()
        .unwrap();
    }
}
