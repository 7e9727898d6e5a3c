//! Directory operations that io_uring lacks (listing, recursive create),
//! run on glommio's blocking pool so a shard never blocks on them.

use std::path::{Path, PathBuf};

use crate::{Offset, Result, StorageError};

/// Creates `dir` and its parents.
pub async fn create_dir_all(dir: &Path) -> Result<()> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || std::fs::create_dir_all(&d)) // blocking-ok: on the blocking pool
        .await
        .map_err(|e| StorageError::io(dir, e))
}

/// fsyncs a directory, so that files created, renamed or removed in it stay so.
pub async fn sync_dir(dir: &Path) -> Result<()> {
    let d = glommio::io::Directory::open(dir)
        .await
        .map_err(|e| StorageError::io(dir, e))?;
    d.sync().await.map_err(|e| StorageError::io(dir, e))?;
    d.close().await.map_err(|e| StorageError::io(dir, e))
}

/// The names of the entries of `dir`, unsorted. A missing directory is
/// an error (`NotFound`).
pub async fn list_names(dir: &Path) -> Result<Vec<String>> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || -> std::io::Result<Vec<String>> {
            let mut out = Vec::new();
            let entries = std::fs::read_dir(&d)?; // blocking-ok: on the blocking pool
            for entry in entries {
                out.push(entry?.file_name().to_string_lossy().into_owned());
            }
            Ok(out)
        })
        .await
        .map_err(|e| StorageError::io(dir, e))
}

/// The segment base offsets found in a partition directory (from
/// `<base:020>.log` names), ascending. Other files are ignored.
pub async fn list_segments(dir: &Path) -> Result<Vec<Offset>> {
    let names = list_names(dir).await?;
    let mut bases: Vec<Offset> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    bases.sort();
    Ok(bases)
}

/// `<base:020>.log` -> base.
pub fn parse_log_name(name: &str) -> Option<Offset> {
    parse_base(name.strip_suffix(".log")?)
}

/// `<base:020>.index` -> base.
pub fn parse_index_name(name: &str) -> Option<Offset> {
    parse_base(name.strip_suffix(".index")?)
}

fn parse_base(stem: &str) -> Option<Offset> {
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().map(Offset)
}

/// Whether `path` names a directory entry (of any kind).
pub async fn exists(path: &Path) -> Result<bool> {
    let p = path.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            let found = std::fs::symlink_metadata(&p); // blocking-ok: on the blocking pool
            match found {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| StorageError::io(path, e))
}

/// Removes the empty directory `dir`.
pub async fn remove_empty_dir(dir: &Path) -> Result<()> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || std::fs::remove_dir(&d)) // blocking-ok: on the blocking pool
        .await
        .map_err(|e| StorageError::io(dir, e))
}

/// Removes a file; `Ok(false)` if it was not there. The caller syncs the
/// directory.
pub async fn remove_if_exists(path: &Path) -> Result<bool> {
    match glommio::io::remove(path).await.map_err(std::io::Error::from) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StorageError::io(path, e)),
    }
}

/// Renames a file; `Ok(false)` if the source was not there. The caller
/// syncs the directory.
pub async fn rename_if_exists(from: &Path, to: &Path) -> Result<bool> {
    match glommio::io::rename(from, to).await.map_err(std::io::Error::from) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StorageError::io(from, e)),
    }
}

/// Path of a segment's log file.
pub fn log_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.log", base.0))
}

/// Path of a segment's index file.
pub fn index_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.index", base.0))
}

/// Suffix of a compaction output not yet swapped in (`<base>.log.cleaned`,
/// `<base>.index.cleaned`).
pub const CLEANED_SUFFIX: &str = ".cleaned";

/// Path of a compaction output's log before the swap.
pub fn cleaned_log_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.log{CLEANED_SUFFIX}", base.0))
}

/// Path of a compaction output's index before the swap.
pub fn cleaned_index_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.index{CLEANED_SUFFIX}", base.0))
}

/// Suffix of a segment log that has left the log and is being freed
/// (`<base>.log.deleting`, reclaim.rs).
pub const DELETING_SUFFIX: &str = ".deleting";

/// Path a deleted segment's log is renamed to before it is freed.
pub fn deleting_log_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.log{DELETING_SUFFIX}", base.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(parse_log_name("00000000000000000042.log"), Some(Offset(42)));
        assert_eq!(parse_log_name("42.log"), None);
        assert_eq!(parse_log_name("0000000000000000004x.log"), None);
        assert_eq!(parse_log_name("00000000000000000042.index"), None);
        assert_eq!(
            log_path(Path::new("/d"), Offset(7)),
            Path::new("/d/00000000000000000007.log")
        );
    }
}
