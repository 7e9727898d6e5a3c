//! Tiered storage: segments retention would delete move to the cold store
//! (a local directory), stay readable by offset after the hot copy is gone,
//! survive a restart in both tiers, and go only by cold retention; a crash
//! between the cold copy and the hot delete, or in the middle of a cold
//! `put`, loses nothing. Also the `LocalDirColdStore` contract itself.

mod common;

use std::path::Path;
use std::rc::Rc;

use common::{file_names, now_ms, read_all, rec, run};
use es_storage::{
    CleanupPolicy, ColdSegmentInfo, ColdStore, ColdTier, FaultPoint, FsyncBatcher, LocalDirColdStore,
    LogConfig, Offset, PartitionLog, ProducerStamp, StorageError,
};

const PARTITION: &str = "orders/0";

fn tiered(retention_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        cleanup: CleanupPolicy {
            tiered: true,
            retention_bytes: Some(retention_bytes),
            ..CleanupPolicy::default()
        },
        ..LogConfig::default()
    }
}

fn tier(cold: &Path) -> Option<ColdTier> {
    Some(ColdTier {
        store: Rc::new(LocalDirColdStore::new(cold)),
        partition: PARTITION.into(),
    })
}

async fn open(hot: &Path, cold: &Path, config: LogConfig) -> (PartitionLog, es_storage::OpenReport) {
    PartitionLog::open_with(hot, config, FsyncBatcher::new(), tier(cold))
        .await
        .unwrap()
}

async fn append(log: &PartitionLog, n: u64) {
    for _ in 0..n {
        let o = log.next_offset().0;
        log.append_durable(&[rec(Some("k"), &format!("v{o}"), 0)], ProducerStamp::NONE)
            .await
            .unwrap();
    }
}

/// Every offset from 0 to the high watermark reads back, in order.
async fn assert_complete(log: &PartitionLog) {
    let all = read_all(log).await;
    assert_eq!(
        all.len() as u64,
        log.durable_offset().0,
        "every record is readable"
    );
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r.offset, Offset(i as u64));
        assert_eq!(r.value, format!("v{i}").into_bytes());
    }
}

fn logs_in(dir: &Path) -> usize {
    file_names(dir).iter().filter(|n| n.ends_with(".log")).count()
}

#[test]
fn segments_move_to_the_cold_dir_and_stay_readable_across_restarts() {
    let hot = tempfile::tempdir().unwrap();
    let cold = tempfile::tempdir().unwrap();
    let cold_partition = cold.path().join("orders").join("0");
    run(async {
        let (log, report) = open(hot.path(), cold.path(), tiered(1000)).await;
        assert_eq!(report.cold_segments, 0);
        append(&log, 60).await;
        let segments = log.segment_count();
        let (report, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert!(report.segments_tiered > 0);
        assert_eq!(report.segments_deleted, 0, "a tiered log deletes nothing");
        assert_eq!(report.bytes_reclaimed(), 0);
        assert_eq!(log.segment_count() + report.segments_tiered as usize, segments);
        assert!(log.hot_bytes() <= 1000);
        // Moved: gone from the hot dir, present (log and index) in the cold.
        assert_eq!(logs_in(hot.path()), log.segment_count());
        assert_eq!(logs_in(&cold_partition), report.segments_tiered as usize);
        assert!(file_names(&cold_partition).iter().all(|n| !n.ends_with(".tmp")));
        assert_eq!(log.log_start_offset(), Offset(0));
        assert_eq!(log.cold_start_offset(), Some(Offset(0)));
        assert!(log.hot_start_offset() > Offset(0));
        // Still readable by offset, from the cold tier into the hot one.
        assert_complete(&log).await;
        let hot_start = log.hot_start_offset();
        let across = log
            .read(Offset(hot_start.0 - 2), 1 << 20, log.durable_offset())
            .await
            .unwrap();
        assert_eq!(across[0].offset, Offset(hot_start.0 - 2));
        assert_eq!(across.len() as u64, log.durable_offset().0 - hot_start.0 + 2);
        log.close().await.unwrap();

        // A restart keeps both tiers.
        let (log, report) = open(hot.path(), cold.path(), tiered(1000)).await;
        assert!(report.scanned.is_empty());
        assert_eq!(report.cold_segments, logs_in(&cold_partition));
        assert_eq!(log.hot_start_offset(), hot_start);
        assert_eq!(log.log_start_offset(), Offset(0));
        assert_complete(&log).await;
        // More data moves more segments; still all readable.
        append(&log, 40).await;
        let (_, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert!(log.hot_start_offset() > hot_start);
        assert_complete(&log).await;
        log.close().await.unwrap();
    });
}

#[test]
fn cold_retention_deletes_the_oldest_cold_segments() {
    let hot = tempfile::tempdir().unwrap();
    let cold = tempfile::tempdir().unwrap();
    let cold_partition = cold.path().join("orders").join("0");
    run(async {
        let mut config = tiered(400);
        let (log, _) = open(hot.path(), cold.path(), config.clone()).await;
        append(&log, 80).await;
        let (_, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        let (cold_count, cold_bytes) = log.cold_segments();
        assert!(cold_count > 4);
        // Size: the cold tier shrinks to at most the limit, oldest first.
        config.cleanup.cold_retention_bytes = Some(cold_bytes / 2);
        log.set_config(config.clone()).unwrap();
        let (report, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert!(report.cold_segments_deleted > 0);
        assert_eq!(report.bytes_reclaimed(), report.cold_bytes_deleted);
        assert!(log.cold_segments().1 <= cold_bytes / 2);
        assert_eq!(logs_in(&cold_partition), log.cold_segments().0);
        let start = log.log_start_offset();
        assert!(start > Offset(0));
        assert_eq!(log.cold_start_offset(), Some(start));
        match log.read(Offset(0), 100, log.durable_offset()).await {
            Err(StorageError::OffsetOutOfRange { log_start, .. }) => assert_eq!(log_start, start.0),
            other => panic!("expected OffsetOutOfRange, got {other:?}"),
        }
        let rest = common::read_all(&log).await;
        assert_eq!(rest.len() as u64, log.durable_offset().0 - start.0);
        // Time (timestamps are 0): everything cold goes.
        config.cleanup.cold_retention_ms = Some(1);
        log.set_config(config).unwrap();
        let (_, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert_eq!(log.cold_segments(), (0, 0));
        assert_eq!(log.cold_start_offset(), None);
        assert_eq!(log.log_start_offset(), log.hot_start_offset());
        assert_eq!(logs_in(&cold_partition), 0);
    });
}

/// A crash after the cold store confirmed the copy and before the hot copy
/// was deleted: the segment is in both tiers, reads are correct, and the
/// next pass finishes the move.
#[test]
fn a_crash_between_the_cold_copy_and_the_hot_delete_loses_nothing() {
    let hot = tempfile::tempdir().unwrap();
    let cold = tempfile::tempdir().unwrap();
    let cold_partition = cold.path().join("orders").join("0");
    run(async {
        let (log, _) = open(hot.path(), cold.path(), tiered(1000)).await;
        append(&log, 60).await;
        let segments = log.segment_count();
        log.arm_fault(Some(FaultPoint::TierCopied));
        let (_, res) = log.cleanup(now_ms()).await;
        assert!(
            matches!(res, Err(StorageError::FaultInjected(FaultPoint::TierCopied))),
            "{res:?}"
        );
        drop(log);
        assert_eq!(logs_in(&cold_partition), 1, "copied");
        assert_eq!(logs_in(hot.path()), segments, "not yet deleted");

        let (log, report) = open(hot.path(), cold.path(), tiered(1000)).await;
        assert_eq!(report.cold_segments, 1);
        assert_eq!(log.cold_start_offset(), None, "the hot copy is the one read");
        assert_complete(&log).await;
        let (report, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert!(report.segments_tiered > 0);
        assert_eq!(log.cold_start_offset(), Some(Offset(0)));
        assert_complete(&log).await;
        assert_eq!(logs_in(&cold_partition) + logs_in(hot.path()), segments);
    });
}

/// A crash in the middle of a cold `put` leaves temporary files or an index
/// alone; neither is listed, and the hot copy (never deleted) is read.
#[test]
fn a_crash_in_the_middle_of_a_cold_put_is_invisible() {
    let hot = tempfile::tempdir().unwrap();
    let cold = tempfile::tempdir().unwrap();
    let cold_partition = cold.path().join("orders").join("0");
    run(async {
        let (log, _) = open(hot.path(), cold.path(), tiered(u64::MAX)).await;
        append(&log, 30).await;
        log.close().await.unwrap();
    });
    std::fs::create_dir_all(&cold_partition).unwrap();
    // As a crash after writing the temporaries, and one after renaming the
    // index but not the log, would leave them.
    std::fs::write(cold_partition.join("00000000000000000000.log.tmp"), b"partial").unwrap();
    std::fs::write(cold_partition.join("00000000000000000000.index.tmp"), b"partial").unwrap();
    std::fs::copy(
        hot.path().join("00000000000000000000.index"),
        cold_partition.join("00000000000000000000.index"),
    )
    .unwrap();
    run(async {
        let (log, report) = open(hot.path(), cold.path(), tiered(1000)).await;
        assert_eq!(report.cold_segments, 0, "nothing complete in the cold tier");
        assert_complete(&log).await;
        // The move then completes over the leftovers.
        let (report, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert!(report.segments_tiered > 0);
        assert!(file_names(&cold_partition).iter().all(|n| !n.ends_with(".tmp")));
        assert_complete(&log).await;
    });
}

#[test]
fn tiered_without_a_cold_store_keeps_everything() {
    let hot = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(hot.path(), tiered(1), FsyncBatcher::new())
            .await
            .unwrap();
        append(&log, 40).await;
        let segments = log.segment_count();
        let (report, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert_eq!(report, Default::default());
        assert_eq!(log.segment_count(), segments);
    });
}

#[test]
fn the_local_dir_cold_store_contract() {
    let cold = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let log_file = src.path().join("seg.log");
    std::fs::write(&log_file, vec![7u8; 3000]).unwrap();
    run(async {
        let store = LocalDirColdStore::new(cold.path());
        assert!(store.list("t/0").await.unwrap().is_empty(), "never stored: empty");
        // An index whose footer matches the log, as the log would send.
        let index = es_storage::index::SparseIndex::default().encode_file(3000, Offset(120), 55);
        let info = ColdSegmentInfo {
            base: Offset(100),
            next_offset: Offset(120),
            log_bytes: 3000,
            max_timestamp_ms: 55,
        };
        store.put("t/0", info, &log_file, index.clone()).await.unwrap();
        store.put("t/0", info, &log_file, index.clone()).await.unwrap(); // idempotent
        assert_eq!(store.list("t/0").await.unwrap(), vec![info]);
        assert_eq!(
            store.read("t/0", Offset(100), 2990, 100).await.unwrap(),
            vec![7u8; 10]
        );
        assert_eq!(store.read_index("t/0", Offset(100)).await.unwrap(), index);
        // A wrong length is refused and stores nothing.
        let bad = ColdSegmentInfo {
            base: Offset(200),
            log_bytes: 5000,
            ..info
        };
        assert!(store.put("t/0", bad, &log_file, index.clone()).await.is_err());
        assert_eq!(store.list("t/0").await.unwrap(), vec![info]);
        assert_eq!(
            names_in(&cold.path().join("t").join("0")),
            ["00000000000000000100.index", "00000000000000000100.log"],
            "a failed put leaves no temporary behind"
        );
        for name in ["", "../x", "t/..", "t//0"] {
            assert!(matches!(store.list(name).await, Err(StorageError::Invalid(_))));
        }
        store.delete("t/0", Offset(100)).await.unwrap();
        store.delete("t/0", Offset(100)).await.unwrap(); // missing is fine
        assert!(store.list("t/0").await.unwrap().is_empty());
        // Freed, not left behind half-deleted.
        assert_eq!(names_in(&cold.path().join("t").join("0")), Vec::<String>::new());
        // What a crash in the middle of freeing a deleted log leaves is
        // removed by the next list (the partition's open), and never listed.
        let leftover = cold
            .path()
            .join("t")
            .join("0")
            .join("00000000000000000100.log.deleting");
        std::fs::write(&leftover, vec![7u8; 3000]).unwrap(); // blocking-ok: test setup
        assert!(store.list("t/0").await.unwrap().is_empty());
        assert!(!leftover.exists());
        store.put("t/0", info, &log_file, index).await.unwrap();
        store.delete_partition("t/0").await.unwrap();
        assert!(store.list("t/0").await.unwrap().is_empty());
        assert!(!cold.path().join("t").join("0").exists());
        store.delete_partition("t/0").await.unwrap();
    });
}

/// The names in `dir`, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir) // blocking-ok: test
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
