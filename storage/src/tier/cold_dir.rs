//! `LocalDirColdStore`: the cold tier as a local directory (the broker's
//! `--cold-dir`, default `<data-dir>/cold`), typically a larger, cheaper
//! disk.
//!
//! Layout: `<root>/<topic>/<partition>/<base:020>.log` and `.index`, the
//! same files as in the hot tier. A segment is listed only when both exist
//! and the index footer's `log_bytes` equals the log's length.
//!
//! `put`: copy the log to `<base>.log.tmp` and write `<base>.index.tmp`,
//! fdatasync both, rename the index into place, then the log, fsync the
//! directory. A crash before the log's rename leaves it unlisted (temporary
//! files are overwritten by the next `put` of that base, which the hot tier
//! retries because its copy still exists). `delete`: rename the log to
//! `<base>.log.deleting` (after that it is unlisted), remove the index,
//! fsync the directory, then give the log's space back a step at a time
//! once no read of this store is in flight (reclaim.rs: unlinking a large
//! file at once holds up every fsync on a disk the hot tier may share). A
//! crash part-way leaves the `.deleting` file, which the next `list` (at
//! the partition's open) removes. `delete_partition` (its topic deleted)
//! frees every file of the partition's directory the same way, then
//! removes it.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::{BufferedFile, OpenOptions};

use crate::cleanup::reclaim;
use crate::io::dirs;
use crate::io::files;
use crate::limits::COLD_COPY_CHUNK_BYTES;
use crate::tier::cold::{ColdFuture, ColdSegmentInfo, ColdStore};
use crate::{Offset, Result, StorageError};

/// A cold store in a local directory. Cheap to create (a path). Lives on
/// one shard (the broker makes one per partition); clones share the count
/// of reads in flight.
#[derive(Clone, Debug)]
pub struct LocalDirColdStore {
    root: PathBuf,
    /// Reads of this store in progress: a deleted log is not shrunk under
    /// them.
    reads: Rc<Cell<usize>>,
}

/// One read in flight, counted while it lives.
struct ReadGuard(Rc<Cell<usize>>);

impl ReadGuard {
    fn new(reads: &Rc<Cell<usize>>) -> ReadGuard {
        reads.set(reads.get() + 1);
        ReadGuard(reads.clone())
    }
}

impl Drop for ReadGuard {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl LocalDirColdStore {
    /// A store under `root`, made absolute (glommio cannot open relative
    /// paths); if the working directory cannot be read, `root` as given.
    pub fn new(root: impl Into<PathBuf>) -> LocalDirColdStore {
        let root = root.into();
        LocalDirColdStore {
            root: std::path::absolute(&root).unwrap_or(root),
            reads: Rc::new(Cell::new(0)),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/<topic>/<partition>`, refusing names that would leave the root.
    pub fn partition_dir(&self, partition: &str) -> Result<PathBuf> {
        let parts: Vec<&str> = partition.split('/').collect();
        let ok = !parts.is_empty()
            && parts
                .iter()
                .all(|p| !p.is_empty() && *p != "." && *p != ".." && !p.contains(['\0', '\\']));
        if !ok {
            return Err(StorageError::Invalid(format!(
                "cold store partition name {partition:?} must be <topic>/<partition>"
            )));
        }
        Ok(parts.iter().fold(self.root.clone(), |p, c| p.join(c)))
    }

    async fn put_segment(
        &self,
        partition: &str,
        info: ColdSegmentInfo,
        log_path: &Path,
        index: Vec<u8>,
    ) -> Result<()> {
        let dir = self.partition_dir(partition)?;
        dirs::create_dir_all(&dir).await?;
        // Make every directory from the root down durable: the first put of a
        // partition may have just created them.
        let mut d = dir.as_path();
        while let Some(parent) = d.parent() {
            // A relative root's parent is "": the current directory.
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            dirs::sync_dir(parent).await?;
            if d == self.root {
                break;
            }
            d = parent;
        }
        let log_tmp = tmp_path(&dirs::log_path(&dir, info.base));
        let index_tmp = tmp_path(&dirs::index_path(&dir, info.base));
        let copied = async {
            copy_file(log_path, &log_tmp, info.log_bytes).await?;
            files::write_file_synced(&index_tmp, index).await
        }
        .await;
        if let Err(e) = copied {
            // A failed put leaves nothing behind (best effort: a crash here
            // leaves temporaries the next put of this base overwrites).
            let _ = dirs::remove_if_exists(&log_tmp).await;
            let _ = dirs::remove_if_exists(&index_tmp).await;
            return Err(e);
        }
        rename(&index_tmp, &dirs::index_path(&dir, info.base)).await?;
        rename(&log_tmp, &dirs::log_path(&dir, info.base)).await?;
        dirs::sync_dir(&dir).await
    }

    async fn list_segments(&self, partition: &str) -> Result<Vec<ColdSegmentInfo>> {
        let dir = self.partition_dir(partition)?;
        let names = match dirs::list_names(&dir).await {
            Ok(n) => n,
            Err(StorageError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(e),
        };
        // Logs a crash left half-freed by `delete`: not segments.
        for name in names.iter().filter(|n| n.ends_with(dirs::DELETING_SUFFIX)) {
            dirs::remove_if_exists(&dir.join(name)).await?;
        }
        let mut bases: Vec<Offset> = names.iter().filter_map(|n| dirs::parse_log_name(n)).collect();
        bases.sort();
        let mut out = Vec::new();
        for base in bases {
            let log = dirs::log_path(&dir, base);
            let footer = files::read_index_footer(&dirs::index_path(&dir, base)).await;
            let len = file_len(&log).await?;
            match footer {
                Some(f) if f.log_bytes == len && f.next_offset >= base => out.push(ColdSegmentInfo {
                    base,
                    next_offset: f.next_offset,
                    log_bytes: len,
                    max_timestamp_ms: f.max_timestamp_ms,
                }),
                _ => tracing::warn!(
                    file = %log.display(),
                    "cold segment without a matching index; not listed"
                ),
            }
        }
        Ok(out)
    }

    async fn read_log(&self, partition: &str, base: Offset, position: u64, len: usize) -> Result<Vec<u8>> {
        let _read = ReadGuard::new(&self.reads);
        let path = dirs::log_path(&self.partition_dir(partition)?, base);
        read_range(&path, position, len).await
    }

    async fn read_index_file(&self, partition: &str, base: Offset) -> Result<Vec<u8>> {
        let _read = ReadGuard::new(&self.reads);
        let path = dirs::index_path(&self.partition_dir(partition)?, base);
        let len = file_len(&path).await?;
        read_range(&path, 0, len as usize).await
    }

    async fn delete_segment(&self, partition: &str, base: Offset) -> Result<()> {
        let dir = self.partition_dir(partition)?;
        let trash = dirs::deleting_log_path(&dir, base);
        let a = dirs::rename_if_exists(&dirs::log_path(&dir, base), &trash).await?;
        let b = dirs::remove_if_exists(&dirs::index_path(&dir, base)).await?;
        if a || b {
            dirs::sync_dir(&dir).await?;
        }
        if a {
            // Gone from the store now; its space comes back step by step,
            // after the reads that may have opened it before the rename.
            if self.reads_done().await {
                reclaim::release(&trash, None, || false).await?;
            } else {
                dirs::remove_if_exists(&trash).await?;
            }
        }
        Ok(())
    }

    /// Waits until no read of this store is in flight; `false` if some
    /// still are after `RECLAIM_READERS_WAIT_MS` (reclaim.rs).
    async fn reads_done(&self) -> bool {
        reclaim::wait_until(|| self.reads.get() == 0, &|| false).await
    }

    async fn delete_all(&self, partition: &str) -> Result<()> {
        let dir = self.partition_dir(partition)?;
        // A step at a time, like a hot partition's: a deleted topic's cold
        // segments may be gigabytes on the disk the logs are on. Its reads
        // (if any are still in flight) finish first, or fail short.
        self.reads_done().await;
        reclaim::free_dir(&dir).await?;
        match dir.parent() {
            Some(parent) => match dirs::sync_dir(parent).await {
                Err(StorageError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                    Ok(())
                }
                other => other,
            },
            None => Ok(()),
        }
    }
}

impl ColdStore for LocalDirColdStore {
    fn put<'a>(
        &'a self,
        partition: &'a str,
        info: ColdSegmentInfo,
        log_path: &'a Path,
        index: Vec<u8>,
    ) -> ColdFuture<'a, ()> {
        Box::pin(self.put_segment(partition, info, log_path, index))
    }

    fn list<'a>(&'a self, partition: &'a str) -> ColdFuture<'a, Vec<ColdSegmentInfo>> {
        Box::pin(self.list_segments(partition))
    }

    fn read<'a>(
        &'a self,
        partition: &'a str,
        base: Offset,
        position: u64,
        len: usize,
    ) -> ColdFuture<'a, Vec<u8>> {
        Box::pin(self.read_log(partition, base, position, len))
    }

    fn read_index<'a>(&'a self, partition: &'a str, base: Offset) -> ColdFuture<'a, Vec<u8>> {
        Box::pin(self.read_index_file(partition, base))
    }

    fn delete<'a>(&'a self, partition: &'a str, base: Offset) -> ColdFuture<'a, ()> {
        Box::pin(self.delete_segment(partition, base))
    }

    fn delete_partition<'a>(&'a self, partition: &'a str) -> ColdFuture<'a, ()> {
        Box::pin(self.delete_all(partition))
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

async fn rename(from: &Path, to: &Path) -> Result<()> {
    glommio::io::rename(from, to)
        .await
        .map_err(|e| StorageError::io(from, e))
}

async fn file_len(path: &Path) -> Result<u64> {
    let f = BufferedFile::open(path)
        .await
        .map_err(|e| StorageError::io(path, e))?;
    let len = f.file_size().await.map_err(|e| StorageError::io(path, e));
    let _ = f.close().await;
    len
}

async fn read_range(path: &Path, position: u64, len: usize) -> Result<Vec<u8>> {
    let f = BufferedFile::open(path)
        .await
        .map_err(|e| StorageError::io(path, e))?;
    let got = files::read_exact(&f, path, position, len).await;
    let _ = f.close().await;
    got
}

/// Copies exactly `len` bytes of `from` into a new `to` (truncated if it
/// exists) and fdatasyncs it.
async fn copy_file(from: &Path, to: &Path, len: u64) -> Result<()> {
    let src = BufferedFile::open(from)
        .await
        .map_err(|e| StorageError::io(from, e))?;
    let dst = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .buffered_open(to)
        .await
        .map_err(|e| StorageError::io(to, e))?;
    let mut pos = 0u64;
    while pos < len {
        let want = ((len - pos) as usize).min(COLD_COPY_CHUNK_BYTES);
        let chunk = files::read_exact(&src, from, pos, want).await?;
        if chunk.len() != want {
            let _ = src.close().await;
            return Err(StorageError::Corrupt {
                path: from.to_path_buf(),
                position: pos,
                reason: format!("segment shorter than its {len} bytes"),
            });
        }
        files::write_all(&dst, to, chunk, pos).await?;
        pos += want as u64;
        glommio::yield_if_needed().await;
    }
    let _ = src.close().await;
    dst.fdatasync().await.map_err(|e| StorageError::io(to, e))?;
    dst.close().await.map_err(|e| StorageError::io(to, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_stay_inside_the_root() {
        let s = LocalDirColdStore::new("/cold");
        assert_eq!(s.partition_dir("orders/3").unwrap(), Path::new("/cold/orders/3"));
        for bad in ["", "/", "a//1", "../x", "a/..", ".", "a/./1", "a\\b/1"] {
            assert!(s.partition_dir(bad).is_err(), "{bad:?}");
        }
    }
}
