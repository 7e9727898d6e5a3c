//! Early writes (`early.rs`): a produced batch's pages written while it
//! arrives. The contract: the log reads exactly as if the batch had been
//! written whole once placed; an early write that another placement
//! overtakes, or whose batch never arrives, leaves no trace a reader, a
//! clean close or crash recovery can see; and a batch that lands where its
//! early write assumed is not written twice.

mod common;

use std::path::Path;

use common::{contents, ending_at, expect, rec, run, run_with_disk_threads, Model, DISK_THREAD_MODES};
use es_storage::batch;
use es_storage::{
    EarlyWrite, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record, PAGE_BYTES,
};

/// A producer's batch of `n` records of about 3 KiB whose bytes depend on
/// `seed`: 100 of them span ~75 pages.
fn produced(seed: u8, n: usize) -> (Vec<Record>, Vec<u8>) {
    common::produced(seed, n, 3000, 1)
}

/// Feeds `bytes` to `early` as a socket would hand them over: in pieces of
/// `step` bytes, the whole prefix each time.
fn feed(early: &mut EarlyWrite, bytes: &[u8], step: usize) {
    let mut have = 0;
    while have < bytes.len() {
        have = (have + step).min(bytes.len());
        early.arrived(&bytes[..have]);
    }
}

fn segment_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(es_storage::log_path(dir, Offset(0))).expect("segment file")
}

async fn open(dir: &Path) -> PartitionLog {
    common::open_default(dir).await
}

/// One small batch first: the active segment's writer is open and the log
/// ends mid-page, so the early pages start at the page after it.
async fn with_a_first_batch(log: &PartitionLog, model: &mut Model) {
    ending_at(log, model, FIRST_END).await;
}

/// Where `with_a_first_batch` ends the log.
const FIRST_END: u64 = 1000;

/// Where the early written batch starts: mid-page, with its header in one
/// page, straddling a page boundary by one byte or by most of it, just
/// fitting, and on a boundary.
const POSITIONS: [u64; 6] = [1000, 4095, 4076, 4041, 4040, 8192];

#[test]
fn a_batch_written_early_reads_back_as_if_written_whole() {
    for (position, threads) in POSITIONS
        .into_iter()
        .flat_map(|p| DISK_THREAD_MODES.map(|t| (p, t)))
    {
        let dir = tempfile::tempdir().unwrap();
        run_with_disk_threads(threads, async {
            let log = open(dir.path()).await;
            let mut model = Vec::new();
            // Nothing written yet: the writer opens on the first write.
            assert!(log.begin_early(300 << 10).is_none());
            ending_at(&log, &mut model, position).await;
            for (seed, step) in [(3u8, 4096), (5, 1000), (7, 1 << 20)] {
                let (records, bytes) = produced(seed, 100);
                let mut early = log.begin_early(bytes.len()).expect("an early write");
                // One at a time per partition.
                assert!(log.begin_early(bytes.len()).is_none());
                feed(&mut early, &bytes, step);
                let appended = log
                    .append_batch_durable(bytes, Some(early.ticket()))
                    .await
                    .unwrap();
                drop(early);
                assert_eq!(appended.base_offset.0, model.len() as u64);
                expect(&mut model, &records);
                assert_eq!(
                    contents(&log).await,
                    model,
                    "from memory, seed {seed}, at {position}, {threads} disk threads"
                );
            }
            log.close().await.unwrap();
            let log = open(dir.path()).await;
            assert_eq!(
                contents(&log).await,
                model,
                "from the file, at {position}, {threads} disk threads"
            );
        });
    }
}

#[test]
fn a_batch_that_lands_where_its_early_write_went_is_not_written_twice() {
    // White box: the early write is fed other bytes than the batch placed
    // with its ticket, so the file shows which pages the write loop skipped:
    // all but those holding the batch header and the last partial page.
    for (position, threads) in POSITIONS
        .into_iter()
        .flat_map(|p| DISK_THREAD_MODES.map(|t| (p, t)))
    {
        let dir = tempfile::tempdir().unwrap();
        let placed = run_with_disk_threads(threads, async {
            let log = open(dir.path()).await;
            let mut model = Vec::new();
            ending_at(&log, &mut model, position).await;
            let (_, bytes) = produced(9, 100);
            let decoy = vec![0xEEu8; bytes.len()];
            let mut early = log.begin_early(bytes.len()).unwrap();
            feed(&mut early, &decoy, 64 << 10);
            let appended = log
                .append_batch_durable(bytes.clone(), Some(early.ticket()))
                .await
                .unwrap();
            drop(early);
            log.close().await.unwrap();
            let mut placed = bytes;
            batch::rebase(&mut placed, appended.base_offset);
            placed
        });
        let file = segment_bytes(dir.path());
        let end = position + placed.len() as u64;
        assert_eq!(file.len() as u64, end, "sealed to its length");
        let header_end = position + batch::HEADER_BYTES as u64;
        let from = (header_end - 1) / PAGE_BYTES * PAGE_BYTES + PAGE_BYTES;
        let to = end / PAGE_BYTES * PAGE_BYTES;
        for (i, (&got, &want)) in file[position as usize..].iter().zip(&placed).enumerate() {
            let at = position + i as u64;
            if (from..to).contains(&at) {
                assert_eq!(
                    got, 0xEE,
                    "byte {at} was written early, not again (batch at {position}, {threads} disk threads)"
                );
            } else {
                assert_eq!(
                    got, want,
                    "byte {at} written by the write loop (batch at {position}, {threads} disk threads)"
                );
            }
        }
    }
}

#[test]
fn another_placement_voids_the_early_write() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path()).await;
        let mut model = Vec::new();
        with_a_first_batch(&log, &mut model).await;
        let (records, bytes) = produced(11, 100);
        let mut early = log.begin_early(bytes.len()).unwrap();
        feed(&mut early, &bytes[..bytes.len() / 2], 32 << 10);
        // Another producer's batch is placed first, where the early write
        // assumed this one would go.
        let other = vec![rec(Some("b"), &"x".repeat(9000), 2)];
        log.append_durable(&other, ProducerStamp::NONE).await.unwrap();
        expect(&mut model, &other);
        // The rest arrives; the early write issues nothing more.
        feed(&mut early, &bytes, 32 << 10);
        let appended = log
            .append_batch_durable(bytes, Some(early.ticket()))
            .await
            .unwrap();
        drop(early);
        assert_eq!(appended.base_offset.0, 2);
        expect(&mut model, &records);
        assert_eq!(contents(&log).await, model);
        log.close().await.unwrap();
        let log = open(dir.path()).await;
        assert_eq!(contents(&log).await, model, "from the file");
    });
}

#[test]
fn a_batch_that_never_arrives_leaves_nothing_after_a_crash_or_a_close() {
    for clean in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let model = run(async {
            let log = open(dir.path()).await;
            let mut model = Vec::new();
            with_a_first_batch(&log, &mut model).await;
            let (_, bytes) = produced(13, 100);
            let mut early = log.begin_early(bytes.len()).unwrap();
            // All but the last bytes arrive; then the client goes away.
            feed(&mut early, &bytes[..bytes.len() - 10], 16 << 10);
            drop(early);
            // The next batch waits for those writes before its own.
            let next = vec![rec(Some("c"), "after", 3)];
            log.append_durable(&next, ProducerStamp::NONE).await.unwrap();
            expect(&mut model, &next);
            assert_eq!(contents(&log).await, model);
            if clean {
                log.close().await.unwrap();
            }
            // Else dropped as a crash leaves it: early pages past the end.
            model
        });
        let len = segment_bytes(dir.path()).len() as u64;
        if clean {
            assert!(
                len < PAGE_BYTES,
                "a clean close truncates the early pages ({len} bytes)"
            );
        } else {
            assert!(len > 64 << 10, "the early pages are in the file ({len} bytes)");
        }
        run(async {
            let (log, report) = PartitionLog::open(dir.path(), LogConfig::default(), FsyncBatcher::new())
                .await
                .unwrap();
            assert_eq!(contents(&log).await, model, "clean close: {clean}");
            let trimmed: Vec<_> = report.scanned.iter().filter_map(|(_, t)| t.as_ref()).collect();
            assert_eq!(trimmed.len(), usize::from(!clean), "{trimmed:?}");
            // And the log goes on from there.
            log.append_durable(&[rec(None, "more", 4)], ProducerStamp::NONE)
                .await
                .unwrap();
            assert_eq!(contents(&log).await.len(), model.len() + 1);
        });
    }
}

#[test]
fn a_crash_after_the_early_pages_but_before_the_first_page_loses_only_that_batch() {
    // The early pages of a whole batch are on disk, its header is not (the
    // write loop never ran for it): recovery must not find a batch there.
    let dir = tempfile::tempdir().unwrap();
    let model = run(async {
        let log = open(dir.path()).await;
        let mut model = Vec::new();
        with_a_first_batch(&log, &mut model).await;
        let (_, bytes) = produced(17, 100);
        let mut early = log.begin_early(bytes.len()).unwrap();
        feed(&mut early, &bytes, 128 << 10);
        // Let the detached writes land: the file grows to the batch's
        // last whole page (waiting as long as a slow disk needs).
        let last_page = (FIRST_END + bytes.len() as u64) / PAGE_BYTES * PAGE_BYTES;
        common::wait_for("the early pages to land", || {
            // blocking-ok: a test's look at the file between steps
            segment_bytes(dir.path()).len() as u64 >= last_page
        })
        .await;
        std::mem::forget(early);
        model
    });
    let file = segment_bytes(dir.path());
    assert!(
        file.len() > 200 << 10,
        "early pages written: {} bytes",
        file.len()
    );
    run(async {
        let (log, report) = PartitionLog::open(dir.path(), LogConfig::default(), FsyncBatcher::new())
            .await
            .unwrap();
        assert_eq!(contents(&log).await, model);
        assert!(
            report.scanned.iter().any(|(_, t)| t.is_some()),
            "trimmed as a torn tail"
        );
    });
}

#[test]
fn a_new_early_write_while_the_last_batch_still_waits_to_be_written() {
    // Pipelining: the next batch's early write begins right after the
    // previous batch is placed, before the write loop has written it.
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path()).await;
        let mut model = Vec::new();
        with_a_first_batch(&log, &mut model).await;
        let mut pending = Vec::new();
        for seed in [19u8, 23, 29, 31] {
            let (records, bytes) = produced(seed, 60 + seed as usize);
            let mut early = log.begin_early(bytes.len()).expect("the last batch is placed");
            feed(&mut early, &bytes, 48 << 10);
            let appended = log.append_batch_placed(bytes, Some(early.ticket())).unwrap();
            pending.push((appended, early));
            expect(&mut model, &records);
        }
        let last = pending.last().unwrap().0.next_offset;
        log.wait_durable(last).await.unwrap();
        drop(pending);
        assert_eq!(contents(&log).await, model);
        log.close().await.unwrap();
        let log = open(dir.path()).await;
        assert_eq!(contents(&log).await, model, "from the file");
    });
}

#[test]
fn no_early_write_for_a_batch_that_would_start_a_new_segment_or_has_no_page_to_spare() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let config = LogConfig {
            segment_bytes: 256 << 10,
            ..LogConfig::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config, FsyncBatcher::new())
            .await
            .unwrap();
        log.append_durable(&[rec(Some("a"), "first", 1)], ProducerStamp::NONE)
            .await
            .unwrap();
        assert!(log.begin_early(300 << 10).is_none(), "past segment_bytes: rolls");
        assert!(
            log.begin_early(PAGE_BYTES as usize).is_none(),
            "no whole page past the first"
        );
        assert!(log.begin_early(200 << 10).is_some());
    });
}
