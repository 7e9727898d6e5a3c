//! What a replicated log gives its Raft replica for cleanup and snapshot
//! installs: the retention cut (`retention_cut`: what retention would
//! delete now, whatever the cleanup limit), a read hold (`hold_from`:
//! cleanup keeps off what a snapshot transfer reads until it is dropped),
//! and a reset (`reset_to`: the log emptied and started again at another
//! offset and index, in place, surviving a reopen).

mod common;

use std::path::Path;

use common::run;
use es_storage::batch::{encode_v2, RaftStamp};
use es_storage::{
    BatchBuf, CleanupPolicy, EntryBody, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record,
    Stamping,
};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 500,
        cleanup: CleanupPolicy {
            retention_bytes: Some(1),
            ..CleanupPolicy::default()
        },
        ..LogConfig::default()
    }
}

fn batch(tag: &str) -> BatchBuf {
    let recs: Vec<Record> = (0..2)
        .map(|i| Record {
            key: None,
            value: format!("{tag}-{i}-{}", "v".repeat(40)).into_bytes(),
            timestamp_ms: 3,
        })
        .collect();
    let mut out = Vec::new();
    encode_v2(
        Offset(0),
        &recs,
        ProducerStamp::NONE,
        RaftStamp::default(),
        &mut out,
    );
    BatchBuf::from(out)
}

async fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir, config(), FsyncBatcher::new())
        .await
        .unwrap()
        .0
}

async fn fill(log: &PartitionLog, first: u64, n: u64) {
    for i in first..first + n {
        log.append_entry(
            1,
            i,
            EntryBody::Batches(vec![batch(&format!("e{i}"))], Stamping::Leader),
        )
        .unwrap();
    }
    log.wait_durable_index(first + n - 1).await.unwrap();
}

#[test]
fn a_read_hold_keeps_retention_off_until_it_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path()).await;
        fill(&log, 1, 30).await;
        assert!(log.segment_count() > 3, "the log rolled");
        let cut = log.retention_cut(0).expect("retention would delete");
        assert_eq!(
            cut,
            log.active_base(),
            "everything but the active segment would go"
        );
        log.set_cleanup_limit(log.next_offset());
        let hold = log.hold_from(Offset(0));
        assert_eq!(log.holds(), 1);
        let (report, r) = log.cleanup(0).await;
        r.unwrap();
        assert_eq!(report.segments_deleted, 0, "the hold keeps every segment");
        assert_eq!(log.hot_start_offset(), Offset(0));
        drop(hold);
        assert_eq!(log.holds(), 0);
        let (report, r) = log.cleanup(0).await;
        r.unwrap();
        assert!(report.segments_deleted > 0);
        assert_eq!(log.hot_start_offset(), cut, "retention went to its cut");
        assert_eq!(log.retention_cut(0), None, "nothing more to delete");
        log.close().await.unwrap();
    });
}

#[test]
fn a_reset_starts_the_log_again_at_another_offset_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path()).await;
        fill(&log, 1, 20).await;
        log.reset_to(Offset(5000), 300).await.unwrap();
        assert_eq!(log.next_offset(), Offset(5000));
        assert_eq!(log.hot_start_offset(), Offset(5000));
        assert_eq!(log.segment_count(), 1);
        assert!(log.placed_batches().await.unwrap().is_empty());
        fill(&log, 300, 12).await;
        let placed = log.placed_batches().await.unwrap();
        assert_eq!(placed[0].header.base_offset, Offset(5000));
        assert_eq!(placed[0].header.raft.unwrap().index, 300);
        let end = log.next_offset();
        log.close().await.unwrap();

        let log = open(dir.path()).await;
        assert_eq!(log.hot_start_offset(), Offset(5000));
        assert_eq!(log.next_offset(), end);
        let again = log.placed_batches().await.unwrap();
        assert_eq!(again.len(), placed.len());
        let names: Vec<String> = std::fs::read_dir(dir.path()) // blocking-ok: a test's check
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.starts_with("00000000000000000000")),
            "no old segment is left: {names:?}"
        );
        log.close().await.unwrap();
    });
}
