//! Batches received into page-aligned memory (`ReceivingBatch`), which a
//! direct write through disk threads writes as they lie when placed where
//! the log was expected to end. The contract: the log reads exactly as if
//! the batch had been an ordinary buffer, from memory and from the file
//! after a close, whether the guess of where it lands held or not, with or
//! without an early write, and for the batches written after it (whose
//! first page starts with its last bytes).

mod common;

use std::path::Path;

use common::{contents, ending_at, expect, rec, run_with_disk_threads, DISK_THREAD_MODES};
use es_storage::{FsyncBatcher, LogConfig, PartitionLog, ProducerStamp, ReceivingBatch, Record};

/// A producer's batch of `n` records whose bytes depend on `seed`.
fn produced(seed: u8, n: usize) -> (Vec<Record>, Vec<u8>) {
    common::produced(seed, n, 2000, 7)
}

/// `bytes` received as a socket would hand them over, in pieces of
/// `step`, through each way of filling a `ReceivingBatch`.
fn receive(in_page: usize, bytes: &[u8], step: usize) -> ReceivingBatch {
    let mut r = ReceivingBatch::new(in_page, bytes.len());
    let mut piece = 0;
    while r.filled_len() < bytes.len() {
        let at = r.filled_len();
        let n = step.min(bytes.len() - at);
        match piece % 3 {
            0 => r.extend_from_slice(&bytes[at..at + n]),
            1 => {
                for (slot, &b) in r.spare_mut().iter_mut().zip(&bytes[at..at + n]) {
                    slot.write(b);
                }
                // SAFETY: the first `n` spare bytes were just written.
                unsafe { r.assume_received(n) };
            }
            _ => {
                r.unfilled_zeroed(n).copy_from_slice(&bytes[at..at + n]);
                r.received(n);
            }
        }
        piece += 1;
    }
    assert_eq!(r.filled(), bytes);
    r
}

async fn open(dir: &Path) -> PartitionLog {
    common::open_default(dir).await
}

/// Where the log ends before the paged batch: mid-page, just before a page
/// boundary, on one.
const ENDS: [u64; 4] = [1000, 4095, 4096, 12_288];

#[test]
fn a_paged_batch_reads_back_as_if_it_were_an_ordinary_one() {
    for (end, threads) in ENDS.into_iter().flat_map(|e| DISK_THREAD_MODES.map(|t| (e, t))) {
        // Received where the log ends, and somewhere else (copied then).
        for guess_right in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let what = format!("log ending at {end}, {threads} disk threads, guess right: {guess_right}");
            run_with_disk_threads(threads, async {
                let log = open(dir.path()).await;
                let mut model = Vec::new();
                ending_at(&log, &mut model, end).await;
                for (seed, step) in [(3u8, 4096), (5, 1000), (7, 1 << 20)] {
                    let (records, bytes) = produced(seed, 150);
                    let expected = log.next_in_page_offset(bytes.len());
                    if seed == 3 {
                        assert_eq!(expected as u64, end % 4096, "where the log ends in its page");
                    }
                    let in_page = if guess_right { expected } else { expected + 8 };
                    let batch = receive(in_page, &bytes, step).finish();
                    let appended = log.append_batch_durable(batch, None).await.unwrap();
                    assert_eq!(appended.base_offset.0, model.len() as u64);
                    expect(&mut model, &records);
                    // A small batch after it: its first page starts with the
                    // paged batch's last bytes.
                    let next = vec![rec(Some("n"), &format!("after {seed}"), 2)];
                    log.append_durable(&next, ProducerStamp::NONE).await.unwrap();
                    expect(&mut model, &next);
                    assert_eq!(contents(&log).await, model, "from memory, seed {seed}: {what}");
                }
                log.close().await.unwrap();
                let log = open(dir.path()).await;
                assert_eq!(contents(&log).await, model, "from the file: {what}");
            });
        }
    }
}

#[test]
fn a_paged_batch_written_early_reads_back_as_if_written_whole() {
    for (end, threads) in ENDS.into_iter().flat_map(|e| DISK_THREAD_MODES.map(|t| (e, t))) {
        let dir = tempfile::tempdir().unwrap();
        run_with_disk_threads(threads, async {
            let log = open(dir.path()).await;
            let mut model = Vec::new();
            ending_at(&log, &mut model, end).await;
            let (records, bytes) = produced(9, 400);
            let mut early = log.begin_early(bytes.len()).expect("an early write");
            let mut r = ReceivingBatch::new(log.next_in_page_offset(bytes.len()), bytes.len());
            for piece in bytes.chunks(100 << 10) {
                r.extend_from_slice(piece);
                early.arrived(r.filled());
            }
            let appended = log
                .append_batch_durable(r.finish(), Some(early.ticket()))
                .await
                .unwrap();
            drop(early);
            assert_eq!(appended.base_offset.0, 1);
            expect(&mut model, &records);
            let next = vec![rec(Some("n"), "after", 2)];
            log.append_durable(&next, ProducerStamp::NONE).await.unwrap();
            expect(&mut model, &next);
            assert_eq!(
                contents(&log).await,
                model,
                "from memory, at {end}, {threads} threads"
            );
            log.close().await.unwrap();
            let log = open(dir.path()).await;
            assert_eq!(
                contents(&log).await,
                model,
                "from the file, at {end}, {threads} threads"
            );
        });
    }
}

#[test]
fn paged_batches_back_to_back_and_across_a_roll() {
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        run_with_disk_threads(threads, async {
            let config = LogConfig {
                segment_bytes: 1 << 20,
                ..LogConfig::default()
            };
            let log = PartitionLog::open(dir.path(), config.clone(), FsyncBatcher::new())
                .await
                .unwrap()
                .0;
            let mut model = Vec::new();
            ending_at(&log, &mut model, 500).await;
            // Placed before the earlier ones are written: each guessed
            // from the log's end when it began, as a connection would.
            for round in 0..4u8 {
                let mut placed = Vec::new();
                for i in 0..3u8 {
                    let (records, bytes) = produced(20 + round * 3 + i, 60);
                    let batch = receive(log.next_in_page_offset(bytes.len()), &bytes, 64 << 10).finish();
                    let appended = log.append_batch_placed(batch, None).unwrap();
                    assert_eq!(appended.base_offset.0, model.len() as u64);
                    expect(&mut model, &records);
                    placed.push(appended.next_offset);
                }
                log.wait_durable(*placed.last().unwrap()).await.unwrap();
            }
            assert!(log.segment_count() > 1, "rolled at least once");
            assert_eq!(contents(&log).await, model, "from memory, {threads} threads");
            log.close().await.unwrap();
            let log = PartitionLog::open(dir.path(), config, FsyncBatcher::new())
                .await
                .unwrap()
                .0;
            assert_eq!(contents(&log).await, model, "from the files, {threads} threads");
        });
    }
}

#[test]
fn a_joined_write_larger_than_one_direct_write_reads_back() {
    // Batches of about 1.2 MiB placed before any is written: the write
    // loop joins them into one write of several MiB, cut into direct
    // writes of at most 2 MiB that run through the batches' own pages; one
    // received at another offset (copied) and an ordinary batch between.
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        run_with_disk_threads(threads, async {
            let log = open(dir.path()).await;
            let mut model = Vec::new();
            ending_at(&log, &mut model, 777).await;
            let mut last = None;
            for (i, wrong) in [false, false, true, false].into_iter().enumerate() {
                let (records, bytes) = produced(40 + i as u8, 600);
                let at = log.next_in_page_offset(bytes.len()) + if wrong { 16 } else { 0 };
                let batch = receive(at, &bytes, 256 << 10).finish();
                last = Some(log.append_batch_placed(batch, None).unwrap().next_offset);
                expect(&mut model, &records);
                if i == 1 {
                    let small = vec![rec(Some("s"), "between", 3)];
                    last = Some(
                        log.append_placed(&small, ProducerStamp::NONE)
                            .unwrap()
                            .next_offset,
                    );
                    expect(&mut model, &small);
                }
            }
            log.wait_durable(last.unwrap()).await.unwrap();
            assert_eq!(contents(&log).await, model, "from memory, {threads} threads");
            log.close().await.unwrap();
            let log = open(dir.path()).await;
            assert_eq!(contents(&log).await, model, "from the file, {threads} threads");
        });
    }
}

/// A version 2 batch (a replicated log's) of `n` records, stamp 0.
fn produced_v2(seed: u8, n: usize) -> (Vec<Record>, Vec<u8>) {
    let (records, _) = produced(seed, n);
    let mut out = Vec::new();
    es_storage::batch::encode_v2(
        es_storage::Offset(0),
        &records,
        ProducerStamp::NONE,
        es_storage::batch::RaftStamp::default(),
        &mut out,
    );
    (records, out)
}

#[test]
fn paged_v2_entries_with_control_batches_read_back_as_ordinary_ones() {
    use es_storage::{EntryBody, Stamping};
    for (end, threads) in ENDS.into_iter().flat_map(|e| DISK_THREAD_MODES.map(|t| (e, t))) {
        for guess_right in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let what = format!("v2, log ending at {end}, {threads} disk threads, guess right: {guess_right}");
            run_with_disk_threads(threads, async {
                let log = open(dir.path()).await;
                let mut model = Vec::new();
                let mut index = 0;
                let blank = |log: &PartitionLog, index: &mut u64| {
                    *index += 1;
                    let body = EntryBody::Control {
                        kind: es_storage::batch::CONTROL_BLANK,
                        body: Vec::new(),
                    };
                    log.append_entry(1, *index, body).unwrap();
                };
                // A first control entry that ends the log at byte `end`.
                index += 1;
                let pad = EntryBody::Control {
                    kind: es_storage::batch::CONTROL_BLANK,
                    body: vec![0; end as usize - es_storage::batch::HEADER_V2_BYTES - 1],
                };
                log.append_entry(1, index, pad).unwrap();
                for (seed, step) in [(3u8, 4096), (5, 1000), (7, 1 << 20)] {
                    // A paged batch, and an ordinary one after it, as one entry.
                    let (records, bytes) = produced_v2(seed, 150);
                    let expected = log.next_in_page_offset(bytes.len());
                    if seed == 3 {
                        assert_eq!(expected as u64, end % 4096, "where the log ends in its page");
                    }
                    let in_page = if guess_right { expected } else { expected + 8 };
                    let paged = receive(in_page, &bytes, step).finish();
                    let (small, small_bytes) = produced_v2(seed + 1, 2);
                    index += 1;
                    let body = EntryBody::Batches(vec![paged, small_bytes.into()], Stamping::Leader);
                    let placed = log.append_entry(2, index, body).unwrap();
                    assert_eq!(placed.bases[0].0, model.len() as u64, "{what}");
                    expect(&mut model, &records);
                    expect(&mut model, &small);
                    blank(&log, &mut index);
                    log.wait_durable_index(index).await.unwrap();
                    assert_eq!(contents(&log).await, model, "from memory, seed {seed}: {what}");
                }
                log.close().await.unwrap();
                let log = open(dir.path()).await;
                assert_eq!(contents(&log).await, model, "from the file: {what}");
                log.close().await.unwrap();
            });
        }
    }
}
