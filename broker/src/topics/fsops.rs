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
        .map_err(|e| ApiError::io(format!("removing {}", dir.display()), &e))?;
    // Nothing was there: nothing to make durable.
    if let (true, Some(parent)) = (removed, dir.parent()) {
        es_storage::sync_dir(parent).await.map_err(ApiError::storage)?;
    }
    Ok(())
}

/// Replaces `dir/name` with `bytes` atomically: write `name.tmp`, fdatasync,
/// rename over `name`, fsync the directory. A crash leaves the old file or
/// the new one, never a mix. `dir` is created if missing. A failure before
/// the rename (no room for the new file, say) leaves the old file as it
/// was and removes the temporary one; no room is `unavailable` (503: retry
/// once space is freed).
pub async fn write_atomic(dir: &Path, name: &str, bytes: Vec<u8>) -> Result<(), ApiError> {
    es_storage::create_dir_all(dir).await.map_err(ApiError::storage)?;
    let tmp = dir.join(format!("{name}.tmp"));
    let written = write_synced(&tmp, bytes).await;
    if let Err(e) = written {
        if let Err(gone) = es_storage::remove_if_exists(&tmp).await {
            tracing::warn!(file = %tmp.display(), error = %gone, "a temporary file was not removed");
        }
        return Err(io_error("writing", &tmp, e));
    }
    glommio::io::rename(&tmp, dir.join(name))
        .await
        .map_err(|e| io_error("renaming", &tmp, es_storage::os_error(e)))?;
    es_storage::sync_dir(dir).await.map_err(ApiError::storage)
}

/// Writes `bytes` as the new file `path` and fdatasyncs it. Errors keep
/// their OS error code (`es_storage::os_error`), which tells no room and no
/// descriptor from the rest.
async fn write_synced(path: &Path, bytes: Vec<u8>) -> std::io::Result<()> {
    let file = glommio::io::BufferedFile::create(path)
        .await
        .map_err(es_storage::os_error)?;
    let len = bytes.len();
    let written = async {
        let n = file.write_at(bytes, 0).await.map_err(es_storage::os_error)?;
        if n < len {
            // The kernel says why once asked for the rest (ENOSPC ...).
            file.write_at(vec![0], n as u64)
                .await
                .map_err(es_storage::os_error)?;
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!("short write: {n} of {len} bytes (disk full?)"),
            ));
        }
        file.fdatasync().await.map_err(es_storage::os_error)
    }
    .await;
    let closed = file.close().await;
    written?;
    closed.map_err(es_storage::os_error)
}

/// An I/O failure `what` on the broker file `path` (`ApiError::io`).
fn io_error(what: &str, path: &Path, e: std::io::Error) -> ApiError {
    ApiError::io(format!("{what} {}", path.display()), &e)
}

/// Reads a whole small file; `None` if it does not exist.
pub async fn read_small(path: &Path) -> Result<Option<Vec<u8>>, ApiError> {
    let file = match glommio::io::BufferedFile::open(path).await {
        Ok(f) => f,
        Err(e) => {
            let e = es_storage::os_error(e);
            return if e.kind() == std::io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(ApiError::io(format!("opening {}", path.display()), &e))
            };
        }
    };
    let io = |e: glommio::GlommioError<()>| {
        ApiError::io(format!("reading {}", path.display()), &es_storage::os_error(e))
    };
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Ways of creating a directory that do not fsync its parent.
    const BARE_CREATES: &[&str] = &["fs::create_dir", "DirBuilder", "Directory::create"];

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            // blocking-ok: a test
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Every directory the broker or storage creates has its parent fsynced:
    /// they create directories only through storage's `create_dir_all` (or
    /// `create_dir_all_durable` before the shards run), whose own tests
    /// (storage/src/io/dirs.rs) watch the parent fsync. Test set-up marked
    /// `test setup` may create them bare.
    #[test]
    fn directories_are_created_only_through_the_durable_create() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut files = Vec::new();
        for src in ["broker/src", "storage/src"] {
            rust_files(&root.join(src), &mut files);
        }
        let own = Path::new(file!()).file_name().unwrap();
        let mut bare = Vec::new();
        for file in &files {
            if file.ends_with("storage/src/io/dirs.rs") || file.file_name() == Some(own) {
                continue;
            }
            let text = std::fs::read_to_string(file).unwrap(); // blocking-ok: a test
            for (n, line) in text.lines().enumerate() {
                if BARE_CREATES.iter().any(|p| line.contains(p)) && !line.contains("test setup") {
                    bare.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
        assert!(
            bare.is_empty(),
            "directories created without fsyncing their parent (use es_storage::create_dir_all, \
             or create_dir_all_durable before the shards run):\n{}",
            bare.join("\n")
        );
        assert!(files.len() > 20, "the sources were found: {}", files.len());
    }
}
