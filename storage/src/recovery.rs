//! Crash recovery of one segment: scan its batches from the start, stop at
//! the first torn or checksum-bad batch, truncate the file there and rebuild
//! the index from what is left.

use glommio::io::BufferedFile;

use crate::batch::{self, BatchError};
use crate::recent::PAGE_BYTES;
use crate::segment::{self, Segment};
use crate::{Result, StorageError};

/// Bytes read per step while scanning.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// What a scan trimmed from the end of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trimmed {
    pub position: u64,
    pub bytes_dropped: u64,
    pub reason: String,
}

/// Whether `[pos, file_len)` is the zero padding a direct write leaves
/// after the last batch (`writer.rs`): less than a page, all zeros, ending
/// the file on a page boundary. Dropping it trims nothing that was written.
async fn is_padding(file: &BufferedFile, path: &std::path::Path, pos: u64, file_len: u64) -> Result<bool> {
    if !file_len.is_multiple_of(PAGE_BYTES) || file_len - pos >= PAGE_BYTES {
        return Ok(false);
    }
    let rest = segment::read_exact(file, path, pos, (file_len - pos) as usize).await?;
    Ok(rest.len() as u64 == file_len - pos && rest.iter().all(|&b| b == 0))
}

/// Scans `file` (the log of `seg`, which must be empty in memory), feeding
/// every valid batch to `seg`, and truncates the file after the last one.
/// Returns what was trimmed, if anything. The file is fdatasync'd either way,
/// so what recovery keeps is durable even if it was only in the page cache.
pub(crate) async fn recover_segment(
    file: &BufferedFile,
    seg: &mut Segment,
    interval: u32,
) -> Result<Option<Trimmed>> {
    assert!(seg.is_empty());
    let path = seg.log_path.clone();
    let file_len = file.file_size().await.map_err(|e| StorageError::io(&path, e))?;
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_pos = 0u64; // file position of buf[0]
    let mut pos = 0u64; // end of the last valid batch
    let stop_reason: Option<String> = loop {
        let at = (pos - buf_pos) as usize;
        match batch::check(&buf[at..]) {
            Ok(h) => {
                if h.base_offset < seg.next_offset {
                    break Some(format!(
                        "batch base offset {} is below the expected {}",
                        h.base_offset, seg.next_offset
                    ));
                }
                if h.next_offset().0 - seg.base.0 > u32::MAX as u64 {
                    break Some("batch offsets do not fit the segment".into());
                }
                seg.note_batch(&h, pos, interval);
                pos += h.batch_len as u64;
            }
            Err(BatchError::Incomplete { needed, .. }) => {
                if pos == file_len {
                    break None;
                }
                if pos + needed as u64 > file_len {
                    break Some(format!(
                        "torn batch: needs {needed} bytes, file has {}",
                        file_len - pos
                    ));
                }
                let want = needed.max(SCAN_CHUNK_BYTES).min((file_len - pos) as usize);
                buf = segment::read_exact(file, &path, pos, want).await?;
                buf_pos = pos;
                if buf.len() < needed {
                    break Some("file ended while reading".into());
                }
            }
            Err(BatchError::Malformed(reason)) => break Some(reason),
        }
        glommio::yield_if_needed().await;
    };
    seg.written_bytes = seg.dirty_bytes;
    let stop_reason = match stop_reason {
        Some(_) if is_padding(file, &path, pos, file_len).await? => {
            file.truncate(pos).await.map_err(|e| StorageError::io(&path, e))?;
            None
        }
        other => other,
    };
    let trimmed = match stop_reason {
        Some(reason) => {
            file.truncate(pos).await.map_err(|e| StorageError::io(&path, e))?;
            let t = Trimmed {
                position: pos,
                bytes_dropped: file_len - pos,
                reason,
            };
            tracing::warn!(
                file = %path.display(),
                position = t.position,
                bytes_dropped = t.bytes_dropped,
                reason = %t.reason,
                "recovery trimmed a torn or corrupt tail"
            );
            Some(t)
        }
        None => None,
    };
    file.fdatasync().await.map_err(|e| StorageError::io(&path, e))?;
    Ok(trimmed)
}
