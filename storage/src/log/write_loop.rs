//! The write loop: a detached task per partition that writes placed
//! batches in order, one write per contiguous run, creates a rolled
//! segment's file (sealing the one before), and hands the partition to the
//! shard's fsync batcher.

use std::cell::RefCell;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::rc::Rc;

use crate::io::dirs;
use crate::io::files;
use crate::log::faults::NoSpaceAt;
use crate::log::fsync::SyncTarget;
use crate::log::write_failure::WriteFailure;
use crate::write::recent::RecentWrites;
use crate::write::writer::SegmentWriter;
use crate::{Offset, Result, StorageError};

use super::partition::{LogState, Pending};

impl SyncTarget for LogState {
    fn sync(self: Rc<Self>) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let (file, writer, path, upto, upto_index) = {
                let inner = self.inner.borrow();
                if inner.failure.is_some() {
                    return;
                }
                let seg = inner.segments.last_created();
                (
                    seg.file.clone(),
                    seg.writer.clone(),
                    seg.log_path.clone(),
                    self.written.get(),
                    self.written_index.get(),
                )
            };
            // A zero-width control batch moves no offset: a replicated
            // log also syncs for entries written since the last sync.
            if upto <= self.durable.get() && upto_index <= self.durable_index.get() {
                return;
            }
            let file = file.expect("a created active segment is open");
            // Where the writes went through the shard's disk threads, so
            // does their sync (`io/disk_threads/`).
            let synced = match writer.as_ref().and_then(|w| w.disk_threads()) {
                Some(threads) => threads.fdatasync().await,
                None => file.fdatasync().await.map_err(std::io::Error::from),
            };
            self.synced(&path, upto, upto_index, synced);
        })
    }
}

impl LogState {
    /// The end of a sync that started once everything up to offset `upto`
    /// (and Raft index `upto_index`) was written: `durable` reaches `upto`
    /// (`durable_index`, `upto_index`), or the partition is poisoned.
    pub(super) fn synced(&self, path: &Path, upto: u64, upto_index: u64, result: std::io::Result<()>) {
        match result {
            Ok(()) => {
                if upto > self.durable.get() && self.inner.borrow().failure.is_none() {
                    assert!(upto <= self.written.get(), "durable <= written");
                    self.durable.advance(upto);
                }
                if upto_index > self.durable_index.get() && self.inner.borrow().failure.is_none() {
                    assert!(upto_index <= self.written_index.get(), "durable <= written");
                    self.durable_index.advance(upto_index);
                }
            }
            Err(e) => {
                WriteFailure::Fsync.count();
                self.poison(&StorageError::sync(path, e));
            }
        }
    }

    /// Waits for the writes of early writes that ended unplaced.
    pub(super) async fn wait_early_ended(&self) {
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
    pub(super) async fn cut_stale_early(&self, writer: &SegmentWriter, job: &mut Pending) -> Result<()> {
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
        let pages = crate::io::page_buf::page_floor(job.position + crate::io::page_buf::PAGE_BYTES - 1);
        let cut = writer.finish(pages).await;
        self.inner.borrow_mut().early.end_cut(job.segment);
        cut
    }

    /// The writer of segment `base` (the one the write loop writes), opened
    /// on first use: after creating the file of a rolled segment, or on a
    /// segment this process found on disk.
    pub(super) async fn writer_for(
        &self,
        base: Offset,
    ) -> Result<(Rc<SegmentWriter>, Rc<RefCell<RecentWrites>>)> {
        let file = {
            let inner = self.inner.borrow();
            let seg = inner.segments.expect(base);
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
                inner.segments.expect(base).file.clone().expect("just created")
            }
        };
        let (path, written) = {
            let inner = self.inner.borrow();
            let seg = inner.segments.expect(base);
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
        self.inner
            .borrow_mut()
            .segments
            .set_writer(base, written, writer.clone(), recent.clone());
        Ok((writer, recent))
    }

    /// Seals segment `base`'s predecessor and creates `base`'s file: the
    /// roll, in the order recovery relies on (old log fsynced and its index
    /// written before the new log exists).
    pub(super) async fn create_rolled(&self, base: Offset) -> Result<()> {
        let prev = {
            let mut inner = self.inner.borrow_mut();
            let prev = inner.segments.before(base).map(|s| {
                (
                    s.base,
                    s.file.clone(),
                    s.writer.clone(),
                    s.written_bytes,
                    s.log_path.clone(),
                    s.index_path.clone(),
                )
            });
            prev.map(|(prev_base, file, writer, written, log_path, index_path)| {
                let index_bytes = inner.segments.index_file_bytes(prev_base);
                (file, writer, written, log_path, index_path, index_bytes)
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
            files::write_file_synced(&index_path, index_bytes).await?;
        }
        let path = dirs::log_path(&self.dir, base);
        self.faults.check_no_space(NoSpaceAt::RollCreate, &path)?;
        let file = Rc::new(files::create_new(&path).await?);
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
        let (closed_id, closed_file) = self.inner.borrow_mut().segments.seal_rolled(base, file);
        // Its read handle goes to the shard's cache of closed segments'
        // files.
        if let Some(file) = closed_file.and_then(|f| Rc::try_unwrap(f).ok()) {
            crate::io::segment_files::adopt(closed_id, file).await;
        }
        Ok(())
    }
}

/// Writes queued batches in order, one write per contiguous run, and hands
/// the partition to the fsync batcher. Detached: a caller that stops waiting
/// does not stop the write its offsets were promised to.
pub(super) async fn write_loop(shared: Rc<LogState>) {
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
        crate::write::recent_budget::after_write(&recent);
        {
            let mut inner = shared.inner.borrow_mut();
            if inner.failure.is_some() {
                return;
            }
            let next = inner.next_offset;
            inner.segments.note_written(job.segment, job.position, len);
            assert!(job.end <= next, "written <= next offset");
        }
        shared.written.advance(job.end.0);
        if job.end_index > shared.written_index.get() {
            shared.written_index.advance(job.end_index);
        }
        match sync_started {
            // Only this loop starts this partition's syncs: none started
            // while the write ran.
            Some(synced) => {
                let (owner, path, upto) = (shared.clone(), writer.path().to_path_buf(), job.end.0);
                let upto_index = shared.written_index.get();
                let sync = async move { owner.synced(&path, upto, upto_index, synced.ended().await) };
                shared.batcher.adopt(target, job.appends, Box::pin(sync));
            }
            None => shared.batcher.mark_dirty(target, job.appends),
        }
    }
}
