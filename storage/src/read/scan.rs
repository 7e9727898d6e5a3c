//! Reading whole, checked batches out of a segment's bytes: a local file
//! (with the recent writes an active segment holds in memory) or a cold
//! segment. A batch that fails its checks stops the read with the
//! [`Damage`] it found; the bad bytes are never returned.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use glommio::io::BufferedFile;

use crate::batch::{self, BatchError, BatchHeader};
use crate::io::files::read_exact;
use crate::limits::READ_CHUNK_BYTES_MIN;
use crate::write::recent::RecentWrites;
use crate::{Offset, Result, StorageError};

/// A batch as read from disk: its checked header and its exact bytes (a
/// shared slice of the read that brought it in: taking it copies nothing).
#[derive(Clone, Debug)]
pub struct RawBatch {
    pub header: BatchHeader,
    pub bytes: bytes::Bytes,
}

/// Something batches can be read from by position: a local segment file,
/// or a segment in the cold store.
pub(crate) trait ByteSource {
    /// Reads `len` bytes at `pos`; fewer only at the end of the data.
    async fn read_at(&self, pos: u64, len: usize) -> Result<bytes::Bytes>;
}

/// A local segment file as a [`ByteSource`], with the recent writes of an
/// active segment: bytes they hold are served from memory.
pub(crate) struct FileSource<'a> {
    pub file: &'a BufferedFile,
    pub path: &'a Path,
    pub recent: Option<&'a RefCell<RecentWrites>>,
}

impl ByteSource for FileSource<'_> {
    async fn read_at(&self, pos: u64, len: usize) -> Result<bytes::Bytes> {
        let Some(recent) = self.recent else {
            return Ok(read_exact(self.file, self.path, pos, len).await?.into());
        };
        let end = pos + len as u64;
        let mut parts: Vec<bytes::Bytes> = Vec::new();
        let mut at = pos;
        while at < end {
            // Decided anew after every await: the writer may have moved on
            // (bytes it forgot are whole pages in the file by then).
            let held_from = recent.borrow().start();
            let part = if at >= held_from {
                let part = recent.borrow().read(at, (end - at) as usize);
                if part.is_empty() {
                    break;
                }
                part
            } else {
                let upto = end.min(held_from);
                let part = read_exact(self.file, self.path, at, (upto - at) as usize).await?;
                if part.len() < (upto - at) as usize {
                    return Err(StorageError::Corrupt {
                        path: self.path.to_path_buf(),
                        position: at + part.len() as u64,
                        reason: "file shorter than its written length".into(),
                    });
                }
                part.into()
            };
            at += part.len() as u64;
            parts.push(part);
        }
        Ok(match parts.len() {
            0 => bytes::Bytes::new(),
            1 => parts.pop().expect("one part"),
            _ => bytes::Bytes::from(parts.concat()),
        })
    }
}

/// Where a read met bytes inside a segment's written part that are not a
/// valid batch (corruption: the write loop only ever writes whole batches
/// there).
#[derive(Clone, Debug)]
pub(crate) struct Damage {
    pub path: PathBuf,
    pub position: u64,
    pub reason: String,
    /// The offset after the last batch the read passed before it, if any.
    pub after: Option<Offset>,
}

impl Damage {
    /// The error a read that found nothing before the damage returns.
    pub fn error(&self) -> StorageError {
        let from = match self.after {
            Some(offset) => format!("from offset {offset} on"),
            None => "from the segment's start on".into(),
        };
        StorageError::Corrupt {
            path: self.path.clone(),
            position: self.position,
            reason: format!(
                "{}; the records {from} in this segment cannot be read (the broker log says more)",
                self.reason
            ),
        }
    }
}

/// Reads whole, checked batches from `file` starting at `start` (a batch
/// boundary) and ending before `end`, stopping once `budget_bytes` is
/// reached (always at least one batch if any is there) or `stop(header)` says
/// so. Bytes that fail their checks stop the read: the batches before them
/// are returned with the [`Damage`]; never the bad bytes.
pub(crate) async fn read_batches(
    src: &impl ByteSource,
    path: &Path,
    start: u64,
    end: u64,
    budget_bytes: usize,
    keep: impl FnMut(&BatchHeader) -> Scan,
) -> Result<(Vec<RawBatch>, Option<Damage>)> {
    let read = read_batches_limited(src, path, start, end, budget_bytes, usize::MAX, keep).await?;
    Ok((read.batches, read.damaged))
}

/// What [`read_batches_limited`] found.
pub(crate) struct SegmentRead {
    pub batches: Vec<RawBatch>,
    pub damaged: Option<Damage>,
    /// The length of the batch the read stopped before because taking it
    /// would have passed `limit_bytes` (no more than its header was read
    /// for it).
    pub over_limit: Option<usize>,
}

/// [`read_batches`], never taking more than `limit_bytes` in all: the read
/// stops before a batch that would pass it, leaves it unread (its header
/// tells its length) and says so (`over_limit`). Memory read stays within
/// the larger of `limit_bytes` and one read-ahead chunk, whatever a client
/// asked for.
pub(crate) async fn read_batches_limited(
    src: &impl ByteSource,
    path: &Path,
    start: u64,
    end: u64,
    budget_bytes: usize,
    limit_bytes: usize,
    mut keep: impl FnMut(&BatchHeader) -> Scan,
) -> Result<SegmentRead> {
    let mut out = Vec::new();
    let mut used = 0usize;
    let mut pos = start;
    let mut after = None;
    let mut buf = bytes::Bytes::new();
    let mut buf_pos = start; // file position of buf[0]
    let damage = |position: u64, reason: String, after: Option<Offset>| Damage {
        path: path.to_path_buf(),
        position,
        reason,
        after,
    };
    let done = |batches, damaged, over_limit| SegmentRead {
        batches,
        damaged,
        over_limit,
    };
    while pos < end {
        let at = (pos - buf_pos) as usize;
        match batch::check(&buf[at..]) {
            Ok(h) => {
                let len = h.batch_len as usize;
                match keep(&h) {
                    Scan::Skip => {}
                    Scan::Take if used + len > limit_bytes => return Ok(done(out, None, Some(len))),
                    Scan::Take => {
                        out.push(RawBatch {
                            header: h,
                            bytes: buf.slice(at..at + len),
                        });
                        used += len;
                    }
                    Scan::Stop => break,
                }
                pos += len as u64;
                after = Some(h.next_offset());
                if used >= budget_bytes {
                    break;
                }
            }
            Err(BatchError::Incomplete { needed, .. }) => {
                let left = end - pos;
                if left < needed as u64 {
                    let reason = format!("batch of {needed} bytes runs past the written end");
                    return Ok(done(out, Some(damage(pos, reason, after)), None));
                }
                // A batch to take that would pass the limit is not read.
                if used + needed > limit_bytes {
                    if let Ok(h) = BatchHeader::parse(&buf[at..]) {
                        match keep(&h) {
                            Scan::Take => return Ok(done(out, None, Some(needed))),
                            Scan::Stop => break,
                            Scan::Skip => {}
                        }
                    }
                }
                let want = (needed
                    .max(budget_bytes.min(limit_bytes).saturating_sub(used))
                    .max(READ_CHUNK_BYTES_MIN) as u64)
                    .min(left) as usize;
                buf = match src.read_at(pos, want).await {
                    Ok(b) => b,
                    Err(StorageError::Corrupt { position, reason, .. }) => {
                        return Ok(done(out, Some(damage(position, reason, after)), None))
                    }
                    Err(e) => return Err(e),
                };
                buf_pos = pos;
                if buf.len() < want {
                    let reason = "file shorter than its written length".to_string();
                    return Ok(done(out, Some(damage(pos, reason, after)), None));
                }
            }
            Err(BatchError::Malformed(reason)) => {
                return Ok(done(out, Some(damage(pos, reason, after)), None))
            }
        }
    }
    Ok(done(out, None, None))
}

/// What a reader wants done with the next batch.
pub(crate) enum Scan {
    Skip,
    Take,
    Stop,
}
