//! Resetting a replicated log: every segment goes and the log starts again,
//! empty, at a given offset and Raft index. A follower whose whole log lies
//! below its leader's first hot offset (retention on the leader deleted
//! what it would need) gets the leader's log from there in a snapshot, and
//! the install replaces its log whole (raft's `snapshot_install.rs`, which
//! commits the install durably before it calls this and calls it again
//! after a crash). Steps, on the open log, so every handle to it stays
//! good:
//!
//! 1. as a truncation: placement is refused, the early write ends, the
//!    write loop drains, every written byte is fsynced; then the
//!    maintenance permit (no cleanup meanwhile);
//! 2. reads that start from now on find nothing: the segments after the
//!    first leave the set and are removed newest first with the retention
//!    delete protocol (`truncate.rs`), and the first one's readable bytes
//!    end at 0;
//! 3. the first segment's file is renamed `.deleting`, its index unlinked,
//!    the directory fsynced;
//! 4. an empty segment file at the new start is created and the directory
//!    fsynced; it replaces the first segment in the set;
//! 5. `next_offset`, `written` and `durable` go to the new start, the index
//!    marks to the new first index (waiters above a mark that went back
//!    get `Truncated`). `committed` never moves back; the caller raises it.
//!
//! A crash leaves a prefix of the old segments (newest removed first),
//! nothing (which the next open makes an empty log at 0), or the new empty
//! segment: each a log the caller's recovery resets again. A failure in
//! steps 2-4 poisons the partition. The cold tier is not touched.

use std::rc::Rc;

use crate::cleanup::reclaim;
use crate::io::dirs;
use crate::io::files;
use crate::io::segment_files::{self, Held};
use crate::log::segment::Segment;
use crate::{Offset, PartitionLog, Result};

use super::partition::LogState;

impl PartitionLog {
    /// Removes every segment and starts the log again, empty, at offset
    /// `start`, the next Raft entry placed being `first_index` (see the
    /// module doc). Only for a replicated log whose state machine installs
    /// a snapshot that covers everything below `start`.
    pub async fn reset_to(&self, start: Offset, first_index: u64) -> Result<()> {
        self.exclusively(self.reset_steps(start, first_index)).await
    }

    /// Steps 2 on, inside `exclusively` (`truncate.rs`): step 1.
    async fn reset_steps(&self, start: Offset, first_index: u64) -> Result<()> {
        let shared = &self.shared;
        match shared.reset(start, first_index).await {
            Ok(()) => {
                tracing::info!(
                    partition = %shared.dir.display(),
                    start = %start,
                    first_index,
                    "log reset for a snapshot install"
                );
                Ok(())
            }
            Err(e) => {
                shared.poison(&e);
                Err(e)
            }
        }
    }
}

impl LogState {
    /// Steps 2-5 of the module doc, under the maintenance permit, on a
    /// drained log.
    async fn reset(&self, start: Offset, first_index: u64) -> Result<()> {
        let (first, removed) = {
            let mut inner = self.inner.borrow_mut();
            let first = inner.segments.first().base;
            inner.early.cut_from(first);
            (first, inner.segments.take_after(first, 0))
        };
        self.remove_cut_segments(removed).await?;
        let (log_path, index_path) = {
            let segs = self.segments();
            let s = segs.first();
            (s.log_path.clone(), s.index_path.clone())
        };
        let trash = dirs::deleting_log_path(&self.dir, first);
        dirs::rename_if_exists(&log_path, &trash).await?;
        dirs::remove_if_exists(&index_path).await?;
        dirs::sync_dir(&self.dir).await?;
        let mut fresh = Segment::empty(&self.dir, start);
        let file = files::create_new(&fresh.log_path).await?;
        dirs::sync_dir(&self.dir).await?;
        fresh.file = Some(Rc::new(file));
        fresh.created = true;
        let mut old = {
            let mut inner = self.inner.borrow_mut();
            let old = inner.segments.replace_only(fresh);
            inner.next_offset = start;
            inner.placed_index = first_index;
            old
        };
        let held = old
            .file
            .take()
            .map(Held::Active)
            .or_else(|| segment_files::take(old.id).map(Held::Closed));
        segment_files::forget(old.id);
        drop(old);
        if let Err(e) = reclaim::release(&trash, held, || self.is_stopped()).await {
            tracing::warn!(file = %trash.display(), error = %e, "could not free a reset segment; the next open removes it");
        }
        for (mark, to) in [
            (&self.written, start.0),
            (&self.durable, start.0),
            (&self.written_index, first_index),
            (&self.durable_index, first_index),
        ] {
            if to >= mark.get() {
                mark.advance(to);
            } else {
                mark.rewind(to);
            }
        }
        Ok(())
    }
}
