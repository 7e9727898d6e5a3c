//! Crash recovery of one segment: scan its batches from the start, stop at
//! the first torn or checksum-bad batch, and tell a torn tail (trimmed)
//! from corruption (quarantined, or refused).
//!
//! **Torn tail**: damage that runs to the end of the last segment, as a
//! crash in the middle of a write leaves it: a partial last batch, the
//! zeros a direct writer pads its last page with, bytes past the log's end
//! (a batch still arriving when the broker died: early writes). Trimmed,
//! logged at warn.
//!
//! **Corruption**: damage with valid-looking batches after it (a batch
//! whose header parses and whose checksum holds, where one can begin), or
//! any damage in a segment that has a successor (it was fsynced whole
//! before its successor existed: no crash can tear it). Cutting it would
//! drop acknowledged records, so the partition refuses to open (nothing is
//! changed on disk) unless recovery may drop data
//! ([`set_accept_data_loss`]): then the bytes from the damage on are copied
//! to `<base>.log.corrupt-<unix ms>` (fsynced, and the directory) before
//! the log is cut there, and the offsets they held are never given to new
//! records. Logged at error level and counted in
//! `es_storage_corruptions_total{found="recovery"}` either way.
//!
//! Why bytes past the log's end are never taken for a batch: the only
//! bytes there that a client chose are early pages (`early.rs`), and those
//! start at least [`HEADER_BYTES`] past every batch boundary the log has
//! written (the write loop cuts a void early write's pages off before the
//! log grows near them: `cut_stale_early` in `log/write_loop.rs`). So at the
//! end of the log recovery finds the writer's zeros, and stops there
//! without looking further; where it skips a damaged batch by its stated
//! length it lands on a boundary the log wrote. Only where that end holds no batch (or the header does not
//! parse) does it search the bytes after the damage, and there it takes
//! only a batch whose offsets fit the ones the damage took (see
//! `find_after`).

use std::cell::Cell;
use std::path::{Path, PathBuf};

use glommio::io::BufferedFile;

use crate::batch::{self, BatchError, BatchHeader, HEADER_BYTES, MAGIC, RECORD_OVERHEAD_BYTES};
use crate::io::dirs;
use crate::io::files;
use crate::io::page_buf::{page_floor, PAGE_BYTES};
use crate::limits::SCAN_CHUNK_BYTES;
use crate::log::segment::Segment;
use crate::{Offset, Result, StorageError};

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

/// The offsets a damaged stretch of a segment held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lost {
    /// The first offset no longer in the log: the damaged batch's.
    pub from: Offset,
    /// The offset after the last one lost: new records start here (or, in
    /// a sealed segment, the next segment does).
    pub to: Offset,
    /// Batches after the damage that still check out (header and
    /// checksum), and the records they hold.
    pub intact_batches: u64,
    pub intact_records: u64,
    /// The first and last offset of those batches.
    pub intact_offsets: Option<(Offset, Offset)>,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "offsets {}..{}", self.from, self.to)?;
        match self.intact_offsets {
            Some((first, last)) => write!(
                f,
                " ({} intact-looking batches of {} records after the damage, offsets {first}..={last})",
                self.intact_batches, self.intact_records
            ),
            None => write!(f, " (no intact batch after the damage)"),
        }
    }
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

/// What is known of the segment being scanned.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Shape {
    /// The last segment of the partition: the only one a crash can tear.
    pub last: bool,
    /// Where the segment's offsets end, when known (the next segment's
    /// base, or its index footer's `next_offset`).
    pub end: Option<Offset>,
}

/// How the batches of a scanned log end.
#[derive(Clone, Debug)]
pub(crate) enum Tail {
    /// With the file.
    Clean,
    /// With a direct writer's zero padding: under a page of zeros ending
    /// the file on a page boundary. Nothing written is lost by cutting it.
    Padding,
    /// With a torn tail: nothing valid after it.
    Torn(String),
    /// With corruption.
    Damaged { reason: String, lost: Lost },
}

/// A scan's outcome: the segment holds the batches before `end`.
#[derive(Clone, Debug)]
pub(crate) struct Scanned {
    pub end: u64,
    pub file_len: u64,
    pub tail: Tail,
    /// The batches' offsets had gaps (compaction leaves them), so the
    /// segment's last batch may end before the segment's offsets do.
    pub gaps: bool,
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

    /// The batch header at `pos`, if one parses there.
    async fn header(&mut self, pos: u64) -> Result<Option<BatchHeader>> {
        if pos + HEADER_BYTES as u64 > self.len {
            return Ok(None);
        }
        Ok(BatchHeader::parse(self.get(pos, HEADER_BYTES).await?).ok())
    }

    /// The whole, checksum-valid batch at `pos`, if there is one.
    async fn batch(&mut self, pos: u64) -> Result<Option<BatchHeader>> {
        let Some(h) = self.header(pos).await? else {
            return Ok(None);
        };
        if pos + h.batch_len as u64 > self.len {
            return Ok(None);
        }
        Ok(batch::check(self.get(pos, h.batch_len as usize).await?).ok())
    }

    /// Whether `[pos, end)` (clipped to the file) is all zeros.
    async fn zeros(&mut self, pos: u64, end: u64) -> Result<bool> {
        let end = end.min(self.len);
        if end <= pos {
            return Ok(true);
        }
        Ok(self.get(pos, (end - pos) as usize).await?[..(end - pos) as usize]
            .iter()
            .all(|&b| b == 0))
    }

    /// Whether `[pos, len)` is the zero padding a direct write leaves
    /// after the last batch (`writer.rs`): less than a page, all zeros,
    /// ending the file on a page boundary.
    async fn is_padding(&mut self, pos: u64) -> Result<bool> {
        Ok(self.len.is_multiple_of(PAGE_BYTES)
            && self.len - pos < PAGE_BYTES
            && self.zeros(pos, self.len).await?)
    }

    /// Whether the log ends at `pos` as its writer leaves an end: zeros
    /// from `pos` to the end of its page, and at least a header's worth.
    /// A batch never starts with a header's worth of zeros (its length is
    /// not zero), and early pages never start that close to a batch
    /// boundary (`early.rs`).
    async fn is_writers_end(&mut self, pos: u64) -> Result<bool> {
        let end = (pos + HEADER_BYTES as u64).max(page_floor(pos) + PAGE_BYTES);
        self.zeros(pos, end).await
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
    let mut pos = 0u64; // end of the last valid batch
    let mut gaps = false;
    let stop_reason: Option<String> = loop {
        if pos == win.len {
            break None;
        }
        let have = (win.len - pos).min(HEADER_BYTES as u64) as usize;
        let needed = match BatchHeader::parse(win.get(pos, have).await?) {
            Ok(h) => h.batch_len as u64,
            Err(BatchError::Incomplete { needed, .. }) => needed as u64,
            Err(BatchError::Malformed(reason)) => break Some(reason),
        };
        if pos + needed > win.len {
            break Some(format!(
                "torn batch: needs {needed} bytes, file has {}",
                win.len - pos
            ));
        }
        match batch::check(win.get(pos, needed as usize).await?) {
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
                gaps |= h.base_offset > seg.next_offset || h.record_count <= h.last_offset_delta;
                seg.note_batch(&h, pos, interval);
                pos += h.batch_len as u64;
            }
            Err(e) => break Some(e.to_string()),
        }
        glommio::yield_if_needed().await;
    };
    seg.written_bytes = seg.dirty_bytes;
    let file_len = win.len;
    let tail = match stop_reason {
        None => Tail::Clean,
        Some(_) if win.is_padding(pos).await? => Tail::Padding,
        Some(reason) => classify(&mut win, seg.next_offset, pos, reason, shape).await?,
    };
    Ok(Scanned {
        end: pos,
        file_len,
        tail,
        gaps,
    })
}

/// The chain of batches stopped at `pos` (where offset `next` was due) for
/// `reason`: a torn tail or corruption?
async fn classify(
    win: &mut Window<'_>,
    next: Offset,
    pos: u64,
    reason: String,
    shape: Shape,
) -> Result<Tail> {
    let mut lost = Lost {
        from: next,
        to: shape.end.unwrap_or(next).max(next),
        intact_batches: 0,
        intact_records: 0,
        intact_offsets: None,
    };
    let mut found = find_after(win, pos, next, shape).await?;
    if found.is_none() {
        return Ok(if shape.last {
            Tail::Torn(reason)
        } else {
            Tail::Damaged { reason, lost }
        });
    }
    // Walk what is left, batch by batch, searching again past each break.
    while let Some((at, h)) = found {
        lost.intact_batches += 1;
        lost.intact_records += h.record_count as u64;
        let first = lost.intact_offsets.map_or(h.base_offset, |(first, _)| first);
        lost.intact_offsets = Some((first, h.last_offset()));
        lost.to = lost.to.max(h.next_offset());
        let (end, due) = (at + h.batch_len as u64, h.next_offset());
        found = match win.batch(end).await? {
            Some(n) if n.base_offset >= due && fits(&n, shape) => Some((end, n)),
            _ if end >= win.len => None,
            _ => find_after(win, end, due, shape).await?,
        };
        glommio::yield_if_needed().await;
    }
    Ok(Tail::Damaged { reason, lost })
}

/// Whether batch `h` ends within the segment's offsets, when they are known.
fn fits(h: &BatchHeader, shape: Shape) -> bool {
    shape.end.is_none_or(|end| h.next_offset() <= end)
}

/// The first valid-looking batch after the damage at `pos`, where offset
/// `due` was due, if any: where the batch at `pos` says it ends, when its
/// header parses; else the first position past `pos` where a batch checks
/// out and its offsets fit what the damage can have held.
///
/// Every batch taken starts at or past `due` and ends within the
/// segment's offsets. In the last segment, bytes at or past a damaged
/// batch may be ones a client chose (the body of a batch a crash tore,
/// early pages), so more must fit: nothing is searched past the writer's
/// end of the log (zeros); a batch's base offset lies at most one offset
/// per smallest record (`RECORD_OVERHEAD_BYTES`) of the bytes skipped past
/// `due`; and when the search runs past a header that parses, only the
/// batch starting at the offset that header says comes next counts. In a
/// sealed segment every byte lies in a batch the log wrote whole.
async fn find_after(
    win: &mut Window<'_>,
    pos: u64,
    due: Offset,
    shape: Shape,
) -> Result<Option<(u64, BatchHeader)>> {
    if shape.last && win.is_writers_end(pos).await? {
        return Ok(None);
    }
    // Offsets a batch found at `at` may start at: past `due`, within the
    // segment's, and in the last segment at most one offset per smallest
    // record of the bytes skipped.
    let within = |at: u64, n: &BatchHeader| {
        n.base_offset >= due
            && fits(n, shape)
            && (!shape.last || n.base_offset.0 - due.0 <= (at - pos) / RECORD_OVERHEAD_BYTES as u64)
    };
    let header = win.header(pos).await?;
    if let Some(h) = header {
        let end = pos + h.batch_len as u64;
        if let Some(n) = win.batch(end).await? {
            if within(end, &n) {
                return Ok(Some((end, n)));
            }
        }
    }
    // In the last segment, past a header that parses (its length is what
    // is wrong, or the batch is torn and these are its own bytes), only
    // the batch that header says comes next.
    let exact = header.filter(|_| shape.last).map(|h| h.next_offset());
    search(win, pos + 1, |at, n| {
        within(at, n) && exact.is_none_or(|x| n.base_offset == x)
    })
    .await
}

/// The first position at or after `from` where a batch header parses, the
/// batch fits the file, `plausible` accepts it and its checksum holds.
async fn search(
    win: &mut Window<'_>,
    from: u64,
    plausible: impl Fn(u64, &BatchHeader) -> bool,
) -> Result<Option<(u64, BatchHeader)>> {
    let mut pos = from;
    while pos + HEADER_BYTES as u64 <= win.len {
        let len = win.len;
        let chunk = win.get(pos, SCAN_CHUNK_BYTES).await?;
        // Positions whose header lies whole in this chunk.
        let starts = chunk.len() + 1 - HEADER_BYTES;
        let mut candidate = None;
        for i in 0..starts {
            if chunk[i + 16] != MAGIC {
                continue;
            }
            let Ok(h) = BatchHeader::parse(&chunk[i..]) else {
                continue;
            };
            let at = pos + i as u64;
            if at + h.batch_len as u64 <= len && plausible(at, &h) {
                candidate = Some(i);
                break;
            }
        }
        match candidate {
            Some(i) => {
                let at = pos + i as u64;
                if let Some(h) = win.batch(at).await? {
                    return Ok(Some((at, h)));
                }
                pos = at + 1;
            }
            None => pos += starts as u64,
        }
        glommio::yield_if_needed().await;
    }
    Ok(None)
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
