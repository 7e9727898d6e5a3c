//! Truncating a replicated log in place (`PartitionLog::truncate_from`) at
//! every entry boundary of a log spanning several segments, with a crash at
//! every step of the cut: the log reopens to the old log or a prefix of it
//! holding at least the kept entries, never a hole; redone, the truncation
//! gives exactly the kept entries, and appends after it, on the same
//! handle, continue the log. Waits above the cut end with `Truncated`; a
//! cut below the committed mark is refused.

mod common;

use std::path::Path;

use common::run;
use es_storage::batch::{encode_v2, RaftStamp, CONTROL_BLANK};
use es_storage::{
    BatchBuf, EntryBody, FaultPoint, FsyncBatcher, LogConfig, Offset, PartitionLog, PlacedBatch,
    ProducerStamp, Record, Stamping, StorageError,
};

/// `(term, index, batches)`; 0 batches = a blank entry.
const ENTRIES: &[(u64, u64, usize)] = &[
    (1, 1, 0),
    (1, 2, 2),
    (1, 3, 1),
    (2, 4, 0),
    (2, 5, 3),
    (2, 6, 1),
    (3, 7, 2),
];

fn batch(tag: &str) -> BatchBuf {
    let recs: Vec<Record> = (0..2)
        .map(|i| Record {
            key: None,
            value: format!("{tag}-{i}").into_bytes(),
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
    let config = LogConfig {
        segment_bytes: 500,
        ..LogConfig::default()
    };
    PartitionLog::open(dir, config, FsyncBatcher::new())
        .await
        .unwrap()
        .0
}

fn append(log: &PartitionLog, term: u64, index: u64, batches: usize) {
    let body = if batches == 0 {
        EntryBody::Control {
            kind: CONTROL_BLANK,
            body: Vec::new(),
        }
    } else {
        let bs = (0..batches)
            .map(|b| batch(&format!("{term}/{index}/{b}")))
            .collect();
        EntryBody::Batches(bs, Stamping::Leader)
    };
    log.append_entry(term, index, body).unwrap();
}

/// The log's batches as `(term, index, base offset)`.
async fn stamps(log: &PartitionLog) -> Vec<(u64, u64, u64)> {
    let placed: Vec<PlacedBatch> = log.placed_batches().await.unwrap();
    placed
        .iter()
        .map(|p| {
            let r = p.header.raft.unwrap();
            (r.term, r.index, p.header.base_offset.0)
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Writes `ENTRIES` to a log in `dir` and closes it; its batches and
/// their stamps.
fn template(dir: &Path) -> (Vec<PlacedBatch>, Vec<(u64, u64, u64)>) {
    run(async {
        let log = open(dir).await;
        for &(t, i, n) in ENTRIES {
            append(&log, t, i, n);
        }
        log.wait_durable_index(7).await.unwrap();
        let placed = log.placed_batches().await.unwrap();
        let full = stamps(&log).await;
        log.close().await.unwrap();
        (placed, full)
    })
}

/// The offset after the entries below `cut_index`.
fn kept_end(full: &[(u64, u64, u64)], placed: &[PlacedBatch], cut_index: u64) -> u64 {
    placed
        .iter()
        .zip(full)
        .filter(|(_, s)| s.1 < cut_index)
        .map(|(p, _)| p.header.next_offset().0)
        .max()
        .unwrap_or(0)
}

/// Where a truncation is stopped, as a crash would stop it.
#[derive(Copy, Clone, Debug)]
enum Crash {
    /// After the `n`th segment after the cut is removed (0: the first).
    Removed(u32),
    /// After the cut segment is cut and fdatasynced.
    Cut,
    /// Not at all.
    Never,
}

#[test]
fn truncate_in_place_at_every_entry_boundary_with_a_crash_at_every_step() {
    let template_dir = tempfile::tempdir().unwrap();
    let (placed, full) = template(template_dir.path());
    let segments: std::collections::BTreeSet<_> = placed.iter().map(|p| p.segment).collect();
    assert!(
        segments.len() >= 3,
        "the log spans several segments: {segments:?}"
    );
    let mut crashes_seen = 0;
    for cut_index in 1..=7u64 {
        let kept: Vec<_> = full.iter().copied().filter(|s| s.1 < cut_index).collect();
        let end = kept_end(&full, &placed, cut_index);
        let mut plan: Vec<Crash> = Vec::new();
        let first = placed
            .iter()
            .find(|p| p.header.raft.unwrap().index == cut_index)
            .unwrap();
        let after = segments.iter().filter(|&&b| b > first.segment).count() as u32;
        plan.extend((0..after).map(Crash::Removed));
        plan.push(Crash::Cut);
        plan.push(Crash::Never);
        for crash in plan {
            let dir = tempfile::tempdir().unwrap();
            copy_dir(template_dir.path(), dir.path());
            let what = format!("cut at entry {cut_index}, crash {crash:?}");
            let crashed = run(async {
                let log = open(dir.path()).await;
                log.resume_entries(7);
                // The kept entries are committed: the cut is right above.
                log.set_committed(Offset(end));
                let handle = log.clone();
                match crash {
                    Crash::Removed(n) => log.arm_fault_nth(FaultPoint::TruncateSegmentRemoved, n),
                    Crash::Cut => log.arm_fault(Some(FaultPoint::TruncateCut)),
                    Crash::Never => {}
                }
                match log.truncate_from(cut_index).await {
                    Err(StorageError::FaultInjected(_)) => {
                        assert!(log.failure().is_some(), "{what}: a cut stopped halfway poisons");
                        true
                    }
                    Ok(()) => {
                        assert!(matches!(crash, Crash::Never), "{what}: the fault fired");
                        // In place: the same handle holds the cut log.
                        assert_eq!(stamps(&handle).await, kept, "{what}: in place");
                        assert_eq!(handle.next_offset().0, end, "{what}");
                        assert_eq!(handle.written_offset().0, end, "{what}");
                        assert_eq!(handle.durable_offset().0, end, "{what}");
                        assert_eq!(handle.committed_offset().0, end, "{what}");
                        assert_eq!(handle.durable_index(), cut_index, "{what}");
                        append(&handle, 9, cut_index, 2);
                        append(&handle, 9, cut_index + 1, 0);
                        handle.wait_durable_index(cut_index + 1).await.unwrap();
                        handle.close().await.unwrap();
                        false
                    }
                    Err(e) => panic!("{what}: {e}"),
                }
            });
            if crashed {
                crashes_seen += 1;
                run(async {
                    // The crash: reopen whatever is on disk.
                    let log = open(dir.path()).await;
                    let now = stamps(&log).await;
                    assert_eq!(now[..], full[..now.len()], "{what}: a prefix of the old log");
                    assert!(now.len() >= kept.len(), "{what}: the kept entries are all there");
                    if matches!(crash, Crash::Cut) {
                        assert_eq!(now, kept, "{what}: the whole cut is the new log");
                    }
                    // The store redoes the truncation, then the log goes on.
                    log.resume_entries(7);
                    log.truncate_from(cut_index).await.unwrap();
                    assert_eq!(stamps(&log).await, kept, "{what}: redone");
                    assert_eq!(log.next_offset().0, end, "{what}");
                    append(&log, 9, cut_index, 2);
                    append(&log, 9, cut_index + 1, 0);
                    log.wait_durable_index(cut_index + 1).await.unwrap();
                    log.close().await.unwrap();
                });
            }
            run(async {
                let log = open(dir.path()).await;
                let after = stamps(&log).await;
                assert_eq!(after[..kept.len()], kept[..], "{what}: the prefix stays");
                let new: Vec<_> = after[kept.len()..].iter().map(|s| (s.0, s.1)).collect();
                assert_eq!(
                    new,
                    vec![(9, cut_index), (9, cut_index), (9, cut_index + 1)],
                    "{what}"
                );
                assert_eq!(
                    after[kept.len()].2,
                    end,
                    "{what}: the new entries take the cut offsets"
                );
                log.close().await.unwrap();
            });
        }
    }
    assert!(crashes_seen > 7, "every cut crashed at least at its cut step");
}

/// Waits above the cut end with `Truncated`: a long poll past the log's
/// end and an entry's durability; appends are refused while the cut runs,
/// and taken again after it.
#[test]
fn waits_above_the_cut_end_with_truncated() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path()).await;
        for &(t, i, n) in ENTRIES {
            append(&log, t, i, n);
        }
        log.wait_durable_index(7).await.unwrap();
        log.set_committed(Offset(0));
        let end = log.next_offset();
        let poll = {
            let log = log.clone();
            glommio::spawn_local(async move { log.wait_committed(Offset(end.0 + 1)).await })
        };
        let entry = {
            let log = log.clone();
            glommio::spawn_local(async move { log.wait_durable_index(9).await })
        };
        glommio::yield_if_needed().await;
        glommio::executor().yield_task_queue_now().await;
        let cut = {
            let log = log.clone();
            glommio::spawn_local(async move { log.truncate_from(5).await })
        };
        glommio::executor().yield_task_queue_now().await;
        let refused = log.append_entry(
            9,
            8,
            EntryBody::Control {
                kind: CONTROL_BLANK,
                body: Vec::new(),
            },
        );
        assert!(
            matches!(refused, Err(StorageError::Refused { .. })),
            "placement is refused during the cut: {refused:?}"
        );
        cut.await.unwrap();
        assert!(
            matches!(poll.await, Err(StorageError::Truncated { .. })),
            "the long poll above the cut"
        );
        assert!(
            matches!(entry.await, Err(StorageError::Truncated { .. })),
            "the wait for a cut entry"
        );
        assert!(log.next_offset() < end);
        append(&log, 9, 5, 1);
        log.wait_durable_index(5).await.unwrap();
        log.close().await.unwrap();
    });
}

/// A cut below the committed mark would drop acknowledged writes: refused,
/// and the partition poisoned; nothing on disk changes.
#[test]
fn a_cut_below_the_committed_mark_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let before = run(async {
        let log = open(dir.path()).await;
        for &(t, i, n) in ENTRIES {
            append(&log, t, i, n);
        }
        log.wait_durable_index(7).await.unwrap();
        let before = stamps(&log).await;
        log.set_committed(log.next_offset());
        let refused = log.truncate_from(5).await;
        assert!(matches!(refused, Err(StorageError::Invalid(_))), "{refused:?}");
        assert!(log.failure().is_some(), "the partition is poisoned");
        before
    });
    run(async {
        let log = open(dir.path()).await;
        assert_eq!(stamps(&log).await, before, "nothing was cut");
        log.close().await.unwrap();
    });
}

/// The cut on a log that is being written (its active segment's writer
/// and recent writes open, nothing reopened): at every entry boundary the
/// same handle holds the kept entries, takes new ones after them, and a
/// reopen finds exactly that.
#[test]
fn truncate_a_live_log_at_every_entry_boundary() {
    for cut_index in 1..=7u64 {
        let dir = tempfile::tempdir().unwrap();
        let what = format!("live cut at entry {cut_index}");
        let expected = run(async {
            let log = open(dir.path()).await;
            for &(t, i, n) in ENTRIES {
                append(&log, t, i, n);
            }
            // Read once written: a rolled segment's file is created by its
            // first write.
            log.wait_durable_index(7).await.unwrap();
            let full = stamps(&log).await;
            let kept: Vec<_> = full.iter().copied().filter(|s| s.1 < cut_index).collect();
            log.truncate_from(cut_index).await.unwrap();
            assert_eq!(stamps(&log).await, kept, "{what}");
            append(&log, 9, cut_index, 3);
            append(&log, 9, cut_index + 1, 1);
            log.wait_durable_index(cut_index + 1).await.unwrap();
            let now = stamps(&log).await;
            assert_eq!(now[..kept.len()], kept[..], "{what}");
            let new: Vec<_> = now[kept.len()..].iter().map(|s| (s.0, s.1)).collect();
            assert_eq!(new.len(), 4, "{what}: {new:?}");
            log.close().await.unwrap();
            now
        });
        run(async {
            let log = open(dir.path()).await;
            assert_eq!(stamps(&log).await, expected, "{what}: reopened");
            log.close().await.unwrap();
        });
    }
}
