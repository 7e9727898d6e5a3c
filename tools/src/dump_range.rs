//! `dump`'s offset and time ranges: whole batches are kept, from the first
//! batch that overlaps the range to the last that does (a superset of the
//! records asked for; `partition.json` records what was kept). A batch
//! overlaps `--from-offset F --to-offset T` (both inclusive) when its last
//! offset is at least F and its base at most T; it overlaps
//! `--from-time A --to-time B` when its max timestamp is at least A and
//! its first timestamp at most B. A segment cut at its front is named by
//! its first kept batch's base offset.

use es_format::batch::BatchHeader;
use es_format::scan::Shape;
use es_format::Offset;

use crate::dump_plan::SegPlan;
use crate::segscan::scan_file;

/// The range asked for; all `None` keeps everything.
#[derive(Copy, Clone, Debug, Default, serde::Serialize)]
pub struct Range {
    pub from_offset: Option<u64>,
    pub to_offset: Option<u64>,
    pub from_time: Option<i64>,
    pub to_time: Option<i64>,
    /// Re-encode the boundary batches with only the records in range
    /// (`dump_exact.rs`).
    pub exact: bool,
}

impl Range {
    pub fn is_all(&self) -> bool {
        self.from_offset.is_none()
            && self.to_offset.is_none()
            && self.from_time.is_none()
            && self.to_time.is_none()
    }

    /// Whether a record at `offset` stamped `ts` is in the range.
    pub fn holds(&self, offset: u64, ts: i64) -> bool {
        self.from_offset.is_none_or(|f| offset >= f)
            && self.to_offset.is_none_or(|t| offset <= t)
            && self.from_time.is_none_or(|f| ts >= f)
            && self.to_time.is_none_or(|t| ts <= t)
    }

    /// Whether `h` holds records in the range (a zero-width control batch
    /// of a replicated log holds none).
    fn overlaps(&self, h: &BatchHeader) -> bool {
        !h.is_control()
            && self.from_offset.is_none_or(|f| h.last_offset().0 >= f)
            && self.to_offset.is_none_or(|t| h.base_offset.0 <= t)
            && self.from_time.is_none_or(|f| h.max_timestamp_ms >= f)
            && self.to_time.is_none_or(|t| h.first_timestamp_ms <= t)
    }
}

/// The batches of `s` within its first `s.bytes` bytes: `(position, header)`.
pub fn each_batch(s: &SegPlan, mut each: impl FnMut(u64, &BatchHeader)) -> std::io::Result<()> {
    let shape = Shape {
        last: false,
        end: None,
    };
    let limit = s.start + s.bytes;
    scan_file(&s.seg.log, s.file_base, shape, |h, pos| {
        if pos >= s.start && pos + h.batch_len as u64 <= limit {
            each(pos, h);
        }
    })?;
    Ok(())
}

/// Keeps, of a partition's segments in offset order, the batches from the
/// first that overlaps `range` to the last that does, and (a replicated
/// partition's log, version 2) on to the end of that batch's Raft entry:
/// a restored log ends with a whole entry (recovery would trim one cut
/// short). An entry never spans segments.
pub fn apply(range: &Range, segs: Vec<SegPlan>) -> std::io::Result<Vec<SegPlan>> {
    if range.is_all() {
        return Ok(segs);
    }
    // (segment, position) of the first and (segment, end) of the last overlapping batch.
    let mut first: Option<(usize, u64)> = None;
    let mut last: Option<(usize, u64)> = None;
    for (i, s) in segs.iter().enumerate() {
        // The last batch kept did not end its entry: keep on to its end.
        let mut in_entry = false;
        each_batch(s, |pos, h| {
            if range.overlaps(h) {
                first.get_or_insert((i, pos));
            } else if !in_entry {
                return;
            }
            last = Some((i, pos + h.batch_len as u64));
            in_entry = !h.ends_entry();
        })?;
    }
    let (Some((fi, fpos)), Some((li, lend))) = (first, last) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (i, mut s) in segs.into_iter().enumerate() {
        if i < fi || i > li {
            continue;
        }
        let start = if i == fi { fpos } else { s.start };
        let end = if i == li { lend } else { s.start + s.bytes };
        if start != s.start || end != s.start + s.bytes {
            recount(&mut s, start, end, i == li)?;
        }
        out.push(s);
    }
    if range.exact {
        crate::dump_exact::apply(range, &mut out)?;
    }
    Ok(out)
}

/// `s` cut to `[start, end)`: its summary made that of the batches kept.
fn recount(s: &mut SegPlan, start: u64, end: u64, cut_end: bool) -> std::io::Result<()> {
    let mut st = Stats::default();
    s.bytes = end - s.start;
    each_batch(s, |pos, h| {
        if pos >= start {
            st.add(h);
        }
    })?;
    s.start = start;
    s.bytes = end - start;
    st.apply(s, cut_end);
    Ok(())
}

/// A summary of batches, in order.
#[derive(Debug)]
pub struct Stats {
    batches: u64,
    records: u64,
    first_base: Option<Offset>,
    last: Option<Offset>,
    next: Option<Offset>,
    max_ts: i64,
    first_ts: Option<i64>,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            batches: 0,
            records: 0,
            first_base: None,
            last: None,
            next: None,
            max_ts: i64::MIN,
            first_ts: None,
        }
    }
}

impl Stats {
    pub fn add(&mut self, h: &BatchHeader) {
        self.batches += 1;
        self.records += h.record_count as u64;
        self.first_base.get_or_insert(h.base_offset);
        self.first_ts.get_or_insert(h.first_timestamp_ms);
        self.last = Some(h.last_offset());
        self.next = Some(h.next_offset());
        self.max_ts = self.max_ts.max(h.max_timestamp_ms);
    }

    /// Makes `s`'s summary this one; its name the first batch's base; with
    /// `cut_end`, its offsets end after the last batch.
    pub fn apply(&self, s: &mut SegPlan, cut_end: bool) {
        s.seg.batches = self.batches;
        s.seg.records = self.records;
        s.seg.first_offset = self.first_base;
        s.seg.last_offset = self.last;
        s.seg.max_timestamp_ms = self.max_ts;
        s.seg.first_timestamp_ms = self.first_ts;
        if let Some(f) = self.first_base {
            s.seg.base = f;
        }
        if cut_end {
            s.seg.end_offset = self.next.unwrap_or(s.seg.base);
        }
    }
}
