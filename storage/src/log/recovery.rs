//! Crash recovery of one segment: scan its batches from the start, stop at
//! the first torn or checksum-bad batch, and tell a torn tail (trimmed)
//! from corruption (quarantined, or refused).
//!
//! The scan and the torn-tail/corruption rules are es-format's `scan`
//! (pure, shared with the offline tools, which must find exactly what
//! recovery would): this file feeds it the log's bytes through a
//! [`Window`] and acts on what it finds.
//!
//! **Torn tail**: damage that runs to the end of the last segment, as a
//! crash in the middle of a write leaves it: a partial last batch, the
//! zeros a direct writer pads its last page with, bytes past the log's end
//! (a batch still arriving when the broker died: early writes). Trimmed,
//! logged at warn.
//!
//! **Corruption**: damage with valid-looking batches after it, or any
//! damage in a segment that has a successor (it was fsynced whole before
//! its successor existed: no crash can tear it). Cutting it would drop
//! acknowledged records, so the partition refuses to open (nothing is
//! changed on disk) unless recovery may drop data
//! ([`set_accept_data_loss`]): then the bytes from the damage on are copied
//! to `<base>.log.corrupt-<unix ms>` (fsynced, and the directory) before
//! the log is cut there, and the offsets they held are never given to new
//! records. Logged at error level and counted in
//! `es_storage_corruptions_total{found="recovery"}` either way.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use glommio::io::BufferedFile;

use es_format::scan::Source;

use crate::io::dirs;
use crate::io::files;
use crate::limits::SCAN_CHUNK_BYTES;
use crate::log::segment::Segment;
use crate::{Result, StorageError};

pub use es_format::scan::Lost;
pub(crate) use es_format::scan::{Scanned, Shape, Tail};

thread_local! {
    /// Whether recovery on this shard may drop corrupt data (the broker's
    /// `--accept-data-loss`). Per thread, like the shard's other storage
    /// settings: a shard is one thread.
    static ACCEPT_DATA_LOSS: Cell<bool> = const { Cell::new(false) };
}

/// Lets recovery on this thread (a shard) quarantine and cut off corrupt
/// data and go on, instead of refusing to open the partition. Off by
/// default.
pub fn set_accept_data_loss(accept: bool) {
    ACCEPT_DATA_LOSS.with(|a| a.set(accept));
}

/// Whether recovery on this thread may drop corrupt data.
pub fn accept_data_loss() -> bool {
    ACCEPT_DATA_LOSS.with(|a| a.get())
}

/// What a scan trimmed from the end of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trimmed {
    pub position: u64,
    pub bytes_dropped: u64,
    pub reason: String,
}

/// Corrupt bytes recovery copied aside and cut off a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantined {
    /// The segment's log, cut at `position`.
    pub log: PathBuf,
    /// Where the damage starts: the first bad batch.
    pub position: u64,
    /// Bytes copied to `copy` and cut off: from `position` to the end.
    pub bytes: u64,
    /// `<base>.log.corrupt-<unix ms>`, beside the log.
    pub copy: PathBuf,
    /// Why the batch at `position` is bad.
    pub reason: String,
    pub lost: Lost,
}

/// What [`recover_segment`] did about the end of a log.
#[derive(Clone, Debug, Default)]
pub(crate) struct Recovered {
    pub trimmed: Option<Trimmed>,
    pub quarantined: Option<Quarantined>,
}

/// A window on a file being scanned: the bytes read last, by position.
struct Window<'a> {
    file: &'a BufferedFile,
    path: &'a Path,
    len: u64,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    at: u64,
}

impl<'a> Window<'a> {
    async fn new(file: &'a BufferedFile, path: &'a Path) -> Result<Window<'a>> {
        let len = file.file_size().await.map_err(|e| StorageError::io(path, e))?;
        Ok(Window {
            file,
            path,
            len,
            buf: Vec::new(),
            at: 0,
        })
    }

    /// The bytes from `pos` on, at least `want` of them where the file has
    /// them (fewer only at its end).
    async fn get(&mut self, pos: u64, want: usize) -> Result<&[u8]> {
        let left = self.len.saturating_sub(pos);
        let want = (want as u64).min(left) as usize;
        let held = pos >= self.at && pos + want as u64 <= self.at + self.buf.len() as u64;
        if !held {
            let read = want.max(SCAN_CHUNK_BYTES).min(left as usize);
            self.buf = files::read_exact(self.file, self.path, pos, read).await?;
            self.at = pos;
            if self.buf.len() < want {
                return Err(StorageError::Corrupt {
                    path: self.path.to_path_buf(),
                    position: pos + self.buf.len() as u64,
                    reason: "the file ended while it was read".into(),
                });
            }
        }
        Ok(&self.buf[(pos - self.at) as usize..])
    }
}

impl Source for Window<'_> {
    type Error = StorageError;
    fn len(&self) -> u64 {
        self.len
    }
    async fn get(&mut self, pos: u64, want: usize) -> Result<&[u8]> {
        Window::get(self, pos, want).await
    }
    async fn pause(&mut self) {
        glommio::yield_if_needed().await;
    }
}

/// Scans `file` (the log of `seg`, which must be empty in memory), feeding
/// every valid batch to `seg`, and says how its batches end. Changes
/// nothing on disk.
pub(crate) async fn scan(
    file: &BufferedFile,
    seg: &mut Segment,
    interval: u32,
    shape: Shape,
) -> Result<Scanned> {
    assert!(seg.is_empty());
    let path = seg.log_path.clone();
    let mut win = Window::new(file, &path).await?;
    let base = seg.base;
    let scanned =
        es_format::scan::scan(&mut win, base, shape, |h, pos| seg.note_batch(h, pos, interval)).await?;
    seg.written_bytes = seg.dirty_bytes;
    Ok(scanned)
}

/// Scans `file` (the log of `seg`, which must be empty in memory) as
/// [`scan`] does and acts on its end: a torn tail or padding is cut off;
/// corruption is refused (an error, nothing changed) or, where recovery
/// may drop data, copied aside and cut off, after which `seg`'s offsets
/// resume past the ones lost. The file is fdatasync'd, so what recovery
/// keeps is durable even if it was only in the page cache.
pub(crate) async fn recover_segment(
    file: &BufferedFile,
    seg: &mut Segment,
    interval: u32,
    shape: Shape,
) -> Result<(Recovered, Scanned)> {
    let scanned = scan(file, seg, interval, shape).await?;
    let path = seg.log_path.clone();
    let (pos, file_len) = (scanned.end, scanned.file_len);
    let mut done = Recovered::default();
    match &scanned.tail {
        Tail::Clean => {}
        Tail::Padding => file.truncate(pos).await.map_err(|e| StorageError::io(&path, e))?,
        Tail::Torn(reason) => {
            file.truncate(pos).await.map_err(|e| StorageError::io(&path, e))?;
            let t = Trimmed {
                position: pos,
                bytes_dropped: file_len - pos,
                reason: reason.clone(),
            };
            tracing::warn!(
                file = %path.display(),
                position = t.position,
                bytes_dropped = t.bytes_dropped,
                reason = %t.reason,
                "recovery trimmed a torn tail"
            );
            done.trimmed = Some(t);
        }
        Tail::Damaged { reason, lost } => {
            metrics::counter!("es_storage_corruptions_total", "found" => "recovery").increment(1);
            let what = format!(
                "corrupt data at byte {pos} of {} bytes ({reason}): {lost}",
                file_len
            );
            if !accept_data_loss() {
                tracing::error!(
                    file = %path.display(),
                    position = pos,
                    bytes = file_len - pos,
                    %reason,
                    offsets_lost = %format!("{}..{}", lost.from, lost.to),
                    intact_batches = lost.intact_batches,
                    intact_records = lost.intact_records,
                    "corrupt data in a segment: refusing to open the partition (nothing changed)"
                );
                return Err(StorageError::DataLoss {
                    path: path.clone(),
                    what,
                });
            }
            let copy = quarantine(file, &path, pos, file_len).await?;
            file.truncate(pos).await.map_err(|e| StorageError::io(&path, e))?;
            tracing::error!(
                file = %path.display(),
                position = pos,
                bytes = file_len - pos,
                %reason,
                offsets_lost = %format!("{}..{}", lost.from, lost.to),
                intact_batches = lost.intact_batches,
                intact_records = lost.intact_records,
                copy = %copy.display(),
                "corrupt data quarantined and cut off (data loss accepted): new records start past the offsets lost"
            );
            done.trimmed = Some(Trimmed {
                position: pos,
                bytes_dropped: file_len - pos,
                reason: reason.clone(),
            });
            done.quarantined = Some(Quarantined {
                log: path.clone(),
                position: pos,
                bytes: file_len - pos,
                copy,
                reason: reason.clone(),
                lost: lost.clone(),
            });
        }
    }
    file.fdatasync().await.map_err(|e| StorageError::io(&path, e))?;
    Ok((done, scanned))
}

/// Copies `[pos, len)` of the log at `path` to `<path>.corrupt-<unix ms>`,
/// fdatasyncs it and the directory, and returns the copy's path.
async fn quarantine(file: &BufferedFile, path: &Path, pos: u64, len: u64) -> Result<PathBuf> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".corrupt-{ms}"));
    let copy = PathBuf::from(name);
    let out = BufferedFile::create(&copy)
        .await
        .map_err(|e| StorageError::io(&copy, e))?;
    let mut at = pos;
    while at < len {
        let n = ((len - at) as usize).min(SCAN_CHUNK_BYTES);
        let bytes = files::read_exact(file, path, at, n).await?;
        if bytes.len() < n {
            return Err(StorageError::Corrupt {
                path: path.to_path_buf(),
                position: at + bytes.len() as u64,
                reason: "the file ended while it was copied aside".into(),
            });
        }
        files::write_all(&out, &copy, bytes, at - pos).await?;
        at += n as u64;
        glommio::yield_if_needed().await;
    }
    out.fdatasync().await.map_err(|e| StorageError::io(&copy, e))?;
    out.close().await.map_err(|e| StorageError::io(&copy, e))?;
    if let Some(dir) = path.parent() {
        dirs::sync_dir(dir).await?;
    }
    Ok(copy)
}
