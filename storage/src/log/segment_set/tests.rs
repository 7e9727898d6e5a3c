//! Unit tests of `SegmentSet`: each named mutation, and each invariant
//! broken (an assert, shown with `#[should_panic]`).

use super::*;
use crate::batch;
use crate::record::{ProducerStamp, Record};

const INTERVAL: u32 = 4096;

fn dir() -> PathBuf {
    PathBuf::from("/nonexistent/es-segment-set")
}

fn batch_bytes(base: u64, count: u64) -> Vec<u8> {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            key: Some(format!("k{i}").into_bytes()),
            value: b"v".to_vec(),
            timestamp_ms: 1,
        })
        .collect();
    let mut out = Vec::new();
    batch::encode(Offset(base), &records, ProducerStamp::NONE, &mut out);
    out
}

fn header(base: u64, count: u64) -> BatchHeader {
    BatchHeader::parse(&batch_bytes(base, count)).unwrap()
}

/// A created segment `[base, next)` holding one batch of those
/// offsets, fully written.
fn created(base: u64, next: u64, sealed: bool) -> Segment {
    let mut seg = Segment::empty(&dir(), Offset(base));
    if next > base {
        seg.note_batch(&header(base, next - base), 0, INTERVAL);
        seg.written_bytes = seg.dirty_bytes;
    }
    seg.created = true;
    seg.sealed = sealed;
    seg
}

fn set_of(segs: impl IntoIterator<Item = Segment>) -> SegmentSet {
    SegmentSet::new(segs.into_iter().map(|s| (s.base, s)).collect())
}

/// Sealed `[0, 10)`, `[10, 20)`, active `[20, 25)`.
fn three() -> SegmentSet {
    set_of([
        created(0, 10, true),
        created(10, 20, true),
        created(20, 25, false),
    ])
}

/// [`three`] with `file` as the active segment's open log.
fn three_with(file: Rc<BufferedFile>) -> SegmentSet {
    let mut active = created(20, 25, false);
    active.file = Some(file);
    set_of([created(0, 10, true), created(10, 20, true), active])
}

fn bases(set: &SegmentSet) -> Vec<u64> {
    set.iter().map(|s| s.base.0).collect()
}

/// Runs `f` on an executor with a scratch file open (a segment's
/// handle), passing on its panic, message and all.
fn with_file(f: impl FnOnce(Rc<BufferedFile>) + Send + 'static) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scratch.log");
    let ran = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let file = glommio::io::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .buffered_open(&path)
                .await
                .unwrap();
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(Rc::new(file))))
        })
        .unwrap()
        .join()
        .unwrap();
    if let Err(panic) = ran {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn queries() {
    let set = three();
    assert_eq!(set.active().base, Offset(20));
    assert_eq!(set.first().base, Offset(0));
    assert_eq!(set.base_for(Offset(15)), Offset(10));
    assert_eq!(set.base_for(Offset(99)), Offset(20));
    assert_eq!(set.next_base(Offset(10)), Some(Offset(20)));
    assert_eq!(set.next_base(Offset(20)), None);
    assert_eq!(set.before(Offset(20)).map(|s| s.base), Some(Offset(10)));
    assert_eq!(set.last_created().base, Offset(20));
    assert_eq!(set.len(), 3);
    let id = set.expect(Offset(10)).id;
    assert!(set.is_same(Offset(10), id) && !set.is_same(Offset(10), id + 1000));
}

#[test]
#[should_panic(expected = "one segment at least")]
fn an_empty_set_is_refused() {
    SegmentSet::new(BTreeMap::new());
}

#[test]
#[should_panic(expected = "a segment's offsets end before the next one's base")]
fn overlapping_segments_are_refused() {
    set_of([created(0, 12, true), created(10, 20, false)]);
}

#[test]
#[should_panic(expected = "a segment is filed under its base")]
fn a_segment_under_another_base_is_refused() {
    SegmentSet::new([(Offset(5), created(0, 10, false))].into_iter().collect());
}

#[test]
#[should_panic(expected = "a sealed segment is created")]
fn a_sealed_segment_not_created_is_refused() {
    let mut second = Segment::empty(&dir(), Offset(10));
    second.sealed = true;
    set_of([created(0, 10, true), second]);
}

#[test]
#[should_panic(expected = "the first segment is created")]
fn a_first_segment_not_created_is_refused() {
    set_of([Segment::empty(&dir(), Offset(0))]);
}

#[test]
#[should_panic(expected = "created segments are a prefix")]
fn a_created_segment_after_one_not_created_is_refused() {
    set_of([
        created(0, 10, true),
        Segment::empty(&dir(), Offset(10)),
        created(20, 30, false),
    ]);
}

#[test]
fn a_gap_after_compaction_is_allowed() {
    // Compaction may drop a segment's last records: its offsets then
    // end before the next base (found so at open).
    let set = set_of([created(0, 8, true), created(10, 20, false)]);
    assert_eq!(bases(&set), vec![0, 10]);
}

#[test]
fn roll_starts_an_active_segment_not_created() {
    let mut set = three();
    set.roll(&dir(), Offset(25));
    assert_eq!(bases(&set), vec![0, 10, 20, 25]);
    assert!(!set.active().created && set.active().is_empty());
    assert!(
        !set.expect(Offset(20)).sealed,
        "not closed until the writer seals it"
    );
    assert_eq!(set.last_created().base, Offset(20));
}

#[test]
#[should_panic(expected = "a rolled segment starts where the log ends")]
fn roll_elsewhere_than_the_log_end_panics() {
    three().roll(&dir(), Offset(30));
}

#[test]
#[should_panic(expected = "only a segment with batches rolls")]
fn roll_of_an_empty_segment_panics() {
    let mut set = three();
    set.roll(&dir(), Offset(25));
    set.roll(&dir(), Offset(25));
}

#[test]
fn place_batch_goes_to_the_active_segment() {
    let mut set = three();
    let position = set.active().dirty_bytes;
    let h = header(25, 3);
    assert_eq!(set.place_batch(&h, position, INTERVAL), Offset(20));
    assert_eq!(set.active().next_offset, Offset(28));
    assert_eq!(set.active().dirty_bytes, position + h.batch_len as u64);
}

#[test]
#[should_panic(expected = "batches are placed back to back")]
fn place_batch_elsewhere_than_the_end_panics() {
    three().place_batch(&header(25, 3), 1, INTERVAL);
}

#[test]
fn note_written_advances_written_bytes() {
    let mut set = three();
    set.roll(&dir(), Offset(25));
    let h = header(25, 2);
    set.place_batch(&h, 0, INTERVAL);
    set.note_written(Offset(25), 0, h.batch_len as u64);
    assert_eq!(set.active().written_bytes, h.batch_len as u64);
}

#[test]
#[should_panic(expected = "written <= dirty")]
fn note_written_past_dirty_panics() {
    let mut set = three();
    let written = set.active().written_bytes;
    set.note_written(Offset(20), written, 1);
}

#[test]
#[should_panic(expected = "writes land back to back")]
fn note_written_elsewhere_panics() {
    three().note_written(Offset(20), 0, 1);
}

#[test]
fn seal_rolled_seals_the_one_before_and_creates_the_new_one() {
    with_file(|file| {
        let mut set = three();
        set.roll(&dir(), Offset(25));
        set.seal_rolled(Offset(25), file);
        assert!(set.expect(Offset(20)).sealed);
        assert!(set.active().created && set.active().file.is_some());
        assert_eq!(set.last_created().base, Offset(25));
    });
}

#[test]
#[should_panic(expected = "a rolled segment is created once")]
fn seal_rolled_of_a_created_segment_panics() {
    with_file(|file| {
        three().seal_rolled(Offset(20), file);
    });
}

#[test]
fn rewind_of_a_rolled_segment_never_created_unrolls() {
    let mut set = three();
    set.roll(&dir(), Offset(25));
    let mark = set.active().mark();
    set.place_batch(&header(25, 1), 0, INTERVAL);
    assert!(set.rewind(Offset(25), mark, 0).is_none(), "nothing to cut");
    assert_eq!(bases(&set), vec![0, 10, 20], "the segment before is active again");
}

#[test]
fn rewind_drops_rolled_segments_and_cuts_back_to_the_mark() {
    with_file(|file| {
        let mut set = three_with(file);
        let mark = set.active().mark();
        let position = set.active().written_bytes;
        set.place_batch(&header(25, 5), position, INTERVAL);
        set.roll(&dir(), Offset(30));
        set.place_batch(&header(30, 1), 0, INTERVAL);
        assert!(
            set.rewind(Offset(20), mark, position).is_some(),
            "the file is cut"
        );
        assert_eq!(bases(&set), vec![0, 10, 20]);
        assert_eq!(set.active().next_offset, Offset(25));
        assert_eq!(set.active().dirty_bytes, position);
    });
}

#[test]
#[should_panic(expected = "no write reached a segment after a refused one")]
fn rewind_past_a_created_segment_panics() {
    let mut set = three();
    let mark = set.expect(Offset(10)).mark();
    let written = set.expect(Offset(10)).written_bytes;
    set.rewind(Offset(10), mark, written);
}

#[test]
fn load_index_only_for_the_same_segment() {
    let mut set = three();
    let id = set.expect(Offset(10)).id;
    assert!(!set.load_index(Offset(10), id + 1000, SparseIndex::default()));
    assert!(set.load_index(Offset(10), id, SparseIndex::default()));
    assert!(!set.load_index(Offset(11), id, SparseIndex::default()));
}

#[test]
fn replace_rebuilt_keeps_the_base_and_gives_a_new_id() {
    let mut set = three();
    let id = set.expect(Offset(10)).id;
    assert_eq!(
        set.replace_rebuilt(Offset(10), id + 1000, created(10, 20, true)),
        None
    );
    let fresh = created(10, 20, true);
    let fresh_id = fresh.id;
    assert_eq!(set.replace_rebuilt(Offset(10), id, fresh), Some(fresh_id));
    assert_eq!(set.expect(Offset(10)).id, fresh_id);
}

#[test]
#[should_panic(expected = "a segment's offsets end before the next one's base")]
fn replace_rebuilt_past_the_next_base_panics() {
    let mut set = three();
    let id = set.expect(Offset(10)).id;
    set.replace_rebuilt(Offset(10), id, created(10, 21, true));
}

#[test]
fn replace_run_swaps_consecutive_sealed_segments_for_one() {
    let mut set = three();
    let inputs: Vec<(Offset, u64)> = set.iter().take(2).map(|s| (s.base, s.id)).collect();
    let replaced = set.replace_run(&inputs, created(0, 20, true));
    assert_eq!(replaced.len(), 2);
    assert_eq!(bases(&set), vec![0, 20]);
    assert_eq!(set.first().next_offset, Offset(20));
}

#[test]
#[should_panic(expected = "cleanup never takes the active segment")]
fn replace_run_of_the_active_segment_panics() {
    let mut set = three();
    let inputs: Vec<(Offset, u64)> = set.iter().map(|s| (s.base, s.id)).collect();
    set.replace_run(&inputs, created(0, 25, true));
}

#[test]
#[should_panic(expected = "a run is consecutive segments")]
fn replace_run_with_a_hole_panics() {
    let mut set = set_of([
        created(0, 10, true),
        created(10, 20, true),
        created(20, 30, true),
        created(30, 35, false),
    ]);
    let inputs = vec![
        (Offset(0), set.expect(Offset(0)).id),
        (Offset(20), set.expect(Offset(20)).id),
    ];
    set.replace_run(&inputs, created(0, 30, true));
}

#[test]
#[should_panic(expected = "cleanup takes sealed segments only")]
fn replace_run_of_an_unsealed_segment_panics() {
    let mut set = three();
    set.get_mut(Offset(10)).sealed = false;
    let inputs: Vec<(Offset, u64)> = set.iter().take(2).map(|s| (s.base, s.id)).collect();
    set.replace_run(&inputs, created(0, 20, true));
}

#[test]
fn remove_oldest_takes_the_first_sealed_segment() {
    let mut set = three();
    assert_eq!(set.remove_oldest(Offset(0)).base, Offset(0));
    assert_eq!(bases(&set), vec![10, 20]);
}

#[test]
#[should_panic(expected = "retention removes the oldest first")]
fn remove_oldest_of_another_panics() {
    three().remove_oldest(Offset(10));
}

#[test]
#[should_panic(expected = "cleanup never takes the active segment")]
fn remove_oldest_of_the_active_segment_panics() {
    set_of([created(0, 10, true)]).remove_oldest(Offset(0));
}

#[test]
#[should_panic(expected = "cleanup takes sealed segments only")]
fn remove_oldest_unsealed_panics() {
    let mut set = three();
    set.get_mut(Offset(0)).sealed = false;
    set.remove_oldest(Offset(0));
}
