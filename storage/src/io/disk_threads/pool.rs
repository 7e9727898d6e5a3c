//! The pool of a shard's disk threads: started with the shard, grown as
//! jobs need threads, up to its count; the handle the segment writer
//! queues jobs through (`DiskThreads`, `ThreadedFile`).

use std::cell::{Cell, RefCell};
use std::fs::File; // blocking-ok: its calls run on the disk threads, never on a shard
use std::io;
use std::os::fd::BorrowedFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex}; // blocking-ok: the queue lock is taken by disk threads only, never a shard
use std::time::Instant;

use futures::channel::oneshot;

use super::jobs::{gone, run, Job, SyncAfter, WriteBuf};
use crate::limits::DISK_THREADS_MAX;

thread_local! {
    static LOCAL: RefCell<Option<DiskThreads>> = const { RefCell::new(None) };
}

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
    pool: Rc<ThreadPool>,
}

struct ThreadPool {
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
            pool: Rc::new(ThreadPool {
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
    if let Err(e) = crate::io::thread_slice::ask_thread_slice_us(us) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(slice_us = us, error = %e, "a disk thread's time slice was not set: disk threads keep the scheduler's default");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::page_buf::PageBuf;
    use crate::io::page_buf::PAGE_BYTES;
    use crate::limits::DISK_THREAD_SLICE_US_DEFAULT;

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
}
