//! PartitionLog behaviour against a temp dir: offsets, reads across
//! segments, reopen, seek by time, group commit.

mod common;

use std::rc::Rc;

use common::{rec, run, run_with_disk_threads, DISK_THREAD_MODES};
use es_storage::{FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, StorageError};

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        ..LogConfig::default()
    }
}

#[test]
fn offsets_are_assigned_in_order_and_read_back_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        for i in 0..50 {
            let a = log
                .append_durable(&[rec(Some("k"), &format!("value-{i}"), i)], ProducerStamp::NONE)
                .await
                .unwrap();
            assert_eq!(a.base_offset, Offset(i as u64));
            assert_eq!(a.next_offset, Offset(i as u64 + 1));
        }
        assert!(
            log.segment_count() > 5,
            "small segments roll: {}",
            log.segment_count()
        );
        assert_eq!(log.durable_offset(), Offset(50));
        for from in 0..50u64 {
            let got = log
                .read(Offset(from), 1 << 20, log.durable_offset())
                .await
                .unwrap();
            assert_eq!(got.len() as u64, 50 - from, "from {from}");
            for (i, r) in got.iter().enumerate() {
                assert_eq!(r.offset, Offset(from + i as u64));
                assert_eq!(r.value, format!("value-{}", from + i as u64).into_bytes());
            }
        }
        // A byte budget still returns at least one batch and stops early.
        let one = log.read(Offset(7), 1, log.durable_offset()).await.unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].offset, Offset(7));
        // Nothing at or past upto.
        assert!(log
            .read(Offset(10), 1 << 20, Offset(10))
            .await
            .unwrap()
            .is_empty());
        assert_eq!(log.read(Offset(8), 1 << 20, Offset(10)).await.unwrap().len(), 2);
        log.close().await.unwrap();
    });
}

#[test]
fn clean_close_reopens_without_scanning_and_crash_scans_only_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, report) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        assert!(report.scanned.is_empty());
        for i in 0..40 {
            log.append_durable(&[rec(None, &format!("v{i}"), 1000 + i)], ProducerStamp::NONE)
                .await
                .unwrap();
        }
        let segments = log.segment_count();
        log.close().await.unwrap();
        assert!(matches!(
            log.append(&[rec(None, "late", 0)], ProducerStamp::NONE).await,
            Err(StorageError::Closed { .. })
        ));

        let (log, report) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        assert!(
            report.scanned.is_empty(),
            "clean reopen scanned {:?}",
            report.scanned
        );
        assert_eq!(log.segment_count(), segments);
        assert_eq!(log.next_offset(), Offset(40));
        let a = log
            .append_durable(&[rec(None, "after", 2000)], ProducerStamp::NONE)
            .await
            .unwrap();
        assert_eq!(a.base_offset, Offset(40));
        drop(log); // no close: as after a crash

        let (log, report) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        assert_eq!(
            report.scanned.len(),
            1,
            "only the active segment: {:?}",
            report.scanned
        );
        assert_eq!(report.scanned[0].1, None, "nothing to trim");
        assert_eq!(log.next_offset(), Offset(41));
        let all = log.read(Offset(0), 1 << 20, log.durable_offset()).await.unwrap();
        assert_eq!(all.len(), 41);
        assert_eq!(all[40].value, b"after");
    });
}

#[test]
fn a_damaged_sealed_index_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        for i in 0..30 {
            log.append_durable(&[rec(None, &format!("v{i}"), i)], ProducerStamp::NONE)
                .await
                .unwrap();
        }
        log.close().await.unwrap();
    });
    // Corrupt one entry of the first index, keep its footer intact.
    let ix = es_storage::index_path(dir.path(), Offset(0));
    let mut bytes = std::fs::read(&ix).unwrap();
    bytes[4] ^= 0xff;
    std::fs::write(&ix, &bytes).unwrap();
    // And delete another index outright.
    let second = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().into_string().unwrap()))
        .filter(|n| n.ends_with(".index") && !n.starts_with("00000000000000000000"))
        .min()
        .unwrap();
    std::fs::remove_file(dir.path().join(&second)).unwrap();
    run(async {
        let (log, report) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        assert_eq!(report.scanned.len(), 1, "the segment without an index is scanned");
        let all = log.read(Offset(0), 1 << 20, log.durable_offset()).await.unwrap();
        assert_eq!(all.len(), 30);
        for (i, r) in all.iter().enumerate() {
            assert_eq!(r.value, format!("v{i}").into_bytes());
        }
    });
    // The damaged index was rewritten whole from the log.
    let bytes = std::fs::read(&ix).unwrap();
    let footer = es_storage::index::Footer::decode(&bytes).expect("footer");
    assert!(
        es_storage::index::SparseIndex::decode_entries(&bytes, &footer).is_some(),
        "index rebuilt"
    );
}

#[test]
fn seek_by_time_finds_the_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        // Timestamps 0, 10, 20, ... with one out-of-order record at offset 12.
        for i in 0..40i64 {
            let ts = if i == 12 { 395 } else { i * 10 };
            log.append_durable(&[rec(None, "x", ts)], ProducerStamp::NONE)
                .await
                .unwrap();
        }
        let hw = log.durable_offset();
        assert_eq!(log.offset_for_timestamp(0, hw).await.unwrap(), Some(Offset(0)));
        assert_eq!(log.offset_for_timestamp(55, hw).await.unwrap(), Some(Offset(6)));
        assert_eq!(log.offset_for_timestamp(110, hw).await.unwrap(), Some(Offset(11)));
        assert_eq!(log.offset_for_timestamp(115, hw).await.unwrap(), Some(Offset(12)));
        assert_eq!(log.offset_for_timestamp(390, hw).await.unwrap(), Some(Offset(12)));
        assert_eq!(log.offset_for_timestamp(391, hw).await.unwrap(), Some(Offset(12)));
        assert_eq!(log.offset_for_timestamp(396, hw).await.unwrap(), None);
        assert_eq!(
            log.offset_for_timestamp(200, Offset(15)).await.unwrap(),
            Some(Offset(12))
        );
        assert_eq!(log.offset_for_timestamp(200, Offset(12)).await.unwrap(), None);
        log.close().await.unwrap();
        // Same answers from sealed indexes after reopen.
        let (log, _) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        let hw = log.durable_offset();
        assert_eq!(log.offset_for_timestamp(55, hw).await.unwrap(), Some(Offset(6)));
        assert_eq!(log.offset_for_timestamp(391, hw).await.unwrap(), Some(Offset(12)));
    });
}

#[test]
fn concurrent_appenders_share_fsyncs_and_get_distinct_offsets() {
    // Through io_uring, and through disk threads, whose write loop hands
    // the batcher syncs its threads started right after a write.
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        run_with_disk_threads(threads, async {
            let batcher = FsyncBatcher::new();
            let (log, _) = PartitionLog::open(dir.path(), LogConfig::default(), batcher.clone())
                .await
                .unwrap();
            let log = Rc::new(log);
            const TASKS: usize = 256;
            const EACH: usize = 8;
            let tasks: Vec<_> = (0..TASKS)
                .map(|t| {
                    let log = log.clone();
                    glommio::spawn_local(async move {
                        let mut got = Vec::new();
                        for i in 0..EACH {
                            let a = log
                                .append_durable(&[rec(None, &format!("{t}-{i}"), 0)], ProducerStamp::NONE)
                                .await
                                .unwrap();
                            got.push((a.base_offset, format!("{t}-{i}")));
                        }
                        got
                    })
                })
                .collect();
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await);
            }
            all.sort();
            for (i, (off, _)) in all.iter().enumerate() {
                assert_eq!(*off, Offset(i as u64), "offsets are dense and distinct");
            }
            let read = log
                .read(Offset(0), usize::MAX, log.durable_offset())
                .await
                .unwrap();
            for (r, (off, value)) in read.iter().zip(&all) {
                assert_eq!(r.offset, *off);
                assert_eq!(r.value, value.as_bytes());
            }
            let stats = batcher.stats();
            assert_eq!(stats.appends, (TASKS * EACH) as u64);
            assert!(
                stats.rounds * 4 < stats.appends,
                "group commit shares fsyncs: {} rounds for {} appends, {threads} disk threads",
                stats.rounds,
                stats.appends
            );
        });
    }
}

#[test]
fn bad_appends_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let cfg = LogConfig {
            batch_bytes_max: 1000,
            ..LogConfig::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), cfg, FsyncBatcher::new())
            .await
            .unwrap();
        assert!(matches!(
            log.append(&[], ProducerStamp::NONE).await,
            Err(StorageError::Invalid(_))
        ));
        let big = "x".repeat(2000);
        assert!(matches!(
            log.append(&[rec(None, &big, 0)], ProducerStamp::NONE).await,
            Err(StorageError::Invalid(_))
        ));
        assert_eq!(log.next_offset(), Offset(0));
        let bad = LogConfig {
            segment_bytes: 0,
            ..LogConfig::default()
        };
        assert!(PartitionLog::open(dir.path(), bad, FsyncBatcher::new())
            .await
            .is_err());
    });
}

/// Brings every segment file into the page cache (segments are written
/// with direct I/O, past it), then drops every other run of pages of each (or
/// all of them), as memory pressure would.
fn evict_pages(dir: &std::path::Path, every_other: bool) {
    use std::os::fd::AsRawFd;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        std::fs::read(&path).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let len = f.metadata().unwrap().len() as i64;
        // Four pages at a time: the page cache may hold a file in folios
        // larger than a page, and drops only whole ones.
        let chunk = 4 * es_storage::PAGE_BYTES as i64;
        let (step, span) = if every_other {
            (2 * chunk, chunk)
        } else {
            (len.max(1), 0)
        };
        let mut at = 0;
        while at < len {
            // SAFETY: advice on an open descriptor; no memory is touched.
            let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), at, span, libc::POSIX_FADV_DONTNEED) };
            assert_eq!(rc, 0, "fadvise {}", path.display());
            at += step;
        }
    }
}

#[test]
fn reads_are_whole_when_the_page_cache_holds_only_some_pages() {
    // Reads copy what the page cache holds straight in and fetch the rest
    // through io_uring: a read must be whole and in order however the
    // cached and evicted pages alternate.
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let config = LogConfig {
            segment_bytes: 64 << 10,
            ..LogConfig::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config.clone(), FsyncBatcher::new())
            .await
            .unwrap();
        let mut model = Vec::new();
        for i in 0..300 {
            let value = format!("{i}:").repeat(50 + i % 400);
            log.append_durable(&[rec(None, &value, i as i64)], ProducerStamp::NONE)
                .await
                .unwrap();
            model.push(value.into_bytes());
        }
        log.close().await.unwrap();
        for every_other in [true, false] {
            evict_pages(dir.path(), every_other);
            let (log, _) = PartitionLog::open(dir.path(), config.clone(), FsyncBatcher::new())
                .await
                .unwrap();
            let hw = log.durable_offset();
            let whole = log.read(Offset(0), 1 << 30, hw).await.unwrap();
            let values: Vec<Vec<u8>> = whole.into_iter().map(|r| r.value).collect();
            assert_eq!(values, model, "one large read, every_other={every_other}");
            evict_pages(dir.path(), every_other);
            let values: Vec<Vec<u8>> = common::read_all(&log)
                .await
                .into_iter()
                .map(|r| r.value)
                .collect();
            assert_eq!(values, model, "batch by batch, every_other={every_other}");
            log.close().await.unwrap();
        }
    });
}

/// A limited read takes batches up to its limit and never past it: a
/// batch that would pass it is left for the next read, and a first batch
/// larger than the limit is not read at all, the read saying how large it
/// is, so that a caller that charges memory before reading can make room
/// and ask again.
#[test]
fn a_limited_read_never_takes_more_than_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(dir.path(), LogConfig::default(), FsyncBatcher::new())
            .await
            .unwrap();
        let mut lens = Vec::new();
        for (i, size) in [1_000usize, 5_000, 1_000, 1_000].into_iter().enumerate() {
            let value = "v".repeat(size);
            log.append_durable(&[rec(None, &value, i as i64)], ProducerStamp::NONE)
                .await
                .unwrap();
            let mut parts = Vec::new();
            log.read_batches_into(Offset(i as u64), 1, 1, log.durable_offset(), &mut parts)
                .await
                .unwrap();
            lens.push(parts[0].len());
        }
        let hw = log.durable_offset();
        let read = |from: u64, max_bytes: usize, limit: usize| {
            let log = log.clone();
            async move {
                let mut parts = Vec::new();
                let read = log
                    .read_batches_limited(Offset(from), max_bytes, usize::MAX, hw, limit, &mut parts)
                    .await
                    .unwrap();
                (read, parts.iter().map(|p| p.len()).collect::<Vec<_>>())
            }
        };
        // The second batch does not fit beside the first: the read ends
        // before it, and the next one starts there.
        let (got, parts) = read(0, usize::MAX, lens[0] + lens[1] - 1).await;
        assert_eq!(parts, vec![lens[0]]);
        assert_eq!((got.next_offset, got.first_batch_bytes), (Offset(1), None));
        // Alone, it is larger than the limit: nothing read, its length said.
        let (got, parts) = read(1, usize::MAX, lens[1] - 1).await;
        assert!(parts.is_empty());
        assert_eq!(got.batches, 0);
        assert_eq!(got.first_batch_bytes, Some(lens[1]));
        assert_eq!(got.next_offset, Offset(1), "where it would start");
        // With that much allowed it comes, and what fits after it.
        let (got, parts) = read(1, usize::MAX, lens[1] + lens[2]).await;
        assert_eq!(parts, vec![lens[1], lens[2]]);
        assert_eq!(got.next_offset, Offset(3));
        // The soft limit still stops after the batch that reaches it.
        let (got, parts) = read(0, 1, usize::MAX).await;
        assert_eq!((parts, got.next_offset), (vec![lens[0]], Offset(1)));
        // Records read the same way.
        let limited = log
            .read_records_limited(Offset(1), usize::MAX, hw, lens[1] - 1)
            .await
            .unwrap();
        assert!(limited.read.records.is_empty());
        assert_eq!(limited.first_batch_bytes, Some(lens[1]));
        let limited = log
            .read_records_limited(Offset(0), usize::MAX, hw, usize::MAX)
            .await
            .unwrap();
        assert_eq!(limited.read.records.len(), 4);
        assert_eq!(limited.first_batch_bytes, None);
        log.close().await.unwrap();
    });
}
