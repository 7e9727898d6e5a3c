//! Where a scan stopped short of the end of a log: a torn tail or
//! corruption? Corruption is damage with valid-looking batches after it (a
//! header that parses and a checksum that holds, where a batch can begin),
//! or any damage in a segment that has a successor.
//!
//! Why bytes past the log's end are never taken for a batch: the only
//! bytes there that a client chose are early pages (storage's `early.rs`),
//! and those start at least [`HEADER_BYTES`] past every batch boundary the
//! log has written. So at the end of the log a scan finds the writer's
//! zeros and stops there without looking further; where it skips a damaged
//! batch by its stated length it lands on a boundary the log wrote. Only
//! where that end holds no batch (or the header does not parse) does it
//! search the bytes after the damage, and there it takes only a batch whose
//! offsets fit the ones the damage took (see `find_after`).

use crate::batch::{BatchHeader, HEADER_BYTES, MAGIC, RECORD_OVERHEAD_BYTES};
use crate::layout::MAGIC_V2;
use crate::scan::{batch, header, is_writers_end, Shape, Source, Tail};
use crate::Offset;

/// Bytes looked at per step while searching past damage.
const SEARCH_CHUNK_BYTES: usize = 1 << 20;

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

/// The chain of batches stopped at `pos` (where offset `next` was due) for
/// `reason`: a torn tail or corruption?
pub(crate) async fn classify<S: Source>(
    src: &mut S,
    next: Offset,
    pos: u64,
    reason: String,
    shape: Shape,
) -> Result<Tail, S::Error> {
    let mut lost = Lost {
        from: next,
        to: shape.end.unwrap_or(next).max(next),
        intact_batches: 0,
        intact_records: 0,
        intact_offsets: None,
    };
    let mut found = find_after(src, pos, next, shape).await?;
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
        found = match batch(src, end).await? {
            Some(n) if n.base_offset >= due && fits(&n, shape) => Some((end, n)),
            _ if end >= src.len() => None,
            _ => find_after(src, end, due, shape).await?,
        };
        src.pause().await;
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
async fn find_after<S: Source>(
    src: &mut S,
    pos: u64,
    due: Offset,
    shape: Shape,
) -> Result<Option<(u64, BatchHeader)>, S::Error> {
    if shape.last && is_writers_end(src, pos).await? {
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
    let header = header(src, pos).await?;
    if let Some(h) = header {
        let end = pos + h.batch_len as u64;
        if let Some(n) = batch(src, end).await? {
            if within(end, &n) {
                return Ok(Some((end, n)));
            }
        }
    }
    // In the last segment, past a header that parses (its length is what
    // is wrong, or the batch is torn and these are its own bytes), only
    // the batch that header says comes next.
    let exact = header.filter(|_| shape.last).map(|h| h.next_offset());
    search(src, pos + 1, |at, n| {
        within(at, n) && exact.is_none_or(|x| n.base_offset == x)
    })
    .await
}

/// The first position at or after `from` where a batch header parses, the
/// batch fits the log, `plausible` accepts it and its checksum holds.
async fn search<S: Source>(
    src: &mut S,
    from: u64,
    plausible: impl Fn(u64, &BatchHeader) -> bool,
) -> Result<Option<(u64, BatchHeader)>, S::Error> {
    let mut pos = from;
    let len = src.len();
    while pos + HEADER_BYTES as u64 <= len {
        let chunk = src.get(pos, SEARCH_CHUNK_BYTES).await?;
        // Positions whose header lies whole in this chunk.
        let starts = (chunk.len() + 1).saturating_sub(HEADER_BYTES);
        if starts == 0 {
            break; // the source gave less than it has: nothing to find
        }
        let mut candidate = None;
        for i in 0..starts {
            if !matches!(chunk.get(i + 16), Some(&MAGIC | &MAGIC_V2)) {
                continue;
            }
            let Some(Ok(h)) = chunk.get(i..).map(BatchHeader::parse) else {
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
                if let Some(h) = batch(src, at).await? {
                    return Ok(Some((at, h)));
                }
                pos = at + 1;
            }
            None => pos += starts as u64,
        }
        src.pause().await;
    }
    Ok(None)
}
