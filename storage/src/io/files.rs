//! File helpers of the log, over glommio's buffered files: open and
//! create a segment's log, write all of a buffer (a short write gets the
//! kernel's reason), read exactly, write a small file durably, and read
//! and save a segment's index file. Nothing here blocks a shard.

use std::path::Path;

use glommio::io::{BufferedFile, OpenOptions};

use crate::format::index::{Footer, SparseIndex, FOOTER_BYTES};
use crate::io::cached::read_cached;
use crate::io::dirs;
use crate::log::write_failure::WriteFailure;
use crate::{Result, StorageError};

/// Opens a log file for reading and writing.
pub(crate) async fn open_rw(path: &Path) -> Result<BufferedFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .buffered_open(path)
        .await
        .map_err(|e| StorageError::io(path, e))
}

/// Creates a new, empty log file; fails if it exists.
pub(crate) async fn create_new(path: &Path) -> Result<BufferedFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .buffered_open(path)
        .await
        .map_err(|e| StorageError::io(path, e))
}

/// Writes all of `buf` at `pos`. A short write is an error that says why
/// the write stopped, as the kernel does once asked for the next byte
/// ([`short_write_reason`]): the reason decides whether the partition is
/// poisoned (`write_failure.rs`).
pub(crate) async fn write_all(file: &BufferedFile, path: &Path, buf: Vec<u8>, pos: u64) -> Result<()> {
    let len = buf.len();
    let n = file
        .write_at(buf, pos)
        .await
        .map_err(|e| StorageError::io(path, e))?;
    if n < len {
        return Err(short_write_reason(file, path, n, len, pos).await);
    }
    check_written(path, n, len, pos)
}

/// Why a write of `len` bytes at `pos` took only `wrote`: the error of a
/// one-byte write where it stopped (ENOSPC on a full disk, EFBIG at a file
/// size limit, EIO ...). That byte lies past what the caller counts as
/// written, which it cuts off or never reads. If it goes in, room came
/// back at once: reported as no space (the write is refused, not the
/// partition poisoned: nothing before it was touched).
async fn short_write_reason(
    file: &BufferedFile,
    path: &Path,
    wrote: usize,
    len: usize,
    pos: u64,
) -> StorageError {
    let at = pos + wrote as u64;
    let reason = match file.write_at(vec![0], at).await {
        Err(e) => std::io::Error::from(e),
        Ok(_) => std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!("short write: {wrote} of {len} bytes at {pos}, then room came back"),
        ),
    };
    StorageError::io(path, reason)
}

/// A write of `len` bytes at `pos` that wrote `wrote`: short is an error.
pub(crate) fn check_written(path: &Path, wrote: usize, len: usize, pos: u64) -> Result<()> {
    if wrote != len {
        return Err(StorageError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                format!("short write: {wrote} of {len} bytes at {pos} (disk full?)"),
            ),
        ));
    }
    Ok(())
}

/// Reads exactly `len` bytes at `pos` (fewer only at end of file).
/// What the page cache holds is copied straight in ([`read_cached`]); only
/// the rest goes through io_uring.
pub(crate) async fn read_exact(file: &BufferedFile, path: &Path, pos: u64, len: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    read_cached(file, pos, len, &mut out);
    while out.len() < len {
        let got = file
            .read_at(pos + out.len() as u64, len - out.len())
            .await
            .map_err(|e| StorageError::io(path, e))?;
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    Ok(out)
}

/// Writes `bytes` as a file (created or truncated) and fdatasyncs it. The
/// caller syncs the directory. A write that fails (no room: `Io`) or
/// whose fsync fails (`Sync`) removes the part written: every such file
/// is derived data or a temporary one not renamed into place yet, so
/// nothing else is lost, and a full disk gets no half file to keep.
pub(crate) async fn write_file_synced(path: &Path, bytes: Vec<u8>) -> Result<()> {
    let file = BufferedFile::create(path)
        .await
        .map_err(|e| StorageError::io(path, e))?;
    let written = async {
        write_all(&file, path, bytes, 0).await?;
        file.fdatasync().await.map_err(|e| StorageError::sync(path, e))
    }
    .await;
    if let Err(e) = written {
        let _ = file.close().await;
        if let Err(gone) = dirs::remove_if_exists(path).await {
            tracing::warn!(file = %path.display(), error = %gone, "a half-written file was not removed");
        }
        return Err(e);
    }
    file.close().await.map_err(|e| StorageError::io(path, e))
}

/// Writes the index file of a segment that takes no more batches, then
/// fsyncs its directory. An index is derived data: without room for it
/// (`write_failure.rs`) the segment goes on with its index in memory, the
/// half-written file is gone (`write_file_synced`), and the next open
/// rebuilds it from the log; logged. Any other failure is returned.
pub(crate) async fn save_index(dir: &Path, path: &Path, bytes: Vec<u8>) -> Result<()> {
    match write_file_synced(path, bytes).await {
        Ok(()) => {}
        Err(e) if !WriteFailure::of(&e).poisons() => {
            tracing::warn!(index = %path.display(), error = %e, "no room for a segment index: kept in memory, the next open rebuilds it");
            return Ok(());
        }
        Err(e) => return Err(e),
    }
    dirs::sync_dir(dir).await
}

/// Reads the footer of an index file, if it exists and is intact.
pub(crate) async fn read_index_footer(path: &Path) -> Option<Footer> {
    let file = BufferedFile::open(path).await.ok()?;
    let len = file.file_size().await.ok()?;
    let tail = if len >= FOOTER_BYTES as u64 {
        read_exact(&file, path, len - FOOTER_BYTES as u64, FOOTER_BYTES)
            .await
            .ok()
    } else {
        None
    };
    let _ = file.close().await;
    Footer::decode(&tail?)
}

/// Reads and checks a whole index file against its footer.
pub(crate) async fn read_index(path: &Path, footer: &Footer) -> Option<SparseIndex> {
    let len = footer.entry_count as usize * crate::format::index::ENTRY_BYTES + FOOTER_BYTES;
    let file = BufferedFile::open(path).await.ok()?;
    let bytes = read_exact(&file, path, 0, len).await.ok();
    let _ = file.close().await;
    SparseIndex::decode_entries(&bytes?, footer)
}
/// Replaces `dir/name` with `bytes` atomically and durably: written to
/// `name.tmp`, fdatasynced, renamed over `name`, the directory fsynced. A
/// crash leaves the old file or the new one (a replicated log's vote and
/// metadata files).
pub async fn write_file_atomic(dir: &Path, name: &str, bytes: Vec<u8>) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    write_file_synced(&tmp, bytes).await?;
    glommio::io::rename(&tmp, dir.join(name))
        .await
        .map_err(|e| StorageError::io(&tmp, e))?;
    crate::io::dirs::sync_dir(dir).await
}

/// The bytes of the file `path`; `None` if there is no such file.
pub async fn read_file(path: &Path) -> Result<Option<Vec<u8>>> {
    let file = match BufferedFile::open(path).await {
        Ok(f) => f,
        Err(e) => {
            let e = std::io::Error::from(e);
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
            return Err(StorageError::io(path, e));
        }
    };
    let len = file.file_size().await.map_err(|e| StorageError::io(path, e))?;
    let bytes = read_exact(&file, path, 0, len as usize).await;
    let _ = file.close().await;
    bytes.map(Some)
}
