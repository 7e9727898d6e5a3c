//! `SegmentSet`: the segments of a partition's hot tier, by base offset,
//! and the only way to change which segments there are. Lives on the shard
//! that owns the partition, inside its log's `Inner`.
//!
//! Invariants, asserted by every named mutation on what it changed (and on
//! the whole set when it is made):
//!
//! 1. **One segment at least**: the last is the active segment, where
//!    appends go.
//! 2. **Ordered, not overlapping**: each segment is filed under its own
//!    base; bases strictly increase; a segment's offsets end at or before
//!    the next one's base (`next_offset <= next.base`: equal but where
//!    compaction dropped a segment's last records, found at open), and the
//!    active segment's end is the log's next offset (`Inner` keeps them
//!    equal).
//! 3. **Created is a prefix**: a rolled segment's file is created by its
//!    first write, and writes go in order, so the first segment is created
//!    and no created segment follows one that is not.
//! 4. **Sealed means created**: a sealed segment's file and index are on
//!    disk and match.
//! 5. **Cleanup never takes the active segment**: retention and
//!    compaction remove only sealed segments before the last.
//!
//! Named mutations: [`roll`](SegmentSet::roll),
//! [`place_batch`](SegmentSet::place_batch),
//! [`set_writer`](SegmentSet::set_writer),
//! [`note_written`](SegmentSet::note_written),
//! [`seal_rolled`](SegmentSet::seal_rolled),
//! [`rewind`](SegmentSet::rewind),
//! [`load_index`](SegmentSet::load_index),
//! [`replace_rebuilt`](SegmentSet::replace_rebuilt),
//! [`replace_run`](SegmentSet::replace_run),
//! [`remove_oldest`](SegmentSet::remove_oldest),
//! [`take_after`](SegmentSet::take_after),
//! [`replace_cut`](SegmentSet::replace_cut),
//! [`replace_only`](SegmentSet::replace_only). Readers get `&Segment` only.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::BufferedFile;

use crate::batch::BatchHeader;
use crate::format::index::SparseIndex;
use crate::log::segment::{IndexState, Mark, Segment};
use crate::write::recent::RecentWrites;
use crate::write::writer::SegmentWriter;
use crate::Offset;

/// The hot segments of one partition (see the module doc).
#[derive(Debug)]
pub(crate) struct SegmentSet {
    map: BTreeMap<Offset, Segment>,
}

impl SegmentSet {
    /// The set of the segments `open` found (each filed under its base).
    pub fn new(map: BTreeMap<Offset, Segment>) -> SegmentSet {
        let set = SegmentSet { map };
        set.check_all();
        set
    }

    // ----- queries -----

    /// The active segment: the last one.
    pub fn active(&self) -> &Segment {
        self.map.values().next_back().expect("one segment at least")
    }

    /// The first segment: the hot tier's start.
    pub fn first(&self) -> &Segment {
        self.map.values().next().expect("one segment at least")
    }

    pub fn get(&self, base: Offset) -> Option<&Segment> {
        self.map.get(&base)
    }

    /// Segment `base`, which the caller knows is there.
    pub fn expect(&self, base: Offset) -> &Segment {
        self.map.get(&base).expect("the segment is in the set")
    }

    /// Whether `base` is still the segment `id` (it was not replaced or
    /// removed while a task awaited).
    pub fn is_same(&self, base: Offset, id: u64) -> bool {
        self.map.get(&base).is_some_and(|s| s.id == id)
    }

    /// The base of the segment holding `offset`, or the first one's if it
    /// is below them all.
    pub fn base_for(&self, offset: Offset) -> Offset {
        self.map
            .range(..=offset)
            .next_back()
            .map_or_else(|| self.first().base, |(b, _)| *b)
    }

    /// The base of the segment after `base`, if any.
    pub fn next_base(&self, base: Offset) -> Option<Offset> {
        self.map
            .range((Bound::Excluded(base), Bound::Unbounded))
            .next()
            .map(|(b, _)| *b)
    }

    /// The segment before `base`, if any.
    pub fn before(&self, base: Offset) -> Option<&Segment> {
        self.map.range(..base).next_back().map(|(_, s)| s)
    }

    /// The last segment whose file exists (the active one, unless a roll
    /// waits for its first write).
    pub fn last_created(&self) -> &Segment {
        self.map
            .values()
            .rev()
            .find(|s| s.created)
            .expect("a partition has a created segment")
    }

    /// Segments, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Segment> {
        self.map.values()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Bytes written to every segment's log, the active one included.
    pub fn written_bytes(&self) -> u64 {
        self.map.values().map(|s| s.written_bytes).sum()
    }

    // ----- mutations of the appends and the write loop -----

    /// Starts a new active segment at `base` (the log's next offset) after
    /// the active one, which is not empty: its file is created by the
    /// write loop's first write to it ([`seal_rolled`](SegmentSet::seal_rolled)).
    /// The old active segment is not closed (not for cleanup) until the
    /// writer has sealed it.
    pub fn roll(&mut self, dir: &Path, base: Offset) {
        let old = self.active_mut();
        assert!(!old.is_empty(), "only a segment with batches rolls");
        assert_eq!(
            old.next_offset, base,
            "a rolled segment starts where the log ends"
        );
        old.sealed = false;
        self.map.insert(base, Segment::empty(dir, base));
        self.check_around(base);
    }

    /// Accounts for a batch placed at `position` of the active segment
    /// (its bytes follow those before it); returns the segment's base.
    pub fn place_batch(&mut self, h: &BatchHeader, position: u64, interval: u32) -> Offset {
        let seg = self.active_mut();
        seg.note_batch(h, position, interval);
        seg.sealed = false;
        let base = seg.base;
        self.check_around(base);
        base
    }

    /// The writer of segment `base`, opened by the write loop's first write
    /// to it.
    pub fn set_writer(
        &mut self,
        base: Offset,
        written: u64,
        writer: Rc<SegmentWriter>,
        recent: Rc<RefCell<RecentWrites>>,
    ) {
        let seg = self.get_mut(base);
        assert!(seg.created, "a writer writes a created segment");
        assert_eq!(seg.written_bytes, written, "only the write loop writes");
        seg.writer = Some(writer);
        seg.recent = Some(recent);
    }

    /// A write of `len` bytes at `position` of segment `base` completed.
    pub fn note_written(&mut self, base: Offset, position: u64, len: u64) {
        let seg = self.get_mut(base);
        assert_eq!(seg.written_bytes, position, "writes land back to back");
        seg.written_bytes = position + len;
        assert!(seg.written_bytes <= seg.dirty_bytes, "written <= dirty");
    }

    /// The roll's last step, once rolled segment `base`'s file `file`
    /// exists: the segment before it is sealed (its log fsynced and its
    /// index written before) and drops its writer; `base` is created.
    /// Returns the sealed segment's id and its read handle, for the shard's
    /// cache of closed segments' files.
    pub fn seal_rolled(&mut self, base: Offset, file: Rc<BufferedFile>) -> (u64, Option<Rc<BufferedFile>>) {
        let closed = match self.map.range_mut(..base).next_back() {
            Some((_, s)) => {
                assert!(s.created, "a sealed segment is created");
                s.sealed = true;
                s.writer = None;
                s.recent = None;
                (s.id, s.file.take())
            }
            None => (0, None),
        };
        let seg = self.get_mut(base);
        assert!(!seg.created, "a rolled segment is created once");
        seg.file = Some(file);
        seg.created = true;
        self.check_around(base);
        closed
    }

    /// Refuses every batch placed from `mark` of segment `base` on, where
    /// the log was written up to `position` of it: the segments rolled
    /// after it go (none was created), its accounting goes back to `mark`,
    /// and a rolled segment that is then empty and was never created goes
    /// too (the one before it is active again). Returns the file to cut at
    /// `position` and its path, if `base` was created.
    pub fn rewind(&mut self, base: Offset, mark: Mark, position: u64) -> Option<(Rc<BufferedFile>, PathBuf)> {
        let later: Vec<Offset> = self
            .map
            .range((Bound::Excluded(base), Bound::Unbounded))
            .map(|(b, _)| *b)
            .collect();
        for b in later {
            let seg = self.map.remove(&b).expect("just listed");
            assert!(!seg.created, "no write reached a segment after a refused one");
        }
        let seg = self.get_mut(base);
        assert_eq!(
            seg.written_bytes, position,
            "the refused write starts at the written end"
        );
        seg.rewind(mark);
        if let Some(recent) = &seg.recent {
            assert_eq!(recent.borrow().end(), position, "a failed write holds nothing");
        }
        if seg.created {
            let file = seg.file.clone().expect("a created active segment is open");
            let cut = Some((file, seg.log_path.clone()));
            self.check_around(base);
            return cut;
        }
        assert!(
            seg.is_empty(),
            "only a rolled segment is created by its first write"
        );
        self.map.remove(&base);
        assert!(!self.map.is_empty(), "a rolled segment has one before it");
        self.check_around(base);
        None
    }

    /// The index file bytes of segment `base` as it stands (fully
    /// written), for sealing it.
    pub fn index_file_bytes(&mut self, base: Offset) -> Vec<u8> {
        self.get_mut(base).index_file_bytes()
    }

    // ----- mutations of reads -----

    /// Segment `base`'s index, read on first use, if it is still the
    /// segment `id`; `false` if it was replaced or removed meanwhile.
    pub fn load_index(&mut self, base: Offset, id: u64, loaded: SparseIndex) -> bool {
        match self.map.get_mut(&base) {
            Some(seg) if seg.id == id => {
                if matches!(seg.index, IndexState::OnDisk(_)) {
                    seg.index = IndexState::Loaded(loaded);
                }
                true
            }
            _ => false,
        }
    }

    /// Replaces sealed segment `base`, if it is still the segment `id`, by
    /// `fresh`, rebuilt from the same log: the read handle stays. Returns
    /// the new id (`None` if the segment was replaced or removed
    /// meanwhile).
    pub fn replace_rebuilt(&mut self, base: Offset, id: u64, fresh: Segment) -> Option<u64> {
        assert_eq!(fresh.base, base, "a rebuilt segment keeps its base");
        match self.map.get_mut(&base) {
            Some(slot) if slot.id == id => {
                let file = slot.file.take();
                *slot = fresh;
                if slot.file.is_none() {
                    slot.file = file;
                }
                let new_id = slot.id;
                self.check_around(base);
                Some(new_id)
            }
            _ => None,
        }
    }

    // ----- mutations of cleanup -----

    /// Compaction's swap: the consecutive sealed segments `inputs` (base
    /// and id each, oldest first, none the active one) leave, and `output`,
    /// their compacted records in one sealed segment at the first one's
    /// base, takes their offsets. Returns the segments replaced (their
    /// read handles are freed once reads are done).
    pub fn replace_run(&mut self, inputs: &[(Offset, u64)], output: Segment) -> Vec<Segment> {
        let (first, _) = *inputs.first().expect("a run is not empty");
        let (last, _) = *inputs.last().expect("a run is not empty");
        assert_eq!(output.base, first, "the output takes the run's first base");
        assert!(output.sealed && output.created, "the output is sealed");
        assert!(
            self.next_base(last).is_some(),
            "cleanup never takes the active segment"
        );
        let in_set: Vec<Offset> = self.map.range(first..=last).map(|(b, _)| *b).collect();
        assert_eq!(
            in_set,
            inputs.iter().map(|(b, _)| *b).collect::<Vec<_>>(),
            "a run is consecutive segments"
        );
        let mut replaced = Vec::with_capacity(inputs.len());
        for &(base, id) in inputs {
            let old = self.map.remove(&base);
            let old = old
                .filter(|o| o.id == id)
                .expect("compaction inputs change only under the maintenance permit");
            assert!(old.sealed, "cleanup takes sealed segments only");
            replaced.push(old);
        }
        self.map.insert(first, output);
        self.check_around(first);
        replaced
    }

    /// Retention: the oldest segment, `base`, leaves the hot tier (deleted,
    /// or moved to the cold tier once the copy there is durable). Never the
    /// active segment; only a sealed one.
    pub fn remove_oldest(&mut self, base: Offset) -> Segment {
        assert_eq!(self.first().base, base, "retention removes the oldest first");
        assert!(self.map.len() > 1, "cleanup never takes the active segment");
        let seg = self.map.remove(&base).expect("just checked");
        assert!(seg.sealed, "cleanup takes sealed segments only");
        seg
    }

    // ----- mutations of a truncation (`log/truncate.rs`) -----

    /// Takes every segment after `base` out of the set, newest first, and
    /// ends `base`'s readable bytes at `position` (a replicated log's
    /// uncommitted suffix is cut there): `base` is the active segment from
    /// now on, and no read that starts now goes past the cut while the
    /// file is cut. Its accounting stays stale until
    /// [`replace_cut`](SegmentSet::replace_cut).
    pub fn take_after(&mut self, base: Offset, position: u64) -> Vec<Segment> {
        let seg = self.get_mut(base);
        assert!(position <= seg.written_bytes, "a cut lies in the written bytes");
        seg.written_bytes = position;
        let mut after: Vec<Segment> = self.map.split_off(&Offset(base.0 + 1)).into_values().collect();
        after.reverse();
        self.check_around(base);
        after
    }

    /// Replaces the active segment `fresh.base` by `fresh`, the same file
    /// cut shorter and scanned again; returns the segment it replaces.
    pub fn replace_cut(&mut self, fresh: Segment) -> Segment {
        let base = fresh.base;
        assert_eq!(self.active().base, base, "only the active segment is cut");
        assert!(fresh.created && !fresh.sealed, "a cut segment is active");
        assert!(fresh.file.is_some(), "an active created segment is open");
        let old = self.map.insert(base, fresh).expect("just checked");
        assert!(old.next_offset >= self.active().next_offset, "a cut goes back");
        self.check_around(base);
        old
    }

    // ----- mutations of a reset (`log/reset.rs`) -----

    /// Replaces the one segment left (a reset took the others out with
    /// [`take_after`](SegmentSet::take_after)) by `fresh`, a new empty
    /// active segment at any base; returns the segment it replaces.
    pub fn replace_only(&mut self, fresh: Segment) -> Segment {
        assert_eq!(
            self.map.len(),
            1,
            "a reset keeps one segment until it is replaced"
        );
        assert!(
            fresh.created && !fresh.sealed && fresh.is_empty(),
            "a reset's segment is new and active"
        );
        let old = std::mem::take(&mut self.map)
            .into_values()
            .next()
            .expect("just checked");
        let base = fresh.base;
        self.map.insert(base, fresh);
        self.check_around(base);
        old
    }

    // ----- invariants -----

    fn active_mut(&mut self) -> &mut Segment {
        self.map.values_mut().next_back().expect("one segment at least")
    }

    fn get_mut(&mut self, base: Offset) -> &mut Segment {
        self.map.get_mut(&base).expect("the segment is in the set")
    }

    /// Asserts the invariants of every segment and pair of neighbours.
    fn check_all(&self) {
        assert!(!self.map.is_empty(), "one segment at least");
        if cfg!(debug_assertions) {
            let mut prev: Option<&Segment> = None;
            for (base, seg) in &self.map {
                check_one(*base, seg, prev);
                prev = Some(seg);
            }
        }
    }

    /// Asserts the invariants of segment `base` and its neighbours, after
    /// a mutation there (`base` itself may be gone).
    fn check_around(&self, base: Offset) {
        assert!(!self.map.is_empty(), "one segment at least");
        if cfg!(debug_assertions) {
            let before = self.map.range(..base).next_back();
            let from = before.map_or(base, |(b, _)| *b);
            let mut prev: Option<&Segment> = self.map.range(..from).next_back().map(|(_, s)| s);
            for (b, seg) in self.map.range(from..).take(3) {
                check_one(*b, seg, prev);
                prev = Some(seg);
            }
        }
    }
}

/// Asserts the invariants of `seg`, filed under `base`, after `prev`.
fn check_one(base: Offset, seg: &Segment, prev: Option<&Segment>) {
    assert_eq!(seg.base, base, "a segment is filed under its base");
    assert!(seg.next_offset >= seg.base, "a segment ends at or after its base");
    assert!(!seg.sealed || seg.created, "a sealed segment is created");
    match prev {
        None => assert!(seg.created, "the first segment is created"),
        Some(prev) => {
            assert!(prev.base < seg.base, "bases strictly increase");
            assert!(
                prev.next_offset <= seg.base,
                "a segment's offsets end before the next one's base"
            );
            assert!(prev.created || !seg.created, "created segments are a prefix");
        }
    }
}

#[cfg(test)]
mod tests;
