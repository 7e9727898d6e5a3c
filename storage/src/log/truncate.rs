//! Truncating a replicated log's uncommitted suffix in place: everything
//! from a Raft entry on (openraft's `truncate`, when a follower's suffix
//! conflicts with its leader's), on the open log, so that every handle to
//! it stays good (a broker's partition table, a fetch in progress). The
//! spec's steps (`specs/raft.md` §1.4):
//!
//! 1. placement is refused (`Inner::truncating`), the early write ends,
//!    the write loop drains, every written byte is fsynced and no sync is
//!    in flight (a sync begun before the cut must not raise `durable`
//!    after it); then the maintenance permit (no cleanup meanwhile);
//! 2. the first batch with an index at or above the cut's is found
//!    (segment, position, offset); below the committed mark it is refused
//!    and the partition poisoned: that would drop acknowledged writes;
//! 3. reads that start from now on stop at the cut, and the segments
//!    after it, newest first, are removed with the retention delete
//!    protocol (log renamed to `.deleting`, index unlinked, directory
//!    fsynced, then the file freed once reads under way are done);
//! 4. its segment is cut there and fdatasynced, its index file removed,
//!    and its accounting rebuilt from the cut file (sparse index, index
//!    rule, timestamps, as an open does for an active segment); its writer
//!    and recent writes go, and the next write opens them again;
//! 5. `next_offset` goes back to the cut, `written` and `durable` are
//!    rewound there (and the index marks to the cut's index): waiters
//!    above get `Truncated`. `committed` never moves back.
//!
//! A crash between two steps leaves a prefix of the old log holding at
//! least the kept entries, never a hole (each step is atomic on disk and
//! removes the newest data first); the store that asked truncates again.
//! A failure in steps 3-4 poisons the partition: memory no longer says
//! what the files hold, and recovery decides at the next open.

use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use crate::cleanup::reclaim;
use crate::io::dirs;
use crate::io::files;
use crate::io::segment_files::{self, Held};
use crate::log::faults::FaultPoint;
use crate::log::fsync::SyncTarget;
use crate::log::recovery::{self, Shape, Tail};
use crate::log::segment::Segment;
use crate::log::watermark::WaitError;
use crate::read::scan::{self, FileSource, Scan};
use crate::{Offset, PartitionLog, Result, StorageError};

use super::partition::LogState;

/// Where a truncation cuts: the first batch of the first entry cut.
#[derive(Copy, Clone, Debug)]
struct Cut {
    segment: Offset,
    position: u64,
    offset: Offset,
}

/// What a scan of one segment for a cut found.
struct Found {
    /// The first batch at or above the cut's index, if any.
    cut: Option<Cut>,
    /// The segment holds no batch.
    empty: bool,
}

impl PartitionLog {
    /// Removes every Raft entry with an index at or above `index` from the
    /// log, in place (see the module doc); nothing if it holds none.
    /// Appends are refused while it runs. Only for a replicated log's
    /// uncommitted suffix: a cut below the committed mark is refused and
    /// poisons the partition.
    pub async fn truncate_from(&self, index: u64) -> Result<()> {
        self.exclusively(self.truncate_steps(index)).await
    }

    /// Step 1 of a truncation (or a reset, `reset.rs`), then `steps`,
    /// steps 2 on: refused on a closed or failed log, or while another
    /// truncation runs; placement is refused and the early write ended
    /// until `steps` ends, and it runs on a drained log under the
    /// maintenance permit (no cleanup meanwhile).
    pub(super) async fn exclusively(&self, steps: impl Future<Output = Result<()>>) -> Result<()> {
        let shared = &self.shared;
        {
            let mut inner = shared.inner.borrow_mut();
            if inner.closed || inner.failure.is_some() {
                drop(inner);
                return Err(shared.refusal());
            }
            if inner.truncating {
                return Err(StorageError::Invalid("a truncation is already under way".into()));
            }
            inner.truncating = true;
            inner.early.end();
        }
        let result = async {
            shared.drain().await?;
            let Ok(_permit) = shared.maintenance.acquire_permit(1).await else {
                return Err(shared.refusal());
            };
            // A close that ran meanwhile sealed the log: nothing is cut.
            if shared.is_stopped() {
                return Err(shared.refusal());
            }
            steps.await
        }
        .await;
        shared.inner.borrow_mut().truncating = false;
        result
    }

    /// Steps 2 on of the module doc, inside [`Self::exclusively`].
    async fn truncate_steps(&self, index: u64) -> Result<()> {
        let shared = &self.shared;
        let Some(cut) = self.locate(index).await? else {
            return Ok(());
        };
        let committed = shared.committed.get();
        if cut.offset.0 < committed {
            let e = StorageError::Invalid(format!(
                "truncation from entry {index} would cut offset {} below the committed offset {committed}: acknowledged writes would be lost",
                cut.offset
            ));
            shared.poison(&e);
            return Err(e);
        }
        match shared.cut(cut, index).await {
            Ok(()) => {
                tracing::info!(
                    partition = %shared.dir.display(),
                    index,
                    segment = %cut.segment,
                    position = cut.position,
                    offset = %cut.offset,
                    "uncommitted suffix truncated"
                );
                Ok(())
            }
            Err(e) => {
                shared.poison(&e);
                Err(e)
            }
        }
    }

    /// The first batch whose entry index is at or above `index`, looking
    /// at segments newest first: a segment whose first batch is at or
    /// above it goes whole, the first one holding a batch below it is cut.
    async fn locate(&self, index: u64) -> Result<Option<Cut>> {
        let bases: Vec<Offset> = self.shared.segments().iter().map(|s| s.base).collect();
        let mut later: Option<Cut> = None;
        for base in bases.into_iter().rev() {
            let found = self.find_in(base, index).await?;
            match found.cut {
                Some(c) if c.position > 0 => return Ok(Some(c)),
                Some(c) => later = Some(c),
                None if found.empty => {}
                None => return Ok(later),
            }
        }
        Ok(later)
    }

    /// Scans segment `base` up to its first batch of index `index` or more.
    async fn find_in(&self, base: Offset, index: u64) -> Result<Found> {
        let shared = &self.shared;
        let Some((file, path, _, written, _, recent)) = shared.reader(base, |_| 0).await? else {
            return Err(StorageError::Invalid(format!(
                "segment {base} went during a truncation"
            )));
        };
        let src = FileSource {
            file: &file,
            path: &path,
            recent: recent.as_deref(),
        };
        let (mut position, mut cut, mut empty, mut v1) = (0u64, None, true, false);
        // A budget of one byte never fills (skipped batches count nothing):
        // the scan reads the segment a chunk at a time.
        let read = scan::read_batches_limited(&src, &path, 0, written, 1, usize::MAX, |h| {
            empty = false;
            match h.raft {
                None => {
                    v1 = true;
                    Scan::Stop
                }
                Some(r) if r.index >= index => {
                    cut = Some(Cut {
                        segment: base,
                        position,
                        offset: h.base_offset,
                    });
                    Scan::Stop
                }
                Some(_) => {
                    position += h.batch_len as u64;
                    Scan::Skip
                }
            }
        })
        .await?;
        if let Some(d) = read.damaged {
            shared.report_damage(&d);
            return Err(d.error());
        }
        if v1 {
            return Err(StorageError::Invalid(format!(
                "segment {base} of {} holds a version 1 batch: only a replicated log is truncated",
                shared.dir.display()
            )));
        }
        Ok(Found { cut, empty })
    }
}

impl LogState {
    /// Waits until every batch placed is written and fsynced and no sync
    /// of this partition is in flight (placement is refused meanwhile).
    pub(super) async fn drain(self: &Rc<Self>) -> Result<()> {
        let target: Rc<dyn SyncTarget> = self.clone();
        loop {
            let (end, placed_index) = {
                let inner = self.inner.borrow();
                (inner.next_offset, inner.placed_index)
            };
            self.wait_early_ended().await;
            let waited = async {
                self.written.wait_for(end.0).await?;
                self.written_index.wait_for(placed_index).await?;
                self.durable.wait_for(end.0).await?;
                self.durable_index.wait_for(placed_index).await
            };
            match waited.await {
                Ok(()) => {}
                // A write found no room: once its rewind is done, the end
                // is where it went back to.
                Err(WaitError::Refused(_)) => {
                    let begun = self.inner.borrow().rewinds_begun;
                    let _ = self.rewound.wait_for(begun).await;
                    continue;
                }
                Err(_) => return Err(self.refusal()),
            }
            // The sync that made `durable` reach the end has ended; one
            // more may have been asked for meanwhile, with nothing to do.
            while self.batcher.is_syncing(&target) {
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
            let inner = self.inner.borrow();
            if inner.failure.is_some() {
                drop(inner);
                return Err(self.refusal());
            }
            let still = inner.next_offset == end
                && inner.placed_index == placed_index
                && inner.pending.is_empty()
                && !inner.writer_running
                && inner.rewinding.is_none();
            if still {
                return Ok(());
            }
        }
    }

    /// Steps 3-5 of the module doc, under the maintenance permit, on a
    /// drained log.
    async fn cut(&self, cut: Cut, index: u64) -> Result<()> {
        let removed = {
            let mut inner = self.inner.borrow_mut();
            inner.early.cut_from(cut.segment);
            inner.segments.take_after(cut.segment, cut.position)
        };
        self.remove_cut_segments(removed).await?;
        let path = dirs::log_path(&self.dir, cut.segment);
        let file = files::open_rw(&path).await?;
        file.truncate(cut.position)
            .await
            .map_err(|e| StorageError::io(&path, e))?;
        file.fdatasync().await.map_err(|e| StorageError::sync(&path, e))?;
        self.faults.check(FaultPoint::TruncateCut)?;
        // A stale index that a crash brings back does not match the cut
        // log (or describes it exactly): the next open scans or trusts it.
        dirs::remove_if_exists(&dirs::index_path(&self.dir, cut.segment)).await?;
        let mut fresh = Segment::empty(&self.dir, cut.segment);
        let interval = self.config.borrow().index_interval_bytes;
        let shape = Shape {
            last: true,
            end: None,
        };
        let scanned = recovery::scan(&file, &mut fresh, interval, shape).await?;
        if scanned.tail != Tail::Clean || scanned.end != cut.position {
            return Err(StorageError::Corrupt {
                path,
                position: scanned.end,
                reason: format!(
                    "the kept part of a truncated segment does not scan to the cut at {}: {:?}",
                    cut.position, scanned.tail
                ),
            });
        }
        fresh.created = true;
        fresh.file = Some(Rc::new(file));
        let next = fresh.next_offset;
        let old = {
            let mut inner = self.inner.borrow_mut();
            let old = inner.segments.replace_cut(fresh);
            inner.next_offset = next;
            inner.placed_index = inner.placed_index.min(index);
            old
        };
        // A sealed segment's read handle was the shard's cache's; an active
        // one's is closed here unless a read still holds it.
        segment_files::forget(old.id);
        let mut old = old;
        if let Some(file) = old.file.take().and_then(|f| Rc::try_unwrap(f).ok()) {
            let _ = file.close().await;
        }
        drop(old);
        self.written.rewind(next.0);
        self.durable.rewind(next.0);
        let marks = index.min(self.written_index.get());
        self.written_index.rewind(marks);
        self.durable_index.rewind(marks);
        Ok(())
    }

    /// Removes the segments after a cut, in order (newest first); on a
    /// failure the ones not reached are forgotten and the error returned.
    pub(super) async fn remove_cut_segments(&self, removed: Vec<Segment>) -> Result<()> {
        let mut removed = removed.into_iter();
        while let Some(seg) = removed.next() {
            if let Err(e) = self.remove_cut_segment(seg).await {
                for seg in removed.by_ref() {
                    segment_files::forget(seg.id);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Removes a segment after the cut: the retention delete protocol.
    async fn remove_cut_segment(&self, mut seg: Segment) -> Result<()> {
        let held = seg
            .file
            .take()
            .map(Held::Active)
            .or_else(|| segment_files::take(seg.id).map(Held::Closed));
        let trash = dirs::deleting_log_path(&self.dir, seg.base);
        let steps = async {
            dirs::rename_if_exists(&seg.log_path, &trash).await?;
            dirs::remove_if_exists(&seg.index_path).await?;
            dirs::sync_dir(&self.dir).await?;
            self.faults.check(FaultPoint::TruncateSegmentRemoved)
        };
        if let Err(e) = steps.await {
            if let Some(held) = held {
                held.close().await;
            }
            return Err(e);
        }
        if let Err(e) = reclaim::release(&trash, held, || self.is_stopped()).await {
            tracing::warn!(file = %trash.display(), error = %e, "could not free a truncated segment; the next open removes it");
        }
        Ok(())
    }
}
