//! `DiskThreads`: a shard's own threads for the segment writer's direct
//! writes and fdatasyncs.
//!
//! Through io_uring, a direct write that grows the file and every
//! fdatasync are handed to the kernel's io-wq workers, which run them on
//! the shard's core and wake the shard at the end: slower and far less
//! steady than the same calls made blocking from a thread of their own
//! (`storage/examples/write_probe.rs`; docs/storage.md "Disk threads", the
//! measurements in docs/design/disk-threads.md). So a shard may start a
//! few threads that make exactly those calls: the shard queues a job (a page-aligned
//! buffer and a position, or a sync) without blocking, a thread makes the
//! blocking call, and the job's answer wakes the shard's waiting task.
//! A write may ask for a sync right after it ([`DiskThreads::write_then_sync`]):
//! the thread that wrote syncs at once, with no round trip through the
//! shard, and the shard hands that sync to the fsync batcher as the
//! partition's sync in flight. Nothing else changes: the write loop still
//! writes one run at a time, the fsync batcher still has one sync in
//! flight per partition, and an error still poisons the partition.
//!
//! Per shard, so the handle lives in a thread local set when the shard
//! starts ([`start_disk_threads`]); without it (0 threads, tools, most
//! tests) the writer uses glommio's `DmaFile` through io_uring. A shard
//! starts one thread at once and another whenever a job finds none idle,
//! up to its count: an idle shard holds one thread, a busy one as many as
//! its partitions keep busy. The threads end when the shard's thread does
//! (the queue's last sender drops).

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::fs::File; // blocking-ok: its calls run on the disk threads, never on a shard
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::channel::oneshot;

use crate::recent::PAGE_BYTES;

/// Default most disk threads per shard: at most this many writes and
/// fsyncs of a shard run at once (more wait their turn, in order). A busy
/// partition has one write and one fsync in flight, so 16 serve 8 busy
/// partitions per shard without waiting (the counts measured:
/// docs/design/disk-threads.md). Threads start as jobs need them.
pub const DISK_THREADS_DEFAULT: usize = 16;

/// Most disk threads a shard may start: beyond this the disk, not the
/// threads, is the limit (and each thread holds a stack).
pub const DISK_THREADS_MAX: usize = 64;

/// Capacity of the page buffers a shard keeps for reuse: the largest
/// direct write (`DIRECT_WRITE_BYTES_MAX`). A write of
/// `POOLED_MIN_BYTES` up to this many bytes takes a kept buffer when there
/// is one: a fresh allocation of a megabyte costs more than its copy (page
/// faults and zeroing, and the allocator hands large blocks back to the
/// kernel when freed). Smaller writes get a buffer of their own size.
const POOLED_BUF_BYTES: usize = crate::writer::DIRECT_WRITE_BYTES_MAX;

/// Smallest write that takes a kept buffer (below it an allocation is
/// cheap, and a 2 MiB buffer would be mostly idle memory).
const POOLED_MIN_BYTES: usize = 64 << 10;

/// Most page buffers a shard keeps for reuse (16 MiB): eight large writes
/// in flight at once never allocate.
const POOLED_BUFS_MAX: usize = 8;

thread_local! {
    static LOCAL: RefCell<Option<DiskThreads>> = const { RefCell::new(None) };
    /// This shard's page buffers kept for reuse, each `POOLED_BUF_BYTES`.
    static POOL: RefCell<Vec<PageBuf>> = const { RefCell::new(Vec::new()) };
}

/// Default time slice a disk thread asks the scheduler for
/// (`thread_slice.rs`): a disk thread runs for microseconds each time it
/// is woken (it makes a blocking write or fdatasync and sleeps in it), and
/// with the kernel's default slice (1.4 ms on two cores) it waited for a
/// spinning shard's slice to end before it could start a job
/// (`es_disk_thread_wait_seconds`; measured in docs/design/disk-threads.md).
pub const DISK_THREAD_SLICE_US_DEFAULT: u64 = 100;

/// Gives this shard (the calling thread) up to `count` disk threads, named
/// `{name}-{i}`, the first started at once, the others as jobs need them;
/// 0 leaves the writes on io_uring. Each asks the scheduler for a
/// `slice_us` time slice (`thread_slice.rs`; 0 keeps the kernel's). Call
/// once, on the shard, before opening partitions.
pub fn start_disk_threads(count: usize, name: &str, slice_us: u64) -> io::Result<()> {
    if count > DISK_THREADS_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("disk threads must be at most {DISK_THREADS_MAX}, got {count}"),
        ));
    }
    let threads = if count == 0 {
        None
    } else {
        Some(DiskThreads::start(count, name, slice_us)?)
    };
    LOCAL.with(|l| *l.borrow_mut() = threads);
    Ok(())
}

/// This shard's disk threads, if it started any.
pub(crate) fn local() -> Option<DiskThreads> {
    LOCAL.with(|l| l.borrow().clone())
}

/// A handle to a shard's disk threads; cheap to clone. Lives on the
/// shard.
#[derive(Clone)]
pub(crate) struct DiskThreads {
    pool: Rc<Pool>,
}

struct Pool {
    jobs: mpsc::Sender<(Job, Instant)>,
    queue: Arc<Mutex<mpsc::Receiver<(Job, Instant)>>>,
    /// Jobs queued or running: the shard adds one as it queues a job, the
    /// thread takes it off when done, just before the job's last answer
    /// (so a shard that waits for each answer never sees its own last job).
    in_flight: Arc<AtomicUsize>,
    started: Cell<usize>,
    max: usize,
    name: String,
    /// The time slice each thread asks for; 0: the kernel's.
    slice_us: u64,
    waited: metrics::Histogram,
}

enum Job {
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
pub(crate) struct SyncAfter(oneshot::Receiver<io::Result<()>>);

impl SyncAfter {
    /// The sync's result, once it has ended.
    pub async fn ended(self) -> io::Result<()> {
        self.0.await.unwrap_or_else(|_| Err(gone()))
    }
}

/// A file the shard's disk threads write and sync: a duplicate of a
/// segment writer's descriptor, and the threads. Lives on the shard.
pub(crate) struct ThreadedFile {
    threads: DiskThreads,
    file: Arc<File>,
}

impl ThreadedFile {
    /// `fd`, duplicated for this shard's disk threads; `None` when the
    /// shard has none (its writes stay on io_uring).
    pub fn dup_of(fd: BorrowedFd<'_>) -> io::Result<Option<ThreadedFile>> {
        let Some(threads) = local() else {
            return Ok(None);
        };
        let file = Arc::new(File::from(fd.try_clone_to_owned()?));
        Ok(Some(ThreadedFile { threads, file }))
    }

    /// [`DiskThreads::write_at`] of this file.
    pub async fn write_at(&self, buf: WriteBuf, pos: u64) -> io::Result<usize> {
        self.threads.write_at(&self.file, buf, pos).await
    }

    /// [`DiskThreads::write_then_sync`] of this file.
    pub async fn write_then_sync(&self, buf: WriteBuf, pos: u64) -> (io::Result<usize>, SyncAfter) {
        self.threads.write_then_sync(&self.file, buf, pos).await
    }

    /// [`DiskThreads::fdatasync`] of this file.
    pub async fn fdatasync(&self) -> io::Result<()> {
        self.threads.fdatasync(&self.file).await
    }
}

impl DiskThreads {
    fn start(max: usize, name: &str, slice_us: u64) -> io::Result<DiskThreads> {
        let (jobs, queue) = mpsc::channel::<(Job, Instant)>();
        let threads = DiskThreads {
            pool: Rc::new(Pool {
                jobs,
                queue: Arc::new(Mutex::new(queue)),
                in_flight: Arc::new(AtomicUsize::new(0)),
                started: Cell::new(0),
                max,
                name: name.to_string(),
                slice_us,
                // One series for all shards: which shard waits matters
                // less than whether any does.
                waited: metrics::histogram!("es_disk_thread_wait_seconds"),
            }),
        };
        threads.start_one()?;
        Ok(threads)
    }

    /// Starts one more thread.
    fn start_one(&self) -> io::Result<()> {
        let pool = &self.pool;
        let (queue, in_flight, waited) = (pool.queue.clone(), pool.in_flight.clone(), pool.waited.clone());
        let slice_us = pool.slice_us;
        std::thread::Builder::new()
            .name(format!("{}-{}", pool.name, pool.started.get()))
            .spawn(move || {
                if slice_us > 0 {
                    ask_slice(slice_us);
                }
                run(&queue, &in_flight, &waited)
            })?;
        pool.started.set(pool.started.get() + 1);
        Ok(())
    }

    /// Threads started so far.
    #[cfg(test)]
    fn started(&self) -> usize {
        self.pool.started.get()
    }

    /// Writes all of `buf` at `pos` of `file` (opened with `O_DIRECT`: the
    /// buffer and position are page aligned); returns the bytes written.
    pub async fn write_at(&self, file: &Arc<File>, buf: WriteBuf, pos: u64) -> io::Result<usize> {
        let (done, answer) = oneshot::channel();
        self.submit(Job::Write {
            file: file.clone(),
            buf,
            pos,
            done,
        })?;
        match answer.await {
            Ok((wrote, buf)) => {
                buf.recycle();
                wrote
            }
            Err(_) => Err(gone()),
        }
    }

    /// Like [`write_at`](DiskThreads::write_at), then fdatasyncs `file` on
    /// the same thread right after the write: the sync starts without
    /// waiting for the shard to hear of the write. The returned future is
    /// the sync's end; after a failed write no sync runs and it resolves
    /// to an error.
    pub async fn write_then_sync(
        &self,
        file: &Arc<File>,
        buf: WriteBuf,
        pos: u64,
    ) -> (io::Result<usize>, SyncAfter) {
        let (done, answer) = oneshot::channel();
        let (synced, sync_answer) = oneshot::channel();
        let sync_answer = SyncAfter(sync_answer);
        if let Err(e) = self.submit(Job::WriteSync {
            file: file.clone(),
            buf,
            pos,
            done,
            synced,
        }) {
            return (Err(e), sync_answer);
        }
        let wrote = match answer.await {
            Ok((wrote, buf)) => {
                buf.recycle();
                wrote
            }
            Err(_) => Err(gone()),
        };
        (wrote, sync_answer)
    }

    /// fdatasyncs `file`.
    pub async fn fdatasync(&self, file: &Arc<File>) -> io::Result<()> {
        let (done, answer) = oneshot::channel();
        self.submit(Job::Sync {
            file: file.clone(),
            done,
        })?;
        answer.await.unwrap_or_else(|_| Err(gone()))
    }

    /// Queues `job`, starting another thread if there are more jobs than
    /// threads and the shard may have more (if starting one fails, the job
    /// waits for a busy one).
    fn submit(&self, job: Job) -> io::Result<()> {
        let pool = &self.pool;
        // Counted before it is queued: a thread may take it and finish it
        // (taking it off the count) before `send` returns.
        let jobs = pool.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        if pool.jobs.send((job, Instant::now())).is_err() {
            pool.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(gone());
        }
        if jobs > pool.started.get() && pool.started.get() < pool.max {
            if let Err(e) = self.start_one() {
                tracing::warn!(error = %e, "starting another disk thread failed; jobs wait for the running ones");
            }
        }
        Ok(())
    }
}

/// Asks for the calling disk thread's slice; a refusal is logged once per
/// process (the thread runs on with the kernel's slice).
fn ask_slice(us: u64) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Err(e) = crate::thread_slice::ask_thread_slice_us(us) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(slice_us = us, error = %e, "a disk thread's time slice was not set: disk threads keep the scheduler's default");
        }
    }
}

fn gone() -> io::Error {
    io::Error::other("the shard's disk threads have stopped")
}

/// A disk thread: takes jobs until the shard drops the queue, recording
/// in `waited` how long each waited for a thread
/// (`es_disk_thread_wait_seconds`: long waits say `--disk-threads` is too
/// few for the shard's busy partitions).
fn run(queue: &Mutex<mpsc::Receiver<(Job, Instant)>>, in_flight: &AtomicUsize, waited: &metrics::Histogram) {
    // Off the count before the job's last answer (see `Pool::in_flight`).
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

/// Most buffers one `pwritev` takes (Linux's `UIO_MAXIOV`); a write of
/// more goes on in further calls.
const IOV_MAX: usize = 1024;

/// A page-aligned buffer of whole pages that may cross to a disk thread
/// (a direct write needs aligned memory). Its bytes are `len` of an
/// allocation of `layout.size()`.
pub(crate) struct PageBuf {
    ptr: NonNull<u8>,
    layout: Layout,
    len: usize,
}

// SAFETY: `PageBuf` owns its allocation outright (like a `Vec<u8>`); the
// pointer is never shared.
unsafe impl Send for PageBuf {}
// SAFETY: a shared `&PageBuf` only reads (like a `&Vec<u8>`).
unsafe impl Sync for PageBuf {}

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
    fn recycle(self) {
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

impl PageBuf {
    /// `len` bytes (a positive multiple of a page), all zero.
    pub fn zeroed(len: usize) -> PageBuf {
        PageBuf::with_capacity(len, len)
    }

    /// `len` bytes (a positive multiple of a page) for a write that sets
    /// every one of them: a buffer this shard kept for reuse (holding the
    /// bytes of an earlier write) when `len` is one it pools, else a
    /// zeroed one.
    pub fn for_write(len: usize) -> PageBuf {
        if (POOLED_MIN_BYTES..=POOLED_BUF_BYTES).contains(&len) {
            if let Some(mut buf) = POOL.with(|p| p.borrow_mut().pop()) {
                buf.len = len;
                return buf;
            }
            return PageBuf::with_capacity(len, POOLED_BUF_BYTES);
        }
        PageBuf::zeroed(len)
    }

    fn with_capacity(len: usize, capacity: usize) -> PageBuf {
        let layout = PageBuf::layout(len, capacity);
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        PageBuf { ptr, layout, len }
    }

    /// `len` bytes (a positive multiple of a page) as the allocator left
    /// them: for memory that is about to be filled anyway (zeroing a
    /// megabyte first costs as much as copying it).
    ///
    /// # Safety
    /// Every byte must be written through [`as_mut_ptr`](PageBuf::as_mut_ptr)
    /// before the buffer is read or borrowed as a slice (`Deref`,
    /// `DerefMut`), which assume initialized bytes.
    pub unsafe fn uninit(len: usize) -> PageBuf {
        let layout = PageBuf::layout(len, len);
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        PageBuf { ptr, layout, len }
    }

    fn layout(len: usize, capacity: usize) -> Layout {
        assert!(
            len > 0 && (len as u64).is_multiple_of(PAGE_BYTES) && len <= capacity,
            "a page buffer is whole pages"
        );
        Layout::from_size_align(capacity, PAGE_BYTES as usize).expect("a valid page layout")
    }

    /// The first byte, for writes into memory not initialized yet
    /// ([`uninit`](PageBuf::uninit)).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The first byte, for reads of the initialized part of memory that
    /// is not all initialized yet ([`uninit`](PageBuf::uninit)).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Keeps the buffer for this shard's next write, if it is of the
    /// pooled size and the pool has room; else frees it.
    fn recycle(self) {
        if self.layout.size() == POOLED_BUF_BYTES {
            POOL.with(|p| {
                let mut pool = p.borrow_mut();
                if pool.len() < POOLED_BUFS_MAX {
                    pool.push(self);
                }
            });
        }
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the allocation holds `layout.size() >= len` initialized
        // bytes (zeroed at birth, or written before this per `uninit`'s
        // contract) and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `with_capacity` or `uninit` with this very
        // layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_buffers_are_aligned_and_zeroed() {
        for pages in [1usize, 3, 256] {
            let mut buf = PageBuf::zeroed(pages * PAGE_BYTES as usize);
            assert_eq!(buf.as_ptr() as usize % PAGE_BYTES as usize, 0);
            assert!(buf.iter().all(|&b| b == 0));
            buf[0] = 1;
            let last = buf.len() - 1;
            buf[last] = 2;
            assert_eq!((buf[0], buf[last]), (1, 2));
        }
    }

    #[test]
    fn threads_start_as_jobs_need_them_up_to_the_count() {
        let dir = std::env::temp_dir().join(format!("es-disk-threads-lazy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap(); // blocking-ok: test setup
        let file = Arc::new(File::create(dir.join("f")).unwrap()); // blocking-ok: test setup
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                start_disk_threads(3, "es-disk-test", DISK_THREAD_SLICE_US_DEFAULT).unwrap();
                let threads = local().expect("started");
                assert_eq!(threads.started(), 1, "one thread at once");
                // One job at a time: the one thread is idle each time.
                for _ in 0..20 {
                    threads.fdatasync(&file).await.unwrap();
                }
                assert_eq!(threads.started(), 1, "no job found the thread busy");
                // Many at once (queued together, each a write and an
                // fdatasync of real bytes, far slower than queueing them):
                // more threads, never more than the count.
                let jobs: Vec<_> = (0..8u64)
                    .map(|i| {
                        threads.write_then_sync(&file, WriteBuf::Own(PageBuf::zeroed(256 << 10)), i << 18)
                    })
                    .collect();
                for (wrote, synced) in futures::future::join_all(jobs).await {
                    wrote.unwrap();
                    synced.ended().await.unwrap();
                }
                assert_eq!(threads.started(), 3);
            })
            .unwrap()
            .join()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir); // blocking-ok: test cleanup
    }

    #[test]
    fn a_write_then_sync_answers_twice() {
        let dir = std::env::temp_dir().join(format!("es-disk-threads-ws-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap(); // blocking-ok: test setup
        let path = dir.join("f");
        let file = Arc::new(File::create(&path).unwrap()); // blocking-ok: test setup
        let read_only = Arc::new(File::open(&path).unwrap()); // blocking-ok: test setup
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                start_disk_threads(1, "es-disk-test", 0).unwrap();
                let threads = local().expect("started");
                let mut buf = PageBuf::zeroed(PAGE_BYTES as usize);
                buf[..3].copy_from_slice(b"abc");
                let (wrote, synced) = threads.write_then_sync(&file, WriteBuf::Own(buf), 0).await;
                assert_eq!(wrote.unwrap(), PAGE_BYTES as usize);
                synced.ended().await.expect("synced");
                // A failed write: no sync, and the sync's answer says so.
                let buf = PageBuf::zeroed(PAGE_BYTES as usize);
                let (wrote, synced) = threads.write_then_sync(&read_only, WriteBuf::Own(buf), 0).await;
                assert!(wrote.is_err());
                let e = synced.ended().await.unwrap_err();
                assert!(e.to_string().contains("the write before this sync failed"), "{e}");
            })
            .unwrap()
            .join()
            .unwrap();
        let bytes = std::fs::read(&path).unwrap(); // blocking-ok: test check
        assert_eq!(&bytes[..3], b"abc");
        let _ = std::fs::remove_dir_all(&dir); // blocking-ok: test cleanup
    }

    #[test]
    fn write_buffers_are_reused_up_to_the_pool_size() {
        let page = PAGE_BYTES as usize;
        let mut first = PageBuf::for_write(POOLED_BUF_BYTES);
        assert_eq!(first.len(), POOLED_BUF_BYTES);
        first[0] = 9;
        let at = first.as_ptr() as usize;
        first.recycle();
        // The same allocation, now of another length, with the old bytes.
        let second = PageBuf::for_write(POOLED_MIN_BYTES);
        assert_eq!(
            (second.as_ptr() as usize, second.len(), second[0]),
            (at, POOLED_MIN_BYTES, 9)
        );
        // Larger than a pooled buffer, or smaller than the pooled minimum:
        // a zeroed one of its own size, not kept.
        for len in [POOLED_BUF_BYTES + page, POOLED_MIN_BYTES - page] {
            let own = PageBuf::for_write(len);
            assert_eq!(own.len(), len);
            assert!(own.iter().all(|&b| b == 0));
            own.recycle();
            assert_eq!(POOL.with(|p| p.borrow().len()), 0);
        }
        // The pool keeps at most `POOLED_BUFS_MAX`.
        second.recycle();
        let bufs: Vec<_> = (0..POOLED_BUFS_MAX + 3)
            .map(|_| PageBuf::for_write(POOLED_MIN_BYTES))
            .collect();
        bufs.into_iter().for_each(PageBuf::recycle);
        assert_eq!(POOL.with(|p| p.borrow().len()), POOLED_BUFS_MAX);
    }

    #[test]
    #[should_panic(expected = "whole pages")]
    fn a_page_buffer_is_whole_pages() {
        let _ = PageBuf::zeroed(100);
    }

    #[test]
    fn too_many_threads_are_refused() {
        let err = start_disk_threads(DISK_THREADS_MAX + 1, "t", 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(local().is_none());
    }

    #[test]
    fn threads_write_and_sync_in_the_background() {
        let dir = std::env::temp_dir().join(format!("es-disk-threads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap(); // blocking-ok: test setup
        let path = dir.join("f");
        let file = Arc::new(File::create(&path).unwrap()); // blocking-ok: test setup
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                start_disk_threads(2, "es-disk-test", DISK_THREAD_SLICE_US_DEFAULT).unwrap();
                let threads = local().expect("started");
                let mut buf = PageBuf::zeroed(2 * PAGE_BYTES as usize);
                buf[..5].copy_from_slice(b"hello");
                assert_eq!(
                    threads
                        .write_at(&file, WriteBuf::Own(buf), PAGE_BYTES)
                        .await
                        .unwrap(),
                    8192
                );
                threads.fdatasync(&file).await.unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
        let bytes = std::fs::read(&path).unwrap(); // blocking-ok: test check
        assert_eq!(bytes.len(), 3 * PAGE_BYTES as usize);
        assert_eq!(&bytes[PAGE_BYTES as usize..PAGE_BYTES as usize + 5], b"hello");
        let _ = std::fs::remove_dir_all(&dir); // blocking-ok: test cleanup
    }

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
            assert_eq!(POOL.with(|p| p.borrow().len()), 1);
            assert_eq!(PageBuf::for_write(POOLED_MIN_BYTES).as_ptr() as usize, at);
            assert_eq!(Arc::strong_count(&other), 1, "the write let its share go");
        })
        .join()
        .unwrap();
    }
}
