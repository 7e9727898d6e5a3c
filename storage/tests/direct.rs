//! Direct-I/O segment writes (`LogConfig::direct_writes`, the default):
//! every write rewrites the partial last page and pads the file to a page,
//! sealing cuts the padding off, recovery drops it without calling it a
//! torn tail, and readers get the same bytes from the recent-writes memory
//! as from the file. The buffered fallback keeps exact file lengths.

mod common;

use std::path::Path;

use common::{rec, run, run_with_disk_threads, DISK_THREAD_MODES};
use es_storage::{FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record, PAGE_BYTES};

fn log_len(dir: &Path, base: u64) -> u64 {
    std::fs::metadata(es_storage::log_path(dir, Offset(base)))
        .expect("segment file")
        .len()
}

/// Records of odd sizes, so batches end anywhere in a page.
fn records(i: usize) -> Vec<Record> {
    (0..1 + i % 3)
        .map(|j| rec(Some(&format!("k{i}")), &"v".repeat(37 * i + j), i as i64))
        .collect()
}

/// Appends `n` odd-sized batches durably, reading everything back after
/// each one (the newest bytes come from memory), and returns the values.
async fn append_and_check(log: &PartitionLog, n: usize) -> Vec<Vec<u8>> {
    let mut model: Vec<Vec<u8>> = Vec::new();
    for i in 0..n {
        let recs = records(i);
        log.append_durable(&recs, ProducerStamp::NONE)
            .await
            .expect("append");
        model.extend(recs.into_iter().map(|r| r.value));
        assert_eq!(values(log).await, model, "read back after append {i}");
    }
    model
}

/// Every value in the log, in order.
async fn values(log: &PartitionLog) -> Vec<Vec<u8>> {
    common::read_all(log).await.into_iter().map(|r| r.value).collect()
}

fn direct(recent_writes_bytes: usize) -> LogConfig {
    LogConfig {
        recent_writes_bytes,
        ..LogConfig::default()
    }
}

#[test]
fn active_segment_is_padded_to_pages_and_sealed_to_its_length() {
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        run_with_disk_threads(threads, async {
            let (log, _) = PartitionLog::open(dir.path(), direct(1 << 20), FsyncBatcher::new())
                .await
                .unwrap();
            let model = append_and_check(&log, 60).await;
            let active = log_len(dir.path(), 0);
            assert_eq!(active % PAGE_BYTES, 0, "direct writes end on a page");
            assert!(active >= log.hot_bytes());
            assert!(active - log.hot_bytes() < PAGE_BYTES);
            log.close().await.unwrap();
            assert_eq!(
                log_len(dir.path(), 0),
                log.hot_bytes(),
                "sealing drops the padding"
            );

            let (log, report) = PartitionLog::open(dir.path(), direct(1 << 20), FsyncBatcher::new())
                .await
                .unwrap();
            assert!(
                report.scanned.is_empty(),
                "a clean close needs no scan: {report:?}"
            );
            assert_eq!(values(&log).await, model);
            // Appending after a reopen rewrites the partial page read back.
            log.append_durable(&records(7), ProducerStamp::NONE)
                .await
                .unwrap();
            let all = common::read_all(&log).await;
            assert_eq!(all.len(), model.len() + records(7).len());
            log.close().await.unwrap();
        });
    }
}

#[test]
fn padding_left_by_a_crash_is_dropped_without_a_trim() {
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        run_with_disk_threads(threads, async {
            let (log, _) = PartitionLog::open(dir.path(), direct(1 << 20), FsyncBatcher::new())
                .await
                .unwrap();
            let model = append_and_check(&log, 25).await;
            let hot = log.hot_bytes();
            assert_ne!(hot % PAGE_BYTES, 0, "the test needs a partial last page");
            // No close: the file keeps its padding, as after kill -9.
            drop(log);
            assert_eq!(log_len(dir.path(), 0) % PAGE_BYTES, 0);

            let (log, report) = PartitionLog::open(dir.path(), direct(1 << 20), FsyncBatcher::new())
                .await
                .unwrap();
            assert_eq!(report.scanned.len(), 1, "the unclosed segment is scanned");
            assert_eq!(
                report.scanned[0].1, None,
                "padding is not a torn tail: {report:?}"
            );
            assert_eq!(log_len(dir.path(), 0), hot, "padding dropped");
            assert_eq!(values(&log).await, model);
            log.close().await.unwrap();
        });
    }
}

#[test]
fn reads_cross_from_the_file_into_recent_writes() {
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        run_with_disk_threads(threads, async {
            // A tiny memory (one page) and small segments: most reads start in
            // the file and end in memory, and segments roll under the writer.
            let config = LogConfig {
                segment_bytes: 20 << 10,
                ..direct(4096)
            };
            let (log, _) = PartitionLog::open(dir.path(), config.clone(), FsyncBatcher::new())
                .await
                .unwrap();
            let model = append_and_check(&log, 120).await;
            assert!(log.segment_count() > 2, "segments rolled");
            // Sealed segments have their exact length (their index footer
            // matches, so a reopen trusts them without a scan).
            log.close().await.unwrap();
            let (log, report) = PartitionLog::open(dir.path(), config, FsyncBatcher::new())
                .await
                .unwrap();
            assert!(report.scanned.is_empty(), "{report:?}");
            assert_eq!(values(&log).await, model);
            log.close().await.unwrap();
        });
    }
}

#[test]
fn buffered_writes_keep_exact_lengths() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let config = LogConfig {
            direct_writes: false,
            ..LogConfig::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config.clone(), FsyncBatcher::new())
            .await
            .unwrap();
        let model = append_and_check(&log, 30).await;
        assert_eq!(log_len(dir.path(), 0), log.hot_bytes(), "no padding");
        drop(log);
        let (log, report) = PartitionLog::open(dir.path(), config, FsyncBatcher::new())
            .await
            .unwrap();
        assert_eq!(report.scanned.len(), 1);
        assert_eq!(report.scanned[0].1, None);
        assert_eq!(values(&log).await, model);
        log.close().await.unwrap();
    });
}

#[test]
fn a_shards_recent_writes_stay_within_its_budget() {
    // Eight partitions on one shard, each allowed 1 MiB of recent writes,
    // the shard 64 KiB: writes to one partition trim the others down to
    // their partial page, every record still reads back (from the file),
    // and closing the logs gives all of it back.
    const BUDGET_BYTES: usize = 64 << 10;
    let dir = tempfile::tempdir().unwrap();
    run(async {
        es_storage::set_recent_writes_shard_bytes(BUDGET_BYTES);
        let batcher = FsyncBatcher::new();
        let mut logs = Vec::new();
        for p in 0..8 {
            let (log, _) =
                PartitionLog::open(&dir.path().join(p.to_string()), direct(1 << 20), batcher.clone())
                    .await
                    .unwrap();
            logs.push(log);
        }
        let mut models = vec![Vec::new(); logs.len()];
        let mut most = 0;
        for round in 0..4 {
            for (p, log) in logs.iter().enumerate() {
                let value = format!("{p}/{round}:").repeat(600 + 37 * p);
                log.append_durable(&[rec(None, &value, 1)], ProducerStamp::NONE)
                    .await
                    .unwrap();
                models[p].push(value.into_bytes());
                let held = es_storage::recent_writes_shard_held_bytes();
                assert!(
                    held <= BUDGET_BYTES,
                    "round {round} partition {p}: {held} bytes held"
                );
                most = most.max(held);
            }
        }
        // Without the budget the eight would hold ~180 KiB.
        assert!(most > BUDGET_BYTES / 2, "the budget was used: {most}");
        for (log, model) in logs.iter().zip(&models) {
            assert_eq!(&values(log).await, model);
        }
        for log in logs {
            log.close().await.unwrap();
        }
        assert_eq!(es_storage::recent_writes_shard_held_bytes(), 0, "all given back");
    });
}
