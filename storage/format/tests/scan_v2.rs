//! The scan over version 2 batches (a replicated partition's log): it
//! ends at entry boundaries, so a crash at any byte of a multi-batch entry
//! leaves the log before that entry, never part of it; stamps that go
//! backwards stop it like a bad checksum.

use es_format::batch::{encode_control, encode_v2, rebase, RaftStamp, CONTROL_BLANK, CONTROL_MEMBERSHIP};
use es_format::scan::{block_on_ready, scan, Scanned, Shape, SliceSource, Tail};
use es_format::{Offset, ProducerStamp, Record};

/// A log of entries: `(term, index, batches)`, 0 batches = a control
/// entry. Returns the bytes and the byte position where each entry ends.
fn log(entries: &[(u64, u64, usize)]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut ends = Vec::new();
    let mut next = 100u64;
    for &(term, index, batches) in entries {
        if batches == 0 {
            let kind = if index == 1 {
                CONTROL_MEMBERSHIP
            } else {
                CONTROL_BLANK
            };
            encode_control(Offset(next), term, index, kind, b"{}", &mut out);
        }
        for b in 0..batches {
            let recs: Vec<Record> = (0..2)
                .map(|i| Record {
                    key: None,
                    value: format!("{term}/{index}/{b}/{i}").into_bytes(),
                    timestamp_ms: 5,
                })
                .collect();
            let stamp = RaftStamp {
                term,
                index,
                control: false,
                entry_end: b + 1 == batches,
            };
            encode_v2(Offset(next), &recs, ProducerStamp::NONE, stamp, &mut out);
            next += 2;
        }
        ends.push(out.len());
    }
    (out, ends)
}

fn run(bytes: &[u8], last: bool) -> (Scanned, Vec<u64>) {
    let mut seen = Vec::new();
    let shape = Shape { last, end: None };
    let s = block_on_ready(scan(&mut SliceSource(bytes), Offset(100), shape, |_, p| {
        seen.push(p)
    }));
    (s.unwrap_or_else(|e| match e {}), seen)
}

const ENTRIES: &[(u64, u64, usize)] = &[(1, 1, 0), (1, 2, 3), (2, 3, 0), (2, 4, 1), (2, 5, 4)];

#[test]
fn a_whole_log_scans_clean_with_zero_width_control_batches() {
    let (bytes, ends) = log(ENTRIES);
    let (s, seen) = run(&bytes, true);
    assert_eq!(s.tail, Tail::Clean);
    assert_eq!(s.end, *ends.last().unwrap() as u64);
    assert_eq!(seen.len(), 1 + 3 + 1 + 1 + 4);
    assert_eq!(
        s.next_offset,
        Offset(100 + 2 * 8),
        "control batches take no offset"
    );
    assert!(!s.gaps, "a control batch is no gap");
}

#[test]
fn a_cut_at_every_byte_ends_the_log_at_an_entry_boundary() {
    let (bytes, ends) = log(ENTRIES);
    for cut in 0..=bytes.len() {
        let (s, seen) = run(&bytes[..cut], true);
        let boundary = ends.iter().copied().filter(|&e| e <= cut).max().unwrap_or(0);
        assert_eq!(s.end, boundary as u64, "cut at {cut}");
        let whole: usize = ENTRIES
            .iter()
            .zip(&ends)
            .filter(|(_, &e)| e <= cut)
            .map(|(&(_, _, n), _)| n.max(1))
            .sum();
        assert_eq!(seen.len(), whole, "cut at {cut}: only whole entries are noted");
        if cut == boundary {
            assert_eq!(s.tail, Tail::Clean, "cut at {cut}");
        } else {
            assert!(matches!(s.tail, Tail::Torn(_)), "cut at {cut}: {:?}", s.tail);
        }
    }
}

#[test]
fn an_incomplete_entry_in_a_closed_segment_is_damage() {
    let (bytes, ends) = log(ENTRIES);
    // Entry 5's first batch only: valid batches, but no ENTRY_END.
    let (s, _) = run(&bytes[..ends[3] + 200], false);
    assert_eq!(s.end, ends[3] as u64);
    assert!(matches!(s.tail, Tail::Damaged { .. }), "{:?}", s.tail);
}

#[test]
fn stamps_that_go_backwards_stop_the_scan() {
    let (mut bytes, ends) = log(&[(2, 1, 1), (2, 2, 1)]);
    // Offsets that follow on; only the stamp goes back.
    let (mut older, _) = log(&[(1, 3, 1)]);
    rebase(&mut older, Offset(104));
    let (s, _) = run(&[bytes.clone(), older].concat(), true);
    assert_eq!(s.end, ends[1] as u64, "a lower term stops the scan");
    assert!(s.reason().unwrap().contains("backwards"), "{:?}", s.reason());
    let (mut same_index, _) = log(&[(2, 2, 1)]);
    rebase(&mut same_index, Offset(104));
    bytes.extend_from_slice(&same_index);
    let (s, _) = run(&bytes, true);
    assert_eq!(
        s.end, ends[1] as u64,
        "an index that does not grow stops the scan"
    );
    assert!(s.reason().unwrap().contains("backwards"), "{:?}", s.reason());
}
