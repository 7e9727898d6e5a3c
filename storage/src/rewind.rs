//! Giving back batches placed but not written, when a write could not
//! start for a reason that passes (`poison.rs`): no descriptor to create
//! the next segment or open the active one's writer.
//!
//! Offsets are assigned when a batch is placed, before its write; the
//! write loop writes placed batches in order, so when one cannot be
//! written, neither can any placed after it. Nothing of them reached the
//! file (the failure came before their write), so the log goes back to its
//! written end: the offsets and file positions after it are free again,
//! the segments created for them in memory only are dropped, and every
//! append waiting for those offsets fails with `StorageError::Transient`.
//! Appends waiting for offsets already written wait on for their fsync.
//! The next append starts the write loop again.

use std::rc::Rc;

use crate::partition::Shared;
use crate::{Offset, StorageError};

impl Shared {
    /// The write loop met `err`, which does not poison: gives back every
    /// batch past the written end (see the module doc).
    pub(crate) fn give_back_unwritten(self: &Rc<Self>, err: &StorageError) {
        let written = self.written.get();
        let reason = err.to_string();
        let first = {
            let mut guard = self.inner.borrow_mut();
            let inner = &mut *guard;
            let pending = std::mem::take(&mut inner.pending);
            inner.writer_running = false;
            // Pages an early write wrote for a batch given back are stale
            // client bytes past the written end: cut before the next write.
            inner.early.end();
            for job in pending {
                if let Some(p) = job.prewritten {
                    inner.early.void_placed(job.segment, p);
                }
            }
            // Segments a roll added for the given-back batches, whose file
            // was not created: gone. A created one stays, empty.
            while inner.segments.len() > 1 {
                let (&base, last) = inner.segments.last_key_value().expect("more than one");
                if last.created || base.0 < written {
                    break;
                }
                inner.segments.remove(&base);
            }
            let seg = inner
                .segments
                .values_mut()
                .next_back()
                .expect("one segment at least");
            if let Some(mark) = seg.written_mark.take() {
                seg.rewind(mark);
            }
            assert_eq!(seg.dirty_bytes, seg.written_bytes, "everything left is written");
            assert_eq!(
                seg.next_offset,
                Offset(written),
                "the log ends at its written end"
            );
            inner.next_offset = Offset(written);
            !std::mem::replace(&mut inner.transient_logged, true)
        };
        if crate::poison::storage_out_of_descriptors(err) {
            metrics::counter!("es_descriptors_exhausted_total", "op" => "append").increment(1);
        }
        if first {
            tracing::warn!(
                partition = %self.dir.display(),
                %reason,
                "a write could not start; the batches not written are refused and the partition takes writes again"
            );
        }
        self.written.withdraw_above(written, &reason);
        self.durable.withdraw_above(written, &reason);
    }
}
