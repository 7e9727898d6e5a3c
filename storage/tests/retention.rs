//! Retention: closed segments go, oldest first, by age (their newest
//! record) and by size; the active segment never goes; the log start offset
//! advances and a read below it is `OffsetOutOfRange`; a crash in the middle
//! of a delete never leaves a hole or a dangling index.

mod common;

use std::rc::Rc;

use common::{file_names, now_ms, read_all, rec, run};
use es_storage::{
    CleanupPolicy, FaultPoint, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, StorageError,
};

fn config(policy: CleanupPolicy) -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        cleanup: policy,
        ..LogConfig::default()
    }
}

/// Appends `n` one-record batches stamped `ts`, values `v<offset>`.
async fn append(log: &PartitionLog, n: u64, ts: i64) {
    for _ in 0..n {
        let o = log.next_offset().0;
        log.append_durable(&[rec(Some("k"), &format!("v{o}"), ts)], ProducerStamp::NONE)
            .await
            .unwrap();
    }
}

/// The log is dense from its start to its end and holds `v<offset>`.
async fn assert_suffix(log: &PartitionLog) {
    let all = read_all(log).await;
    let start = log.log_start_offset().0;
    assert_eq!(all.len() as u64, log.durable_offset().0 - start, "no hole");
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r.offset, Offset(start + i as u64));
        assert_eq!(r.value, format!("v{}", r.offset).into_bytes());
    }
}

/// The clock is the caller's (`cleanup(now_ms)`, the broker passes its wall
/// clock): records stamped by the wall clock at `t0`, then passes with the
/// clock at `t0`, at `t0 + retention_ms` and one millisecond later. However
/// long the appends take, the verdict is the same.
#[test]
fn retention_by_time_goes_once_the_clock_passes_it() {
    const RETENTION_MS: i64 = 150;
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let policy = CleanupPolicy {
            retention_ms: Some(RETENTION_MS as u64),
            ..CleanupPolicy::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config(policy), FsyncBatcher::new())
            .await
            .unwrap();
        let t0 = now_ms();
        append(&log, 40, t0).await;
        let segments = log.segment_count();
        assert!(segments > 4, "{segments}");
        // Fresh, and exactly retention_ms old: nothing goes (a segment goes
        // once its newest record is older than that).
        for now in [t0, t0 + RETENTION_MS] {
            let (report, res) = log.cleanup(now).await;
            res.unwrap();
            assert_eq!(report.segments_deleted, 0, "at t0 + {} ms", now - t0);
            assert_eq!(log.segment_count(), segments);
        }
        // Once the clock has moved past retention_ms, every closed segment
        // goes, in one pass, and the active one stays.
        let (report, res) = log.cleanup(t0 + RETENTION_MS + 1).await;
        res.unwrap();
        assert_eq!(report.segments_deleted as usize, segments - 1);
        assert_eq!(log.segment_count(), 1);
        assert_eq!(log.log_start_offset(), log.active_base());
        assert!(log.log_start_offset() > Offset(0));
        assert_suffix(&log).await;
        // Below the start: a clear error naming it.
        match log.read(Offset(0), 1 << 20, log.durable_offset()).await {
            Err(StorageError::OffsetOutOfRange { offset: 0, log_start }) => {
                assert_eq!(log_start, log.log_start_offset().0)
            }
            other => panic!("expected OffsetOutOfRange, got {other:?}"),
        }
        // Appends go on at the right offset; a restart keeps the new start.
        append(&log, 5, now_ms()).await;
        let start = log.log_start_offset();
        log.close().await.unwrap();
        let (log, report) =
            PartitionLog::open(dir.path(), config(CleanupPolicy::default()), FsyncBatcher::new())
                .await
                .unwrap();
        assert!(report.scanned.is_empty());
        assert_eq!(log.log_start_offset(), start);
        assert_eq!(log.durable_offset(), Offset(45));
        assert_suffix(&log).await;
    });
}

#[test]
fn retention_by_time_takes_whole_segments_by_their_newest_record() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let policy = CleanupPolicy {
            retention_ms: Some(1000),
            ..CleanupPolicy::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config(policy), FsyncBatcher::new())
            .await
            .unwrap();
        // Timestamps 0, 100, 200, ...: a segment goes once its newest record
        // is more than 1000 ms older than the clock.
        for i in 0..40i64 {
            let o = log.next_offset().0;
            log.append_durable(&[rec(Some("k"), &format!("v{o}"), i * 100)], ProducerStamp::NONE)
                .await
                .unwrap();
        }
        let now = 2500;
        let (report, res) = log.cleanup(now).await;
        res.unwrap();
        assert!(report.segments_deleted > 0);
        // Every record before the start was in a segment that had expired;
        // the first segment kept has a record at or after now - 1000.
        let start = log.log_start_offset().0;
        let first = log.read(Offset(start), 1 << 20, log.active_base()).await.unwrap();
        let newest_kept_first_segment = first.iter().map(|r| r.timestamp_ms).max().unwrap();
        assert!(
            newest_kept_first_segment >= now - 1000,
            "{newest_kept_first_segment}"
        );
        assert!(
            (start as i64 - 1) * 100 < now - 1000,
            "the record before the start had expired"
        );
        assert_suffix(&log).await;
        // An unchanged clock changes nothing more.
        let (report, res) = log.cleanup(now).await;
        res.unwrap();
        assert_eq!(report.segments_deleted, 0);
    });
}

#[test]
fn retention_by_size_keeps_the_partition_under_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let policy = CleanupPolicy {
            retention_bytes: Some(1000),
            ..CleanupPolicy::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config(policy), FsyncBatcher::new())
            .await
            .unwrap();
        append(&log, 60, 0).await;
        let before = log.hot_bytes();
        assert!(before > 3000);
        let (report, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert!(report.segments_deleted > 0);
        assert_eq!(report.bytes_deleted, before - log.hot_bytes());
        assert!(log.hot_bytes() <= 1000, "{}", log.hot_bytes());
        assert_suffix(&log).await;
        // Deleted segments are freed and gone, not left renamed.
        let names = file_names(dir.path());
        assert!(!names.iter().any(|n| n.ends_with(".deleting")), "{names:?}");
        assert_eq!(
            names.iter().filter(|n| n.ends_with(".log")).count(),
            log.segment_count()
        );
        // Only what pushed the partition over the limit went: segments are
        // at most 400 bytes, so deleting one more than needed would leave
        // 600 or less.
        assert!(log.hot_bytes() > 600, "{}", log.hot_bytes());
        assert!(log.segment_count() >= 2);

        // A limit below the active segment's size leaves the active alone.
        let tiny = CleanupPolicy {
            retention_bytes: Some(1),
            ..CleanupPolicy::default()
        };
        log.set_config(config(tiny)).unwrap();
        let (_, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert_eq!(log.segment_count(), 1);
        assert_eq!(log.log_start_offset(), log.active_base());
        assert_suffix(&log).await;
        log.close().await.unwrap();
    });
}

#[test]
fn compact_only_policy_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let policy = CleanupPolicy {
            delete: false,
            compact: true,
            retention_bytes: Some(1),
            ..CleanupPolicy::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config(policy), FsyncBatcher::new())
            .await
            .unwrap();
        for i in 0..30u64 {
            log.append_durable(
                &[rec(Some(&format!("k{i}")), &format!("v{i}"), 0)],
                ProducerStamp::NONE,
            )
            .await
            .unwrap();
        }
        let (report, res) = log.cleanup(now_ms()).await;
        res.unwrap();
        assert_eq!(report.segments_deleted, 0);
        assert_eq!(log.log_start_offset(), Offset(0));
        assert_eq!(read_all(&log).await.len(), 30);
    });
}

/// Crash mid-delete at each step, simulated by a fault point: the files stay
/// as that step left them and the log is reopened without a close.
#[test]
fn a_crash_in_the_middle_of_a_delete_leaves_a_suffix_and_no_dangling_index() {
    for point in [
        FaultPoint::RetentionLogRemoved,
        FaultPoint::RetentionSegmentRemoved,
    ] {
        let dir = tempfile::tempdir().unwrap();
        run(async {
            let policy = CleanupPolicy {
                retention_bytes: Some(1),
                ..CleanupPolicy::default()
            };
            let (log, _) = PartitionLog::open(dir.path(), config(policy.clone()), FsyncBatcher::new())
                .await
                .unwrap();
            append(&log, 40, 0).await;
            let segments = log.segment_count();
            log.arm_fault(Some(point));
            let (report, res) = log.cleanup(now_ms()).await;
            assert!(
                matches!(res, Err(StorageError::FaultInjected(p)) if p == point),
                "{res:?}"
            );
            assert_eq!(report.segments_deleted, 0, "the first delete did not finish");
            // The partition stops as if the process died.
            assert!(log.failure().is_some());
            drop(log);

            let names = file_names(dir.path());
            let logs = names.iter().filter(|n| n.ends_with(".log")).count();
            assert_eq!(logs, segments - 1, "the first segment's log is gone: {names:?}");
            let (log, report) = PartitionLog::open(dir.path(), config(policy.clone()), FsyncBatcher::new())
                .await
                .unwrap();
            // The renamed log, not yet freed, is a leftover either way; the
            // orphan index only if the crash came before its unlink.
            let mut removed: Vec<String> = report
                .leftovers
                .removed
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            removed.sort();
            if point == FaultPoint::RetentionLogRemoved {
                assert_eq!(
                    removed,
                    ["00000000000000000000.index", "00000000000000000000.log.deleting"],
                    "{report:?}"
                );
            } else {
                assert_eq!(removed, ["00000000000000000000.log.deleting"], "{report:?}");
            }
            assert!(
                !file_names(dir.path()).iter().any(|n| n.ends_with(".deleting")),
                "open removed the half-deleted log"
            );
            assert_eq!(log.segment_count(), segments - 1);
            assert!(log.log_start_offset() > Offset(0));
            assert_suffix(&log).await;
            for n in file_names(dir.path()) {
                if let Some(stem) = n.strip_suffix(".index") {
                    assert!(dir.path().join(format!("{stem}.log")).exists(), "dangling {n}");
                }
            }
            // Retention then finishes the job.
            let (_, res) = log.cleanup(now_ms()).await;
            res.unwrap();
            assert_eq!(log.segment_count(), 1);
            assert_suffix(&log).await;
            log.close().await.unwrap();
        });
    }
}

/// The other order a crash could leave (the index gone, the log not, if the
/// directory entries reached the disk out of order): the segment is back,
/// whole, re-indexed from its log.
#[test]
fn a_segment_whose_index_is_gone_comes_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(dir.path(), config(CleanupPolicy::default()), FsyncBatcher::new())
            .await
            .unwrap();
        append(&log, 40, 0).await;
        log.close().await.unwrap();
    });
    std::fs::remove_file(dir.path().join("00000000000000000000.index")).unwrap();
    run(async {
        let (log, report) =
            PartitionLog::open(dir.path(), config(CleanupPolicy::default()), FsyncBatcher::new())
                .await
                .unwrap();
        assert_eq!(report.scanned.len(), 1);
        assert_eq!(log.log_start_offset(), Offset(0));
        assert_suffix(&log).await;
    });
}

/// Reads racing retention on the same shard: each read returns records in
/// order from where it asked, or `OffsetOutOfRange` naming a start above
/// that offset.
#[test]
fn reads_racing_retention_are_correct_or_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let policy = CleanupPolicy {
            retention_bytes: Some(1200),
            ..CleanupPolicy::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config(policy), FsyncBatcher::new())
            .await
            .unwrap();
        let log = Rc::new(log);
        append(&log, 20, 0).await;
        let writer = {
            let log = log.clone();
            glommio::spawn_local(async move {
                for _ in 0..30 {
                    append(&log, 5, 0).await;
                    let (_, res) = log.cleanup(now_ms()).await;
                    res.unwrap();
                }
            })
        };
        let reader = {
            let log = log.clone();
            glommio::spawn_local(async move {
                let mut out_of_range = 0;
                for i in 0..400u64 {
                    let from = Offset(i % log.durable_offset().0.max(1));
                    match log.read_records(from, 64, log.durable_offset()).await {
                        Ok(got) => {
                            for (j, r) in got.records.iter().enumerate() {
                                assert_eq!(r.offset, Offset(from.0 + j as u64));
                                assert_eq!(r.value, format!("v{}", r.offset).into_bytes());
                            }
                        }
                        Err(StorageError::OffsetOutOfRange { offset, log_start }) => {
                            assert!(offset < log_start);
                            out_of_range += 1;
                        }
                        Err(e) => panic!("read failed: {e}"),
                    }
                    glommio::yield_if_needed().await;
                }
                out_of_range
            })
        };
        writer.await;
        let out_of_range = reader.await;
        eprintln!("reads that met a moved start: {out_of_range}");
        assert_suffix(&log).await;
    });
}
