//! Closing a partition cleanly: refuse appends, wait for queued writes,
//! fsync, and write the active segment's index so that the next open
//! trusts it without a scan.

use crate::io::files;
use crate::log::watermark::WaitError;
use crate::{Offset, Result, StorageError};

use super::partition::{LogState, PartitionLog};

impl PartitionLog {
    /// Closes the log cleanly: refuses new appends, waits for queued writes,
    /// fsyncs, and writes the active segment's index so that the next open
    /// scans nothing.
    pub async fn close(&self) -> Result<()> {
        let shared = &self.shared;
        let end = {
            let mut inner = shared.inner.borrow_mut();
            if inner.closed && inner.failure.is_none() {
                return Ok(());
            }
            inner.closed = true;
            inner.early.end();
            inner.next_offset
        };
        // A cleanup in progress sees `closed` and stops at its next step;
        // wait for it, so nothing writes in the directory after close.
        let _maintenance = shared.maintenance.acquire_permit(1).await;
        // Every batch placed is written, or was refused: then the rewind
        // moved the end back, once it is done.
        let mut end = end;
        loop {
            match shared.written.wait_for(end.0).await {
                Ok(()) => break,
                // A truncation never runs under a close (it takes the
                // maintenance permit, and refuses a closed log), but a
                // mark taken back is waited on again from where it went.
                Err(WaitError::Refused(_) | WaitError::Truncated(_)) => {
                    let begun = shared.inner.borrow().rewinds_begun;
                    let _ = shared.rewound.wait_for(begun).await;
                    end = shared.inner.borrow().next_offset;
                }
                Err(WaitError::Failed(_)) => return Err(shared.refusal()),
            }
        }
        // A zero-width control batch moves no offset: wait for the entries
        // placed to be written too.
        let placed_index = shared.inner.borrow().placed_index;
        if shared.written_index.wait_for(placed_index).await.is_err() {
            return Err(shared.refusal());
        }
        // A poisoned log is never sealed: sealing would let the next open
        // trust bytes whose fsync failed. Recovery decides at restart.
        if shared.inner.borrow().failure.is_some() {
            return Err(shared.refusal());
        }
        if let Err(e) = shared.seal_active(end).await {
            shared.poison(&e);
            return Err(e);
        }
        shared.written.fail("partition closed");
        shared.durable.fail("partition closed");
        shared
            .durable_index
            .advance_to_at_least(shared.written_index.get());
        shared.written_index.fail("partition closed");
        shared.durable_index.fail("partition closed");
        Ok(())
    }
}

impl LogState {
    /// fsyncs the fully written active segment and writes its index, so the
    /// next open trusts it without a scan.
    pub(super) async fn seal_active(&self, end: Offset) -> Result<()> {
        self.wait_early_ended().await;
        if self.inner.borrow().segments.active().sealed {
            // Sealed: fsynced, its index on disk matching it (opened clean
            // and not written since, or sealed by a roll given back): a
            // close costs no fsync.
            if end.0 > self.durable.get() {
                self.durable.advance(end.0);
            }
            return Ok(());
        }
        let (file, writer, written, log_path, index_path, index_bytes) = {
            let mut inner = self.inner.borrow_mut();
            let seg = inner.segments.active();
            let (base, file, writer, written, log_path, index_path) = (
                seg.base,
                seg.file.clone(),
                seg.writer.clone(),
                seg.written_bytes,
                seg.log_path.clone(),
                seg.index_path.clone(),
            );
            let index_bytes = inner.segments.index_file_bytes(base);
            (file, writer, written, log_path, index_path, index_bytes)
        };
        if let Some(writer) = writer {
            writer.finish(written).await?;
        }
        let file = file.expect("a fully written active segment is open");
        file.fdatasync()
            .await
            .map_err(|e| StorageError::sync(&log_path, e))?;
        if end.0 > self.durable.get() {
            self.durable.advance(end.0);
        }
        files::save_index(&self.dir, &index_path, index_bytes).await
    }
}
