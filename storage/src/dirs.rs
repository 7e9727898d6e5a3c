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

/// The segment base offsets found in a partition directory (from
/// `<base:020>.log` names), ascending. Other files are ignored.
pub async fn list_segments(dir: &Path) -> Result<Vec<Offset>> {
    let d = dir.to_path_buf();
    let names = glommio::executor()
        .spawn_blocking(move || -> std::io::Result<Vec<String>> {
            let mut out = Vec::new();
            for entry in std::fs::read_dir(&d)? {
                // blocking-ok: on the blocking pool
                out.push(entry?.file_name().to_string_lossy().into_owned());
            }
            Ok(out)
        })
        .await
        .map_err(|e| StorageError::io(dir, e))?;
    let mut bases: Vec<Offset> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    bases.sort();
    Ok(bases)
}

/// `<base:020>.log` -> base.
pub fn parse_log_name(name: &str) -> Option<Offset> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().map(Offset)
}

/// Path of a segment's log file.
pub fn log_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.log", base.0))
}

/// Path of a segment's index file.
pub fn index_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.index", base.0))
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
