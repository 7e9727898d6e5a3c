//! After a full disk: whether there is room again, and a replicated log
//! made whole for a Raft log store to be opened over it again.
//!
//! A write that found no room is refused and the log goes back to its
//! last complete write (`rewind.rs`). In a replicated log that can end in
//! the middle of a Raft entry: an entry's batches may go in two writes,
//! the first written, the second refused. Such a tail is not an entry (it
//! has no `ENTRY_END` batch); [`PartitionLog::cut_unfinished_entry`]
//! removes it once every write placed has landed and been fsynced, so the
//! log holds exactly the entries whose end was written.

use crate::io::files;
use crate::log::faults::NoSpaceAt;
use crate::{PartitionLog, Result, StorageError};

/// The name of the probe file in a partition's directory (other files
/// than segments and indexes are ignored at open, so a crash that leaves
/// it costs nothing; the next probe replaces it).
const PROBE_NAME: &str = ".room-probe";

/// Bytes a probe writes: a few pages, so that a disk with room for a
/// probe has room for at least a small write of the log.
const PROBE_BYTES: usize = 64 * 1024;

impl PartitionLog {
    /// Whether the partition's filesystem takes a write again: writes
    /// `PROBE_BYTES` to a file in its directory, fdatasyncs it and removes
    /// it (every step through glommio: nothing blocks the shard). `Err`
    /// with the write's error, e.g. `ENOSPC`, when it does not. A test's
    /// injected full disk (`NoSpaceAt::SegmentWrite`) fails it too.
    pub async fn probe_room(&self) -> Result<()> {
        let path = self.shared.dir.join(PROBE_NAME);
        self.shared
            .faults
            .check_no_space(NoSpaceAt::SegmentWrite, &path)?;
        // `write_file_synced` removes a half-written file itself.
        files::write_file_synced(&path, vec![0; PROBE_BYTES]).await?;
        crate::io::dirs::remove_if_exists(&path).await?;
        Ok(())
    }

    /// Waits until every write placed has landed (or was refused and
    /// rewound) and is fsynced, then cuts the batches of an entry whose
    /// last batch was never written (index at or above `written_index`),
    /// if the log holds any: what a rewind in the middle of an entry
    /// leaves. Only on a log nobody places entries in meanwhile (its Raft
    /// group stopped); an entry placed while this runs is refused here
    /// rather than cut unseen. Nothing written whole is cut: every entry
    /// below `written_index` stays, durable.
    pub async fn cut_unfinished_entry(&self) -> Result<()> {
        self.shared.drain().await?;
        let (placed, written) = (self.shared.inner.borrow().placed_index, self.written_index());
        if placed != written {
            return Err(StorageError::Refused {
                path: self.shared.dir.clone(),
                reason: format!(
                    "entries up to index {placed} are placed but only those below {written} written: the log is still taking entries"
                ),
            });
        }
        self.truncate_from(written).await
    }
}
