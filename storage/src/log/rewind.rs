//! A write that failed: poison the partition, or, when it only found no
//! room or no descriptor (`write_failure.rs`), refuse it and every batch
//! queued behind it and take the log back to its last complete write.

use crate::log::write_failure::WriteFailure;
use crate::{Offset, Result, StorageError};

use super::partition::{LogState, Pending};

impl LogState {
    /// The write loop's `job` (the first not written) failed with `e`:
    /// counted by kind; a failure that leaves bytes in doubt poisons the
    /// partition, one that only found no room is refused ([`rewind`]). The
    /// write loop ends either way (nothing is queued after a rewind).
    ///
    /// [`rewind`]: LogState::rewind
    pub(super) async fn write_failed(&self, job: Pending, e: StorageError) {
        let kind = WriteFailure::of(&e);
        kind.count();
        if kind == WriteFailure::Descriptors {
            metrics::counter!("es_descriptors_exhausted_total", "op" => "append").increment(1);
        }
        if kind.poisons() {
            self.poison(&e);
            return;
        }
        let reason = e.to_string();
        let begun = {
            let mut inner = self.inner.borrow_mut();
            inner.rewinding = Some(reason.clone());
            inner.rewinds_begun += 1;
            inner.rewinds_begun
        };
        let rewound = self.rewind(job, &reason).await;
        {
            let mut inner = self.inner.borrow_mut();
            inner.rewinding = None;
            inner.writer_running = false;
        }
        if let Err(e) = rewound {
            WriteFailure::of(&e).count();
            self.poison(&e);
        }
        self.rewound.advance(begun);
    }

    /// Refuses `job` and every batch queued behind it, and takes the log
    /// back to `written`, the end of its last complete write (where `job`
    /// starts): once the early writes still in flight have landed, the
    /// segments' accounting goes back to `job`'s mark, `next_offset` to
    /// `written` (the offsets are given out again), and the file is cut at
    /// `job`'s position and fdatasynced, so neither a reader nor a restart
    /// ever finds the refused bytes; then their waiters get
    /// `StorageError::Refused`. Appends are refused meanwhile. What was
    /// written before stays, and becomes durable with the sync already
    /// due for it. A roll whose new file was never created is undone: the
    /// segment before it, not sealed yet (`create_rolled`), is active
    /// again. An error here (the cut or its fsync failed) poisons.
    pub(super) async fn rewind(&self, job: Pending, reason: &str) -> Result<()> {
        let to = self.written.get();
        tracing::warn!(
            partition = %self.dir.display(),
            %reason,
            offset = to,
            "a write found no room: it is refused and the log goes back to its last complete write; writes go on"
        );
        let dropped: Vec<Pending> = {
            let mut inner = self.inner.borrow_mut();
            inner.early.end();
            std::iter::once(job).chain(inner.pending.drain(..)).collect()
        };
        // Early pages still in flight land before the cut, never after it.
        self.wait_early_ended().await;
        for job in &dropped {
            if let Some(p) = &job.prewritten {
                p.writes.wait().await;
            }
        }
        let first = &dropped[0];
        let (base, position) = (first.segment, first.position);
        let cut = {
            let mut inner = self.inner.borrow_mut();
            assert_eq!(
                first.mark.next_offset.0, to,
                "the refused write starts where the log was written"
            );
            inner.early.cut_from(base);
            inner.next_offset = Offset(to);
            let cut = inner.segments.rewind(base, first.mark, position);
            // The log ends where its active segment does (`segment_set.rs`).
            debug_assert_eq!(inner.segments.active().next_offset, inner.next_offset);
            cut
        };
        if let Some((file, path)) = cut {
            file.truncate(position)
                .await
                .map_err(|e| StorageError::io(&path, e))?;
            file.fdatasync().await.map_err(|e| StorageError::sync(&path, e))?;
        }
        // A replicated log's entries from the first one not written whole
        // are refused too: they are placed no more, and their waits for
        // `durable_index` end (a Raft log store told them flushed would
        // lie). An entry cut in the middle keeps its written batches until
        // `cut_unfinished_entry` (`room.rs`).
        let entries_to = self.written_index.get();
        {
            let mut inner = self.inner.borrow_mut();
            inner.placed_index = inner.placed_index.min(entries_to);
        }
        // Told once the log is back: a retry then finds it taking writes.
        self.written.refuse_above(to, reason);
        self.durable.refuse_above(to, reason);
        self.written_index.refuse_above(entries_to, reason);
        self.durable_index.refuse_above(entries_to, reason);
        Ok(())
    }
}
