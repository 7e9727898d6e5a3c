//! `DirectBuf`: the page-aligned memory of one direct write of the
//! segment writer, and how it reaches the file: glommio's DMA buffer
//! through io_uring, or a [`PageBuf`] through the shard's disk threads
//! (`io/disk_threads/`). Lives on the shard that owns the partition.

use std::path::Path;

use glommio::io::DmaFile;

use crate::io::disk_threads::{PageBuf, SyncAfter, ThreadedFile, WriteBuf};
use crate::{Result, StorageError};

/// The aligned memory of one direct write: glommio's, for io_uring, or a
/// [`WriteBuf`] that may cross to a disk thread.
pub(crate) enum DirectBuf {
    Uring(glommio::io::DmaBuffer),
    Thread(WriteBuf),
}

impl DirectBuf {
    /// `len` bytes (whole pages) that `fill` writes, for `file`'s writes.
    pub fn filled(
        file: &DmaFile,
        threads: &Option<ThreadedFile>,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> DirectBuf {
        match threads {
            None => {
                let mut buf = file.alloc_dma_buffer(len);
                fill(buf.as_bytes_mut());
                DirectBuf::Uring(buf)
            }
            Some(_) => {
                // Possibly holding an earlier write's bytes: `fill` sets
                // every byte (asserted by its callers' arithmetic).
                let mut buf = PageBuf::for_write(len);
                fill(&mut buf);
                DirectBuf::Thread(WriteBuf::Own(buf))
            }
        }
    }

    pub fn len(&self) -> usize {
        match self {
            DirectBuf::Uring(b) => b.len(),
            DirectBuf::Thread(b) => b.len(),
        }
    }

    /// Writes the buffer at `pos` through the disk threads, which then
    /// fdatasync the file at once ([`ThreadedFile::write_then_sync`]).
    pub async fn write_then_sync(
        self,
        threads: &ThreadedFile,
        path: &Path,
        pos: u64,
    ) -> Result<(usize, SyncAfter)> {
        let DirectBuf::Thread(buf) = self else {
            unreachable!("a disk thread's write has a thread's buffer");
        };
        let (wrote, synced) = threads.write_then_sync(buf, pos).await;
        let wrote = wrote.map_err(|e| StorageError::io(path, e))?;
        Ok((wrote, synced))
    }

    /// Writes the buffer at `pos`; returns the bytes written.
    pub async fn write(
        self,
        file: &DmaFile,
        threads: &Option<ThreadedFile>,
        path: &Path,
        pos: u64,
    ) -> Result<usize> {
        match (self, threads) {
            (DirectBuf::Uring(buf), _) => file
                .write_at(buf, pos)
                .await
                .map_err(|e| StorageError::io(path, e)),
            (DirectBuf::Thread(buf), Some(threads)) => threads
                .write_at(buf, pos)
                .await
                .map_err(|e| StorageError::io(path, e)),
            (DirectBuf::Thread(_), None) => unreachable!("a thread's buffer goes with disk threads"),
        }
    }
}
