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
//!
//! Deleting a topic is what an operator does when the disk is full, so a
//! delete needs no room: `trash/` is made at start-up (a rename within a
//! filesystem allocates no data blocks), and where the move still finds
//! no room (no `trash/`, or its directory needs a block more), the
//! partition's directory is unlinked where it is.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::ApiError;

/// The trash directory's name under the data directory.
const TRASH_DIR: &str = "trash";

fn trash_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(TRASH_DIR)
}

/// Moves `dir` (a partition's directory, on shard `shard_id`) into the
/// trash, durably, and frees it in the background on the calling shard;
/// without room for the move, unlinks it in place. A `dir` that is not
/// there is fine.
pub async fn discard(data_dir: &Path, dir: &Path, shard_id: usize) -> Result<(), ApiError> {
    let trash = trash_dir(data_dir);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let to = trash.join(format!("{nanos}-{shard_id}-{name}"));
    let moved = async {
        es_storage::create_dir_all(&trash).await?;
        es_storage::rename_if_exists(dir, &to).await
    }
    .await;
    match moved {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(e) if e.is_no_space() => {
            tracing::warn!(dir = %dir.display(), error = %e, "no room to move a deleted partition to the trash: unlinking it in place");
            return crate::topics::fsops::remove_dir_all(dir).await;
        }
        Err(e) => return Err(ApiError::storage(e)),
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

/// Removes whatever a crash or a shutdown left in the trash, and makes
/// sure the trash exists, so that a delete on a full disk needs no room
/// for it. Start-up only, on the main thread before the shards run. No
/// room for it is only logged: deletes then unlink in place.
pub fn clear_at_start(data_dir: &Path) -> Result<(), String> {
    let trash = trash_dir(data_dir);
    let listed = std::fs::read_dir(&trash); // blocking-ok: start-up, before the shards run
    let entries = match listed {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return make_trash(&trash),
        Err(e) => return Err(format!("listing {}: {e}", trash.display())),
    };
    let mut left = 0;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("listing {}: {e}", trash.display()))?
            .path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path) // blocking-ok: start-up, before the shards run
        } else {
            std::fs::remove_file(&path) // blocking-ok: start-up, before the shards run
        };
        removed.map_err(|e| format!("removing {}: {e}", path.display()))?;
        left += 1;
    }
    if left > 0 {
        tracing::info!(dir = %trash.display(), left, "removed deleted partitions not yet freed when the broker stopped");
    }
    Ok(())
}

/// Creates the trash directory, durably; no room for it is logged.
fn make_trash(trash: &Path) -> Result<(), String> {
    match es_storage::create_dir_all_durable(trash) {
        Ok(_) => Ok(()),
        Err(e) if es_storage::is_no_space(&e) => {
            tracing::warn!(dir = %trash.display(), error = %e, "no room for the trash directory: topic deletes unlink in place");
            Ok(())
        }
        Err(e) => Err(format!("creating {}: {e}", trash.display())),
    }
}
