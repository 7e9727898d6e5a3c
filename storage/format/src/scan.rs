//! Scanning a segment's log: its valid batches, where they end, and
//! whether what follows is a torn tail (trimmed by recovery) or corruption.
//! One implementation for the broker's recovery (over its glommio file)
//! and the offline tools (over a std file): the rules live here, pure; the
//! bytes come through [`Source`].
//!
//! A scan reads batches from byte 0 and stops at the first that is torn
//! (header or `batch_len` past the end of the file), fails the header
//! checks or the checksum, goes backwards (base offset below the expected
//! next offset; gaps are allowed), or does not fit the segment's u32
//! offsets. What follows the stop is classified (`scan_damage.rs`):
//!
//! - **padding**: under a page of zeros ending the file on a page boundary,
//!   a direct writer's; nothing is lost by cutting it;
//! - **torn tail**: damage running to the end of the **last** segment with
//!   no valid batch after it: what a crash in the middle of a write leaves;
//! - **corruption**: valid-looking batches after the damage, or any damage
//!   in a segment that has a successor.
//!
//! Version 2 batches (a replicated partition's) are Raft entries: runs of
//! batches with one `(term, index)`, the last marked `ENTRY_END`. Their
//! stamps never go backwards (a stamp below the last one stops the scan as
//! a bad checksum would), and a run cut short by a crash is no entry: the
//! scan ends after the last whole entry, and in the last segment what
//! follows is a torn tail ("incomplete entry"). Its batches are not handed
//! to `note`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::batch::{check, BatchError, BatchHeader, HEADER_BYTES, HEADER_V2_BYTES};
use crate::Offset;

pub use crate::scan_damage::Lost;

/// Direct I/O alignment: the page a direct writer pads its last write to.
pub const PAGE_BYTES: u64 = 4096;

/// The bytes of one segment's log, read by position.
///
/// Its futures are not `Send`: a source lives on one thread (a shard's
/// file, or a blocking reader whose futures are ready at once).
#[allow(async_fn_in_trait)]
pub trait Source {
    type Error;
    /// The length of the log.
    fn len(&self) -> u64;
    /// Whether the log has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes from `pos` on, at least `want` of them where the log has
    /// them (fewer only at its end).
    async fn get(&mut self, pos: u64, want: usize) -> Result<&[u8], Self::Error>;
    /// Gives the executor a turn in a long scan; nothing for a plain reader.
    async fn pause(&mut self) {}
}

/// A log held in memory.
#[derive(Copy, Clone, Debug)]
pub struct SliceSource<'a>(pub &'a [u8]);

impl Source for SliceSource<'_> {
    type Error = std::convert::Infallible;
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    async fn get(&mut self, pos: u64, _want: usize) -> Result<&[u8], Self::Error> {
        Ok(usize::try_from(pos)
            .ok()
            .and_then(|p| self.0.get(p..))
            .unwrap_or_default())
    }
}

/// Runs a future whose every await is ready at once (a scan over a
/// [`SliceSource`] or a blocking reader) on this thread.
pub fn block_on_ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// What is known of the segment being scanned.
#[derive(Copy, Clone, Debug)]
pub struct Shape {
    /// The last segment of the partition: the only one a crash can tear.
    pub last: bool,
    /// Where the segment's offsets end, when known (the next segment's
    /// base, or its index footer's `next_offset`).
    pub end: Option<Offset>,
}

/// How the batches of a scanned log end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tail {
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
pub struct Scanned {
    pub end: u64,
    pub file_len: u64,
    pub tail: Tail,
    /// The offset after the last valid batch (the base when none).
    pub next_offset: Offset,
    /// The batches' offsets had gaps (compaction leaves them), so the
    /// segment's last batch may end before the segment's offsets do.
    pub gaps: bool,
}

impl Scanned {
    /// Why the scan stopped before the end of the file, if it did.
    pub fn reason(&self) -> Option<&str> {
        match &self.tail {
            Tail::Clean | Tail::Padding => None,
            Tail::Torn(r) | Tail::Damaged { reason: r, .. } => Some(r),
        }
    }
}

/// Scans the log of the segment starting at `base`, handing every valid
/// batch and its position to `note`, in order, and says how its batches
/// end. Reads only.
pub async fn scan<S: Source>(
    src: &mut S,
    base: Offset,
    shape: Shape,
    mut note: impl FnMut(&BatchHeader, u64),
) -> Result<Scanned, S::Error> {
    let len = src.len();
    let mut pos = 0u64; // end of the last valid batch
    let mut next = base;
    let mut gaps = false;
    // Version 2: the last stamp seen, and the batches of an entry whose
    // `ENTRY_END` is not seen yet (noted once it is).
    let mut last_stamp: Option<(u64, u64, bool)> = None;
    let mut open_entry: Vec<(BatchHeader, u64)> = Vec::new();
    let mut entry_start = (0u64, base);
    let stop_reason: Option<String> = loop {
        if pos == len {
            break None;
        }
        let needed = match parse_at(src, pos).await? {
            Ok(h) => h.batch_len as u64,
            Err(BatchError::Incomplete { needed, .. }) => needed as u64,
            Err(BatchError::Malformed(reason)) => break Some(reason),
        };
        if pos + needed > len {
            break Some(format!(
                "torn batch: needs {needed} bytes, file has {}",
                len - pos
            ));
        }
        match check(src.get(pos, needed as usize).await?) {
            Ok(h) => {
                if h.base_offset < next {
                    break Some(format!(
                        "batch base offset {} is below the expected {next}",
                        h.base_offset
                    ));
                }
                if h.next_offset().0 - base.0 > u32::MAX as u64 {
                    break Some("batch offsets do not fit the segment".into());
                }
                if let Err(reason) = stamp_follows(last_stamp, &h) {
                    break Some(reason);
                }
                gaps |= !h.is_control() && (h.base_offset > next || h.record_count <= h.last_offset_delta);
                if h.ends_entry() {
                    for (b, at) in open_entry.drain(..) {
                        note(&b, at);
                    }
                    note(&h, pos);
                } else {
                    if open_entry.is_empty() {
                        entry_start = (pos, next);
                    }
                    open_entry.push((h, pos));
                }
                last_stamp = h.raft.map(|r| (r.term, r.index, r.entry_end));
                next = h.next_offset();
                pos += h.batch_len as u64;
            }
            Err(e) => break Some(e.to_string()),
        }
        src.pause().await;
    };
    let tail = match stop_reason {
        None => Tail::Clean,
        Some(_) if is_padding(src, pos).await? => Tail::Padding,
        Some(reason) => crate::scan_damage::classify(src, next, pos, reason, shape).await?,
    };
    if let Some((first, _)) = open_entry.first() {
        // A crash cut an entry short: the log ends before it.
        let stamp = first.raft.unwrap_or_default();
        let reason = format!(
            "incomplete entry: term {} index {} has {} batches without ENTRY_END",
            stamp.term,
            stamp.index,
            open_entry.len()
        );
        (pos, next) = entry_start;
        let tail = match tail {
            Tail::Damaged { .. } => tail,
            _ if shape.last => Tail::Torn(reason),
            _ => crate::scan_damage::classify(src, next, pos, reason, shape).await?,
        };
        return Ok(Scanned {
            end: pos,
            file_len: len,
            tail,
            next_offset: next,
            gaps,
        });
    }
    Ok(Scanned {
        end: pos,
        file_len: len,
        tail,
        next_offset: next,
        gaps,
    })
}

/// The header at `pos`, parsed from as many bytes as its version needs.
async fn parse_at<S: Source>(src: &mut S, pos: u64) -> Result<Result<BatchHeader, BatchError>, S::Error> {
    let len = src.len();
    let have = (len - pos).min(HEADER_BYTES as u64) as usize;
    match BatchHeader::parse(src.get(pos, have).await?) {
        Err(BatchError::Incomplete { needed, .. })
            if needed <= HEADER_V2_BYTES && pos + needed as u64 <= len =>
        {
            Ok(BatchHeader::parse(src.get(pos, needed).await?))
        }
        other => Ok(other),
    }
}

/// Whether a batch's Raft stamp may follow `last` (term, index, entry end
/// of the batch before it): stamps never go backwards, a batch after an
/// unfinished entry belongs to it, and version 1 batches are not mixed in
/// an entry. Version 1 batches after version 1 batches always may.
fn stamp_follows(last: Option<(u64, u64, bool)>, h: &BatchHeader) -> Result<(), String> {
    let Some(r) = h.raft else {
        return match last {
            Some((t, i, false)) => Err(format!("a version 1 batch inside entry {t}/{i}")),
            _ => Ok(()),
        };
    };
    let Some((term, index, ended)) = last else {
        return Ok(());
    };
    let bad = |why: &str| {
        Err(format!(
            "raft stamp {}/{} after {term}/{index}: {why}",
            r.term, r.index
        ))
    };
    if !ended {
        if (r.term, r.index) != (term, index) {
            return bad("the entry before it did not end");
        }
        return Ok(());
    }
    if r.index <= index || r.term < term {
        return bad("stamps go backwards");
    }
    Ok(())
}

/// `v` rounded down to a page boundary.
pub fn page_floor(v: u64) -> u64 {
    v & !(PAGE_BYTES - 1)
}

/// The batch header at `pos`, if one parses there.
pub(crate) async fn header<S: Source>(src: &mut S, pos: u64) -> Result<Option<BatchHeader>, S::Error> {
    if pos + HEADER_BYTES as u64 > src.len() {
        return Ok(None);
    }
    Ok(parse_at(src, pos).await?.ok())
}

/// The whole, checksum-valid batch at `pos`, if there is one.
pub(crate) async fn batch<S: Source>(src: &mut S, pos: u64) -> Result<Option<BatchHeader>, S::Error> {
    let Some(h) = header(src, pos).await? else {
        return Ok(None);
    };
    if pos + h.batch_len as u64 > src.len() {
        return Ok(None);
    }
    Ok(check(src.get(pos, h.batch_len as usize).await?).ok())
}

/// Whether `[pos, end)` (clipped to the log) is all zeros.
pub(crate) async fn zeros<S: Source>(src: &mut S, pos: u64, end: u64) -> Result<bool, S::Error> {
    let end = end.min(src.len());
    if end <= pos {
        return Ok(true);
    }
    let n = (end - pos) as usize;
    Ok(src
        .get(pos, n)
        .await?
        .get(..n)
        .is_some_and(|b| b.iter().all(|&b| b == 0)))
}

/// Whether `[pos, len)` is the zero padding a direct write leaves after
/// the last batch: less than a page, all zeros, ending the log on a page
/// boundary.
async fn is_padding<S: Source>(src: &mut S, pos: u64) -> Result<bool, S::Error> {
    let len = src.len();
    Ok(len.is_multiple_of(PAGE_BYTES) && len - pos < PAGE_BYTES && zeros(src, pos, len).await?)
}

/// Whether the log ends at `pos` as its writer leaves an end: zeros from
/// `pos` to the end of its page, and at least a header's worth. A batch
/// never starts with a header's worth of zeros (its length is not zero),
/// and early pages never start that close to a batch boundary.
pub(crate) async fn is_writers_end<S: Source>(src: &mut S, pos: u64) -> Result<bool, S::Error> {
    let end = (pos + HEADER_BYTES as u64).max(page_floor(pos) + PAGE_BYTES);
    zeros(src, pos, end).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{encode, ProducerStamp, Record};

    fn log(n: u64) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut at = Vec::new();
        for i in 0..n {
            at.push(out.len());
            let rec = Record {
                key: Some(vec![b'k']),
                value: vec![b'v'; 30],
                timestamp_ms: i as i64,
            };
            encode(Offset(100 + i), &[rec], ProducerStamp::NONE, &mut out);
        }
        (out, at)
    }

    fn run(bytes: &[u8], last: bool) -> (Scanned, Vec<u64>) {
        let mut seen = Vec::new();
        let shape = Shape { last, end: None };
        let s = block_on_ready(scan(&mut SliceSource(bytes), Offset(100), shape, |_, p| {
            seen.push(p)
        }));
        (s.unwrap_or_else(|e| match e {}), seen)
    }

    #[test]
    fn a_torn_last_batch_at_every_byte_is_a_torn_tail() {
        let (bytes, at) = log(3);
        let last = at[2];
        for cut in last + 1..bytes.len() {
            let (s, seen) = run(&bytes[..cut], true);
            assert_eq!((s.end, seen.len()), (last as u64, 2), "cut at {cut}");
            assert!(matches!(s.tail, Tail::Torn(_)), "cut at {cut}: {:?}", s.tail);
            assert_eq!(s.next_offset, Offset(102));
        }
        let (s, _) = run(&bytes, true);
        assert_eq!((s.tail, s.end), (Tail::Clean, bytes.len() as u64));
    }

    #[test]
    fn damage_with_batches_after_it_is_corruption() {
        let (mut bytes, at) = log(4);
        bytes[at[1] + 60] ^= 1;
        let (s, seen) = run(&bytes, true);
        assert_eq!(seen, vec![0]);
        match s.tail {
            Tail::Damaged { lost, .. } => {
                assert_eq!((lost.from, lost.intact_batches), (Offset(101), 2));
            }
            t => panic!("{t:?}"),
        }
        // In a segment with a successor even a damaged last batch is.
        let (bytes, at) = log(2);
        let (s, _) = run(&bytes[..at[1] + 10], false);
        assert!(matches!(s.tail, Tail::Damaged { .. }), "{:?}", s.tail);
    }

    #[test]
    fn a_writers_zero_padding_is_not_damage() {
        let (mut bytes, _) = log(2);
        let end = bytes.len();
        bytes.resize(PAGE_BYTES as usize, 0);
        let (s, seen) = run(&bytes, true);
        assert_eq!((s.tail, s.end, seen.len()), (Tail::Padding, end as u64, 2));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        use proptest::prelude::*;
        proptest!(|(bytes in proptest::collection::vec(any::<u8>(), 0..600), last: bool)| {
            let _ = run(&bytes, last);
        });
    }
}
