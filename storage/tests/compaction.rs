//! Key compaction: after compaction the closed part of the log holds exactly
//! the latest record per key (a property test against a model, across many
//! segments, with reopens and key maps too small for one pass); tombstones go
//! after `delete_retention_ms`; keyless records are refused; a crash at each
//! step of the swap leaves the old set or the new set, never a mix.

mod common;

use std::collections::HashMap;
use std::rc::Rc;

use common::{file_names, now_ms, read_all, rec, run};
use es_storage::{
    CleanupPolicy, FaultPoint, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record,
    StorageError, StoredRecord, MANIFEST_NAME,
};
use proptest::prelude::*;

const DELETE_RETENTION_MS: u64 = 50;

fn config(segment_bytes: u64, map_bytes_max: usize) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 64,
        compaction_map_bytes_max: map_bytes_max,
        cleanup: CleanupPolicy {
            delete: false,
            compact: true,
            delete_retention_ms: DELETE_RETENTION_MS,
            ..CleanupPolicy::default()
        },
        ..LogConfig::default()
    }
}

/// What the closed part of the log must hold after compaction at `now` with
/// closed end `end`: the latest record of each key below `end` unless it is
/// an expired tombstone; everything at or past `end`.
fn expected(model: &[StoredRecord], end: Offset, now: i64) -> Vec<StoredRecord> {
    let mut latest: HashMap<&[u8], Offset> = HashMap::new();
    for r in model.iter().filter(|r| r.offset < end) {
        latest.insert(r.key.as_deref().expect("keyed"), r.offset);
    }
    model
        .iter()
        .filter(|r| {
            if r.offset >= end {
                return true;
            }
            let is_latest = latest[r.key.as_deref().expect("keyed")] == r.offset;
            let expired_tombstone = r.value.is_empty() && now >= r.timestamp_ms + DELETE_RETENTION_MS as i64;
            is_latest && !expired_tombstone
        })
        .cloned()
        .collect()
}

/// Runs cleanup until a call finds no compaction due (a small key map takes
/// several passes).
async fn compact_fully(log: &PartitionLog, now: i64) {
    for _ in 0..10_000 {
        let (report, res) = log.cleanup(now).await;
        res.unwrap();
        if report.compaction_passes == 0 {
            return;
        }
    }
    panic!("compaction never settled");
}

async fn append_keyed(
    log: &PartitionLog,
    model: &mut Vec<StoredRecord>,
    recs: &[(u8, Option<u32>)],
    ts: i64,
) {
    let records: Vec<Record> = recs
        .iter()
        .map(|(k, v)| Record {
            key: Some(format!("key-{k}").into_bytes()),
            value: v.map_or(Vec::new(), |v| format!("value-{v}").into_bytes()),
            timestamp_ms: ts,
        })
        .collect();
    let a = log.append_durable(&records, ProducerStamp::NONE).await.unwrap();
    for (i, r) in records.into_iter().enumerate() {
        model.push(StoredRecord {
            offset: Offset(a.base_offset.0 + i as u64),
            timestamp_ms: r.timestamp_ms,
            key: r.key,
            value: r.value,
        });
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Records with keys 0..12 and a value, or `None` for a tombstone.
    Append(Vec<(u8, Option<u32>)>),
    AppendKeyless,
    Advance(i64),
    Compact,
    Read(u64),
    Reopen {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let record = (0u8..12, proptest::option::weighted(0.85, 0u32..1000));
    prop_oneof![
        8 => proptest::collection::vec(record, 1..5).prop_map(Op::Append),
        1 => Just(Op::AppendKeyless),
        2 => (0i64..40).prop_map(Op::Advance),
        3 => Just(Op::Compact),
        2 => (0u64..200).prop_map(Op::Read),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_exactly_the_latest_record_per_key(
        ops in proptest::collection::vec(op(), 1..60),
        segment_bytes in 150u64..1200,
        small_map in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        // A small map holds a handful of keys: compaction then takes several
        // passes, each mapping part of the log.
        let cfg = config(segment_bytes, if small_map { 300 } else { 64 << 20 });
        run(async move {
            let mut model: Vec<StoredRecord> = Vec::new();
            let mut clock = 1_000i64;
            let (mut log, _) = PartitionLog::open(dir.path(), cfg.clone(), FsyncBatcher::new()).await.unwrap();
            // What the log must hold now: the model, minus what compaction
            // may have dropped (checked exactly right after each compaction).
            let mut visible: Vec<StoredRecord> = Vec::new();
            for op in ops {
                match op {
                    Op::Append(recs) => {
                        let before = model.len();
                        append_keyed(&log, &mut model, &recs, clock).await;
                        visible.extend_from_slice(&model[before..]);
                    }
                    Op::AppendKeyless => {
                        let next = log.next_offset();
                        let got = log.append_durable(&[rec(None, "x", clock)], ProducerStamp::NONE).await;
                        assert!(matches!(got, Err(StorageError::Invalid(_))), "{got:?}");
                        assert_eq!(log.next_offset(), next, "a refused append changes nothing");
                    }
                    Op::Advance(ms) => clock += ms,
                    Op::Compact => {
                        compact_fully(&log, clock).await;
                        visible = expected(&model, log.active_base(), clock);
                        assert_eq!(read_all(&log).await, visible);
                    }
                    Op::Read(from) => {
                        let from = Offset(from.min(log.durable_offset().0));
                        let got = log.read_records(from, usize::MAX, log.durable_offset()).await.unwrap();
                        let want: Vec<StoredRecord> = visible.iter().filter(|r| r.offset >= from).cloned().collect();
                        assert_eq!(got.records, want, "read from {from}");
                        assert_eq!(got.next_offset, log.durable_offset().max(from));
                    }
                    Op::Reopen { clean } => {
                        if clean {
                            log.close().await.unwrap();
                        }
                        drop(log);
                        let (reopened, report) =
                            PartitionLog::open(dir.path(), cfg.clone(), FsyncBatcher::new()).await.unwrap();
                        assert!(report.leftovers.removed.is_empty() && report.leftovers.swap_completed.is_none());
                        log = reopened;
                    }
                }
                assert_eq!(log.next_offset(), Offset(model.len() as u64));
                assert_eq!(log.log_start_offset(), Offset(0), "compaction never moves the start");
            }
            assert_eq!(read_all(&log).await, visible);
            compact_fully(&log, clock).await;
            assert_eq!(read_all(&log).await, expected(&model, log.active_base(), clock));
        });
    }
}

#[test]
fn tombstones_go_after_their_delay() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(dir.path(), config(300, 64 << 20), FsyncBatcher::new())
            .await
            .unwrap();
        let mut model = Vec::new();
        append_keyed(&log, &mut model, &[(1, Some(1)), (2, Some(2))], 1000).await;
        append_keyed(&log, &mut model, &[(1, None)], 2000).await; // tombstone for key 1 at offset 2
        for i in 0..20 {
            append_keyed(&log, &mut model, &[(3, Some(i))], 2000).await;
        }
        // Before the delay: key 1's value is gone, its tombstone stays.
        compact_fully(&log, 2000 + DELETE_RETENTION_MS as i64 - 1).await;
        let got = read_all(&log).await;
        assert!(
            got.iter().all(|r| r.offset != Offset(0)),
            "the deleted value went"
        );
        let tombstone = got
            .iter()
            .find(|r| r.offset == Offset(2))
            .expect("the tombstone stays");
        assert!(tombstone.value.is_empty());
        assert!(got.iter().any(|r| r.offset == Offset(1)), "key 2 stays");
        // Once the delay has passed, the tombstone goes too (nothing new was
        // appended: the pass is due because a tombstone expired).
        compact_fully(&log, 2000 + DELETE_RETENTION_MS as i64).await;
        let got = read_all(&log).await;
        assert!(
            got.iter().all(|r| r.key.as_deref() != Some(&b"key-1"[..])),
            "{got:?}"
        );
        assert_eq!(
            got.iter()
                .filter(|r| r.key.as_deref() == Some(&b"key-2"[..]))
                .count(),
            1
        );
        log.close().await.unwrap();
    });
}

/// As above, with timestamps from the wall clock and single passes. The
/// clock is the caller's (`cleanup(now_ms)`): records stamped at `t0`,
/// then passes with the clock at `t0`, just before the tombstone's expiry
/// and at it. However long the appends take, the verdict is the same.
#[test]
fn tombstones_go_after_their_delay_on_wall_clock_timestamps() {
    const DELAY_MS: i64 = 100;
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let mut cfg = config(300, 64 << 20);
        cfg.cleanup.delete_retention_ms = DELAY_MS as u64;
        let (log, _) = PartitionLog::open(dir.path(), cfg, FsyncBatcher::new())
            .await
            .unwrap();
        let mut model = Vec::new();
        let t0 = now_ms();
        append_keyed(&log, &mut model, &[(1, Some(1))], t0).await;
        append_keyed(&log, &mut model, &[(1, None)], t0).await;
        for i in 0..20 {
            append_keyed(&log, &mut model, &[(3, Some(i))], t0).await;
        }
        // The value goes at the first pass; its tombstone stays until
        // delete_retention_ms after its timestamp.
        for now in [t0, t0 + DELAY_MS - 1] {
            let (_, res) = log.cleanup(now).await;
            res.unwrap();
            let got = read_all(&log).await;
            assert!(
                got.iter().all(|r| r.offset != Offset(0)),
                "the value is gone at the first pass"
            );
            assert!(
                got.iter().any(|r| r.offset == Offset(1)),
                "the tombstone stays at t0 + {} ms",
                now - t0
            );
        }
        let (_, res) = log.cleanup(t0 + DELAY_MS).await;
        res.unwrap();
        let got = read_all(&log).await;
        assert!(
            got.iter().all(|r| r.offset != Offset(1)),
            "the tombstone goes at t0 + {DELAY_MS} ms"
        );
    });
}

#[test]
fn keyless_records_are_refused_and_old_ones_survive_a_switch_to_compact() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let mut cfg = config(300, 64 << 20);
        cfg.cleanup.compact = false;
        cfg.cleanup.delete = true;
        let (log, _) = PartitionLog::open(dir.path(), cfg.clone(), FsyncBatcher::new())
            .await
            .unwrap();
        for i in 0..10 {
            log.append_durable(&[rec(None, &format!("keyless-{i}"), 0)], ProducerStamp::NONE)
                .await
                .unwrap();
            log.append_durable(&[rec(Some("k"), &format!("keyed-{i}"), 0)], ProducerStamp::NONE)
                .await
                .unwrap();
        }
        log.set_config(config(300, 64 << 20)).unwrap();
        let got = log
            .append_durable(
                &[rec(Some("k"), "fine", 0), rec(None, "no key", 0)],
                ProducerStamp::NONE,
            )
            .await;
        match got {
            Err(StorageError::Invalid(m)) => assert!(m.contains("no key"), "{m}"),
            other => panic!("expected Invalid, got {other:?}"),
        }
        assert_eq!(log.next_offset(), Offset(20));
        compact_fully(&log, 0).await;
        let got = read_all(&log).await;
        let end = log.active_base();
        for i in 0..10u64 {
            assert!(
                got.iter().any(|r| r.value == format!("keyless-{i}").into_bytes()),
                "keyless record {i} kept"
            );
        }
        let keyed_below_end = got.iter().filter(|r| r.key.is_some() && r.offset < end).count();
        assert!(
            keyed_below_end <= 1,
            "one value of k below the active segment: {got:?}"
        );
    });
}

#[test]
fn compaction_merges_segments_and_reads_skip_gaps() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(dir.path(), config(400, 64 << 20), FsyncBatcher::new())
            .await
            .unwrap();
        let mut model = Vec::new();
        for i in 0..200u32 {
            append_keyed(&log, &mut model, &[((i % 3) as u8, Some(i))], 0).await;
        }
        let segments = log.segment_count();
        let hot = log.hot_bytes();
        let (report, res) = log.cleanup(0).await;
        res.unwrap();
        assert_eq!(report.compaction_passes, 1);
        assert!(report.compaction_bytes_reclaimed > 0);
        assert_eq!(report.compaction_bytes_reclaimed, hot - log.hot_bytes());
        assert!(report.compaction_records_dropped > 150);
        assert!(
            log.segment_count() < segments / 4,
            "{} of {segments}",
            log.segment_count()
        );
        let end = log.active_base();
        assert_eq!(read_all(&log).await, expected(&model, end, 0));
        // A read that starts in a gap and ends before the next record returns
        // nothing and moves on to its end.
        let got = log
            .read_records(Offset(1), usize::MAX, Offset(end.0 - 3))
            .await
            .unwrap();
        assert!(got.records.is_empty(), "{:?}", got.records);
        assert_eq!(got.next_offset, Offset(end.0 - 3));
        // A small budget moves past gaps one batch at a time.
        let got = log
            .read_records(Offset(0), 1, log.durable_offset())
            .await
            .unwrap();
        assert!(got.next_offset > Offset(0));
        // Nothing new: the next cleanup does not rewrite anything.
        let (report, res) = log.cleanup(0).await;
        res.unwrap();
        assert_eq!(report.compaction_passes, 0);
        assert_eq!(report.compacted_segments, 0);
        // Reopen: the compacted segments are trusted without a scan.
        log.close().await.unwrap();
        let (log, report) = PartitionLog::open(dir.path(), config(400, 64 << 20), FsyncBatcher::new())
            .await
            .unwrap();
        assert!(report.scanned.is_empty(), "{report:?}");
        assert_eq!(read_all(&log).await, expected(&model, end, 0));
    });
}

#[test]
fn a_small_key_map_takes_several_passes_and_ends_the_same() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        // About one key per pass.
        let (log, _) = PartitionLog::open(dir.path(), config(400, 100), FsyncBatcher::new())
            .await
            .unwrap();
        let mut model = Vec::new();
        for i in 0..150u32 {
            let rec = if i % 23 == 7 {
                ((i % 20) as u8, None)
            } else {
                ((i % 20) as u8, Some(i))
            };
            append_keyed(&log, &mut model, &[rec], 0).await;
        }
        let mut passes = 0;
        loop {
            let (report, res) = log.cleanup(1000).await;
            res.unwrap();
            if report.compaction_passes == 0 {
                break;
            }
            passes += 1;
        }
        assert!(passes > 5, "{passes}");
        assert_eq!(read_all(&log).await, expected(&model, log.active_base(), 1000));
    });
}

/// Produce and read on the shard while compaction rewrites: appends keep
/// their offsets and content, and the result is still exactly the model.
#[test]
fn compaction_runs_beside_appends_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let cfg = config(2000, 64 << 20);
        let (log, _) = PartitionLog::open(dir.path(), cfg, FsyncBatcher::new())
            .await
            .unwrap();
        let log = Rc::new(log);
        let mut model = Vec::new();
        for i in 0..600u32 {
            append_keyed(&log, &mut model, &[((i % 50) as u8, Some(i))], 0).await;
        }
        let model = Rc::new(std::cell::RefCell::new(model));
        let appender = {
            let (log, model) = (log.clone(), model.clone());
            glommio::spawn_local(async move {
                for i in 0..300u32 {
                    let recs = [((i % 7) as u8, Some(10_000 + i))];
                    let mut m = model.borrow().clone();
                    append_keyed(&log, &mut m, &recs, 0).await;
                    *model.borrow_mut() = m;
                    if i % 10 == 0 {
                        let _ = read_all(&log).await;
                    }
                }
            })
        };
        let compactor = {
            let log = log.clone();
            glommio::spawn_local(async move {
                for _ in 0..20 {
                    let (_, res) = log.cleanup(0).await;
                    res.unwrap();
                    glommio::yield_if_needed().await;
                }
            })
        };
        appender.await;
        compactor.await;
        compact_fully(&log, 0).await;
        let model = model.borrow().clone();
        assert_eq!(model.len(), 900);
        assert_eq!(read_all(&log).await, expected(&model, log.active_base(), 0));
    });
}

/// A crash (simulated by a fault point: the step stops, the files stay as
/// they are, the log is reopened without a close) at each step of the swap.
/// Before the commit the old set survives whole; from the commit on the new
/// set does; never a mix, never a loss, and no leftovers after reopen.
#[test]
fn a_crash_at_each_compaction_step_leaves_the_old_or_the_new_set() {
    let steps = [
        (FaultPoint::CompactionOutputWritten, false),
        (FaultPoint::CompactionCommitted, true),
        (FaultPoint::CompactionIndexRenamed, true),
        (FaultPoint::CompactionOutputRenamed, true),
        (FaultPoint::CompactionInputsRemoved, true),
    ];
    for (point, new_set_wins) in steps {
        let dir = tempfile::tempdir().unwrap();
        run(async {
            let (log, _) = PartitionLog::open(dir.path(), config(500, 64 << 20), FsyncBatcher::new())
                .await
                .unwrap();
            let mut model = Vec::new();
            for i in 0..120u32 {
                let rec = if i % 17 == 5 {
                    (2, None)
                } else {
                    ((i % 6) as u8, Some(i))
                };
                append_keyed(&log, &mut model, &[rec], 0).await;
            }
            // One group: every closed segment fits the new segment size, so
            // the swap replaces them all at once.
            log.set_config(config(1 << 20, 64 << 20)).unwrap();
            let end = log.active_base();
            let old_set = read_all(&log).await;
            let now = DELETE_RETENTION_MS as i64; // tombstones at 0 have expired
            let new_set = expected(&model, end, now);
            assert_ne!(old_set, new_set);
            log.arm_fault(Some(point));
            let (_, res) = log.cleanup(now).await;
            assert!(
                matches!(res, Err(StorageError::FaultInjected(p)) if p == point),
                "{point:?}: {res:?}"
            );
            assert!(log.failure().is_some());
            drop(log);
            if !new_set_wins {
                // A crash while the manifest was being written leaves its
                // temporary file too (the rename is the commit).
                std::fs::write(
                    dir.path().join("compaction.swap.tmp"),
                    b"es-compaction-swap 1\noutp",
                )
                .unwrap();
            }

            let (log, report) = PartitionLog::open(dir.path(), config(500, 64 << 20), FsyncBatcher::new())
                .await
                .unwrap();
            let got = read_all(&log).await;
            if new_set_wins {
                assert_eq!(got, new_set, "{point:?}: the new set");
                assert_eq!(report.leftovers.swap_completed, Some(Offset(0)), "{point:?}");
            } else {
                assert_eq!(got, old_set, "{point:?}: the old set");
                assert_eq!(report.leftovers.swap_completed, None);
                assert_eq!(report.leftovers.removed.len(), 3, "{point:?}: {report:?}");
            }
            assert!(
                report.scanned.len() == 1
                    && report.scanned[0]
                        .0
                        .ends_with(format!("{:020}.log", log.active_base().0)),
                "{point:?}: only the active segment (no clean close) is scanned: {report:?}"
            );
            let names = file_names(dir.path());
            assert!(
                names.iter().all(|n| !n.ends_with(".cleaned")
                    && !n.ends_with(".deleting")
                    && n != MANIFEST_NAME
                    && !n.ends_with(".tmp")),
                "{point:?}: leftovers {names:?}"
            );
            for n in &names {
                if let Some(stem) = n.strip_suffix(".index") {
                    assert!(names.contains(&format!("{stem}.log")), "{point:?}: dangling {n}");
                }
            }
            // And compaction converges from either set.
            compact_fully(&log, now).await;
            assert_eq!(read_all(&log).await, new_set, "{point:?}: after compacting again");
            log.close().await.unwrap();
        });
    }
}

/// A damaged manifest is not guessed at: open refuses with `Corrupt`.
#[test]
fn a_damaged_swap_manifest_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = PartitionLog::open(dir.path(), config(500, 64 << 20), FsyncBatcher::new())
            .await
            .unwrap();
        log.close().await.unwrap();
    });
    std::fs::write(
        dir.path().join(MANIFEST_NAME),
        b"es-compaction-swap 1\noutput 0\ncrc 00000000\n",
    )
    .unwrap();
    run(async {
        let got = PartitionLog::open(dir.path(), config(500, 64 << 20), FsyncBatcher::new()).await;
        assert!(
            matches!(got, Err(StorageError::Corrupt { .. })),
            "{:?}",
            got.err()
        );
    });
}
