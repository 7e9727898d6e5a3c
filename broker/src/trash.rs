//! Deleted partitions' directories: moved aside at once, freed in the
//! background.
//!
//! Unlinking a partition's segments all at once frees every block in one
//! go, and the filesystem's journal commits that follow hold up every
//! fsync on the disk, so every other topic's acknowledgements (storage's
//! `reclaim.rs`). So deleting a partition renames its directory into
//! `<data-dir>/trash/` (durable before the delete answers: the topic's name
//! is free again at once), and the owning shard then frees its files a step
//! at a time and removes the directory. Whatever a crash or a shutdown
//! leaves in `trash/` is removed at the next start, before any shard runs.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::ApiError;

/// The trash directory's name under the data directory.
const TRASH_DIR: &str = "trash";

fn trash_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(TRASH_DIR)
}

/// Moves `dir` (a partition's directory, on shard `shard_id`) into the
/// trash, durably, and frees it in the background on the calling shard.
/// A `dir` that is not there is fine.
pub async fn discard(data_dir: &Path, dir: &Path, shard_id: usize) -> Result<(), ApiError> {
    let trash = trash_dir(data_dir);
    es_storage::create_dir_all(&trash)
        .await
        .map_err(ApiError::storage)?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let to = trash.join(format!("{nanos}-{shard_id}-{name}"));
    if !es_storage::rename_if_exists(dir, &to)
        .await
        .map_err(ApiError::storage)?
    {
        return Ok(());
    }
    es_storage::sync_dir(&trash).await.map_err(ApiError::storage)?;
    if let Some(parent) = dir.parent() {
        es_storage::sync_dir(parent).await.map_err(ApiError::storage)?;
    }
    glommio::spawn_local(async move {
        if let Err(e) = es_storage::free_dir(&to).await {
            tracing::warn!(dir = %to.display(), error = %e, "could not free a deleted partition; the next start removes it");
        }
    })
    .detach();
    Ok(())
}

/// Removes whatever a crash or a shutdown left in the trash. Start-up only,
/// on the main thread before the shards run.
pub fn clear_at_start(data_dir: &Path) -> Result<(), String> {
    let trash = trash_dir(data_dir);
    let listed = std::fs::read_dir(&trash); // blocking-ok: start-up, before the shards run
    let left = match listed {
        Ok(entries) => entries.count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("listing {}: {e}", trash.display())),
    };
    let removed = std::fs::remove_dir_all(&trash); // blocking-ok: start-up, before the shards run
    removed.map_err(|e| format!("removing {}: {e}", trash.display()))?;
    if left > 0 {
        tracing::info!(dir = %trash.display(), left, "removed deleted partitions not yet freed when the broker stopped");
    }
    Ok(())
}
