//! Truncating a replicated log's uncommitted suffix: everything from a
//! Raft entry on (openraft's `truncate`, when a follower's suffix conflicts
//! with its leader's). Rare (after a leadership change only), so it is
//! done on a closed log: close, cut the files, reopen. The cut is a
//! sequence of steps, each atomic on disk, that leaves the log a prefix
//! of what it was after any of them: a crash between two steps reopens to
//! the old log cut somewhere at or after the cut point, never a log with a
//! hole, and the store that asked redoes the truncation.
//!
//! 1. the segments after the cut's, newest first: index removed, log
//!    renamed to `.log.deleting`, directory fsynced, `.deleting` removed
//!    (the retention delete protocol; a leftover `.deleting` is removed at
//!    open);
//! 2. the cut segment: index removed, directory fsynced, log truncated at
//!    the entry's position and fdatasynced (what recovery does to a torn
//!    tail).

use std::path::Path;

use crate::io::dirs;
use crate::{Offset, PartitionLog, Result, StorageError};

/// One step of a truncation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TruncateStep {
    /// Removes the segment at this base, a whole segment after the cut.
    Remove(Offset),
    /// Cuts the segment at this base to `position` bytes.
    Cut(Offset, u64),
}

/// The steps that cut the log in `dir` at `position` of segment `segment`.
pub async fn truncation_plan(dir: &Path, segment: Offset, position: u64) -> Result<Vec<TruncateStep>> {
    let mut after: Vec<Offset> = dirs::list_segments(dir)
        .await?
        .into_iter()
        .filter(|&b| b > segment)
        .collect();
    after.sort();
    let mut steps: Vec<TruncateStep> = after.into_iter().rev().map(TruncateStep::Remove).collect();
    steps.push(TruncateStep::Cut(segment, position));
    Ok(steps)
}

/// Carries out one step in `dir` (a closed log's directory).
pub async fn apply_truncate_step(dir: &Path, step: &TruncateStep) -> Result<()> {
    match *step {
        TruncateStep::Remove(base) => {
            dirs::remove_if_exists(&dirs::index_path(dir, base)).await?;
            let deleting = dirs::deleting_log_path(dir, base);
            dirs::rename_if_exists(&dirs::log_path(dir, base), &deleting).await?;
            dirs::sync_dir(dir).await?;
            dirs::remove_if_exists(&deleting).await?;
        }
        TruncateStep::Cut(base, position) => {
            dirs::remove_if_exists(&dirs::index_path(dir, base)).await?;
            dirs::sync_dir(dir).await?;
            let path = dirs::log_path(dir, base);
            let file = crate::io::files::open_rw(&path).await?;
            let io = |e: glommio::GlommioError<()>| StorageError::io(&path, e);
            let len = file.file_size().await.map_err(io)?;
            if position < len {
                file.truncate(position).await.map_err(io)?;
                file.fdatasync().await.map_err(io)?;
            }
            file.close().await.map_err(io)?;
        }
    }
    Ok(())
}

impl PartitionLog {
    /// Removes everything from `position` of segment `segment` on (a Raft
    /// entry's first batch): closes this log, cuts its files
    /// ([`truncation_plan`]) and returns it reopened. Only for a
    /// replicated log without a cold tier; the caller makes sure nothing
    /// committed is cut.
    pub async fn truncate_at(self, segment: Offset, position: u64) -> Result<PartitionLog> {
        let dir = self.dir().to_path_buf();
        let config = self.shared.config.borrow().clone();
        let batcher = self.shared.batcher.clone();
        self.close().await?;
        drop(self);
        for step in truncation_plan(&dir, segment, position).await? {
            apply_truncate_step(&dir, &step).await?;
        }
        let (log, report) = PartitionLog::open(&dir, config, batcher).await?;
        tracing::info!(partition = %dir.display(), %segment, position, ?report, "log truncated");
        Ok(log)
    }
}
