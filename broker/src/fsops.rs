//! Directory removal, which io_uring cannot do recursively: run on glommio's
//! blocking pool so the shard never blocks.

use std::path::Path;

use crate::error::ApiError;

pub async fn remove_dir_all(dir: &Path) -> Result<(), ApiError> {
    let d = dir.to_path_buf();
    let res = glommio::executor()
        .spawn_blocking(move || match std::fs::remove_dir_all(&d) {
            // blocking-ok: on the blocking pool
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        })
        .await;
    res.map_err(|e| ApiError::internal(format!("removing {}: {e}", dir.display())))?;
    if let Some(parent) = dir.parent() {
        es_storage::sync_dir(parent).await.map_err(ApiError::storage)?;
    }
    Ok(())
}
