//! Directory removal, which io_uring cannot do recursively: run on glommio's
//! blocking pool so the shard never blocks.

use std::path::Path;

use crate::error::ApiError;

pub async fn remove_dir_all(dir: &Path) -> Result<(), ApiError> {
    let d = dir.to_path_buf();
    let removed = glommio::executor()
        .spawn_blocking(move || {
            let removed = std::fs::remove_dir_all(&d); // blocking-ok: on the blocking pool
            match removed {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| ApiError::internal(format!("removing {}: {e}", dir.display())))?;
    // Nothing was there: nothing to make durable.
    if let (true, Some(parent)) = (removed, dir.parent()) {
        es_storage::sync_dir(parent).await.map_err(ApiError::storage)?;
    }
    Ok(())
}

/// Replaces `dir/name` with `bytes` atomically: write `name.tmp`, fdatasync,
/// rename over `name`, fsync the directory. A crash leaves the old file or
/// the new one, never a mix. `dir` is created if missing.
pub async fn write_atomic(dir: &Path, name: &str, bytes: Vec<u8>) -> Result<(), ApiError> {
    es_storage::create_dir_all(dir).await.map_err(ApiError::storage)?;
    let tmp = dir.join(format!("{name}.tmp"));
    let io = |e: glommio::GlommioError<()>| ApiError::internal(format!("writing {}: {e}", tmp.display()));
    let file = glommio::io::BufferedFile::create(&tmp).await.map_err(io)?;
    let len = bytes.len();
    let n = file.write_at(bytes, 0).await.map_err(io)?;
    if n != len {
        return Err(ApiError::internal(format!(
            "short write to {} (disk full?)",
            tmp.display()
        )));
    }
    file.fdatasync().await.map_err(io)?;
    file.close().await.map_err(io)?;
    glommio::io::rename(&tmp, dir.join(name)).await.map_err(io)?;
    es_storage::sync_dir(dir).await.map_err(ApiError::storage)
}

/// Reads a whole small file; `None` if it does not exist.
pub async fn read_small(path: &Path) -> Result<Option<Vec<u8>>, ApiError> {
    let file = match glommio::io::BufferedFile::open(path).await {
        Ok(f) => f,
        Err(e) => {
            let e = std::io::Error::from(e);
            return if e.kind() == std::io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(ApiError::internal(format!("opening {}: {e}", path.display())))
            };
        }
    };
    let io = |e: glommio::GlommioError<()>| ApiError::internal(format!("reading {}: {e}", path.display()));
    let len = file.file_size().await.map_err(io)?;
    let mut out = Vec::with_capacity(len as usize);
    while (out.len() as u64) < len {
        let got = file
            .read_at(out.len() as u64, (len as usize) - out.len())
            .await
            .map_err(io)?;
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    let _ = file.close().await;
    Ok(Some(out))
}
