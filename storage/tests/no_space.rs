//! A write that finds no room (ENOSPC, EDQUOT) is refused, not fatal: the
//! appends it carried and every one queued behind it get
//! `StorageError::Refused`, the partition is not poisoned, the log goes
//! back to its last complete write (the refused bytes are cut off the file,
//! early pages included, so neither a reader nor a restart ever sees them),
//! and the next append, once there is room, is written at the offsets
//! refused. What was acknowledged before stays, across a close or a crash.
//!
//! The full disk is injected (`PartitionLog::arm_no_space`): a segment
//! write whose bytes reach the file and then fails, a roll that finds no
//! room for the sealed segment's index or for the new segment's file. The
//! kernel's own ENOSPC, on a small filesystem, is broker/tests/full_disk.rs.

mod common;

use std::path::Path;

use common::{contents, ending_at, expect, rec, run, run_with_disk_threads, Model, DISK_THREAD_MODES};
use es_storage::{
    Appended, FsyncBatcher, LogConfig, NoSpaceAt, Offset, PartitionLog, ProducerStamp, Record, StorageError,
};

/// (disk threads, direct writes): direct writes on io_uring and on disk
/// threads, and buffered writes.
const MODES: [(usize, bool); 3] = [(0, true), (2, true), (0, false)];

async fn open(dir: &Path, direct: bool, segment_bytes: u64) -> (PartitionLog, es_storage::OpenReport) {
    let config = LogConfig {
        direct_writes: direct,
        segment_bytes,
        ..LogConfig::default()
    };
    PartitionLog::open(dir, config, FsyncBatcher::new())
        .await
        .expect("open")
}

/// One record of about `len` bytes, its value telling `i` apart.
fn batch(i: usize, len: usize) -> Vec<Record> {
    let value = format!("{i:06}-{}", "v".repeat(len));
    vec![rec(Some(&format!("k{i}")), &value, 1_700_000_000_000 + i as i64)]
}

fn file_len(dir: &Path, base: u64) -> u64 {
    std::fs::metadata(es_storage::log_path(dir, Offset(base)))
        .expect("segment file")
        .len()
}

fn refused<T: std::fmt::Debug>(r: &Result<T, StorageError>) -> bool {
    matches!(r, Err(StorageError::Refused { .. }))
}

#[test]
fn a_write_without_room_is_refused_and_the_next_one_goes_on() {
    for (threads, direct) in MODES {
        let what = format!("{threads} disk threads, direct {direct}");
        let dir = tempfile::tempdir().unwrap();
        let model = run_with_disk_threads(threads, async {
            let (log, _) = open(dir.path(), direct, LogConfig::default().segment_bytes).await;
            let mut model = Model::new();
            for i in 0..5 {
                let b = batch(i, 700);
                log.append_durable(&b, ProducerStamp::NONE).await.unwrap();
                expect(&mut model, &b);
            }
            let before = (log.next_offset(), log.durable_offset(), log.hot_bytes());
            log.arm_no_space(Some(NoSpaceAt::SegmentWrite));
            // In flight together: the first write fails, the rest were
            // queued behind it; same sizes, so a refused batch would sit
            // exactly where a batch written later ends.
            let batches: Vec<Vec<Record>> = (10..14).map(|i| batch(i, 700)).collect();
            let results =
                futures::future::join_all(batches.iter().map(|b| log.append_durable(b, ProducerStamp::NONE)))
                    .await;
            for r in &results {
                assert!(refused(r), "refused, not poisoned ({what}): {r:?}");
            }
            assert_eq!(log.failure(), None, "not poisoned ({what})");
            assert_eq!(
                (log.next_offset(), log.durable_offset(), log.hot_bytes()),
                before,
                "the log is back at its last complete write ({what})"
            );
            assert_eq!(
                file_len(dir.path(), 0),
                log.hot_bytes(),
                "the refused write's bytes are cut off the file ({what})"
            );
            let again = log.append_durable(&batches[0], ProducerStamp::NONE).await;
            assert!(refused(&again), "still no room ({what}): {again:?}");
            log.arm_no_space(None);
            for b in &batches[..2] {
                let a = log.append_durable(b, ProducerStamp::NONE).await.unwrap();
                assert_eq!(
                    a.base_offset,
                    Offset(model.len() as u64),
                    "the offsets refused ({what})"
                );
                expect(&mut model, b);
            }
            assert_eq!(contents(&log).await, model, "{what}");
            model
        });
        // A crash (no close): the refused batches never come back.
        run(async {
            let (log, _) = open(dir.path(), direct, LogConfig::default().segment_bytes).await;
            assert_eq!(contents(&log).await, model, "after a crash ({what})");
        });
    }
}

#[test]
fn a_close_waits_for_a_refused_write_and_seals_the_log() {
    for (threads, direct) in MODES {
        let what = format!("{threads} disk threads, direct {direct}");
        let dir = tempfile::tempdir().unwrap();
        let model = run_with_disk_threads(threads, async {
            let (log, _) = open(dir.path(), direct, LogConfig::default().segment_bytes).await;
            let mut model = Model::new();
            let b = batch(0, 700);
            log.append_durable(&b, ProducerStamp::NONE).await.unwrap();
            expect(&mut model, &b);
            log.arm_no_space(Some(NoSpaceAt::SegmentWrite));
            // Batches 2 and 3 may already be refused at placement: glommio
            // 0.9's `spawn_local` runs the new task at once, up to its first
            // await (`spawn_and_run`), so batch 1's `append_placed` starts
            // the write loop, and with disk threads the injected no-space
            // can fail batch 1's write, and start its rewind, before
            // `append_placed` returns. A refusal then is what a rewind
            // promises; what this test holds the log to is below.
            let mut placed: Vec<Appended> = Vec::new();
            for i in 1..4 {
                match log.append_placed(&batch(i, 700), ProducerStamp::NONE) {
                    Ok(a) => placed.push(a),
                    Err(StorageError::Refused { .. }) if i > 1 => {}
                    Err(e) => panic!("batch {i} ({what}): {e:?}, rewinds {}", log.rewinds()),
                }
            }
            log.close()
                .await
                .expect("a refused write does not keep the log from closing");
            for a in placed {
                let r = log.wait_durable(a.next_offset).await;
                assert!(r.is_err(), "a refused append is never durable ({what}): {r:?}");
            }
            model
        });
        run(async {
            let (log, report) = open(dir.path(), direct, LogConfig::default().segment_bytes).await;
            assert!(report.scanned.is_empty(), "closed cleanly ({what}): {report:?}");
            assert_eq!(contents(&log).await, model, "{what}");
        });
    }
}

#[test]
fn a_roll_without_room_is_refused_and_the_next_one_rolls() {
    // 16 KiB segments of ~3 KiB records: the sixth record rolls.
    const SEGMENT: u64 = 16 << 10;
    for at in [
        NoSpaceAt::RollIndex,
        NoSpaceAt::RollCreate,
        NoSpaceAt::SegmentWrite,
    ] {
        for (threads, direct) in MODES {
            let what = format!("{at:?}, {threads} disk threads, direct {direct}");
            let dir = tempfile::tempdir().unwrap();
            let model = run_with_disk_threads(threads, async {
                let (log, _) = open(dir.path(), direct, SEGMENT).await;
                let mut model = Model::new();
                for i in 0..5 {
                    let b = batch(i, 3000);
                    log.append_durable(&b, ProducerStamp::NONE).await.unwrap();
                    expect(&mut model, &b);
                }
                assert_eq!(log.segment_count(), 1, "{what}");
                let rolled_at = model.len() as u64;
                log.arm_no_space(Some(at));
                let r = log.append_durable(&batch(5, 3000), ProducerStamp::NONE).await;
                assert!(refused(&r), "{what}: {r:?}");
                assert_eq!(log.failure(), None, "{what}");
                assert_eq!(log.next_offset(), Offset(rolled_at), "{what}");
                let new_log = es_storage::log_path(dir.path(), Offset(rolled_at));
                if at == NoSpaceAt::SegmentWrite {
                    // The new segment was created before its write failed:
                    // it stays, empty, the active one.
                    assert_eq!(log.segment_count(), 2, "{what}");
                    assert_eq!(file_len(dir.path(), rolled_at), 0, "{what}");
                } else {
                    assert_eq!(log.segment_count(), 1, "the roll is undone ({what})");
                    assert!(!new_log.exists(), "no new segment file ({what})");
                }
                log.arm_no_space(None);
                for i in 5..7 {
                    let b = batch(i, 3000);
                    log.append_durable(&b, ProducerStamp::NONE).await.unwrap();
                    expect(&mut model, &b);
                }
                assert_eq!(log.segment_count(), 2, "rolled once there was room ({what})");
                assert!(new_log.exists(), "{what}");
                assert_eq!(contents(&log).await, model, "{what}");
                log.close().await.unwrap();
                model
            });
            run(async {
                let (log, report) = open(dir.path(), direct, SEGMENT).await;
                assert!(report.scanned.is_empty(), "closed cleanly ({what}): {report:?}");
                assert_eq!(log.segment_count(), 2, "{what}");
                assert_eq!(contents(&log).await, model, "{what}");
            });
        }
    }
}

#[test]
fn early_pages_of_a_refused_batch_are_cut_off_too() {
    for threads in DISK_THREAD_MODES {
        let what = format!("{threads} disk threads");
        let dir = tempfile::tempdir().unwrap();
        let model = run_with_disk_threads(threads, async {
            let (log, _) = open(dir.path(), true, LogConfig::default().segment_bytes).await;
            let mut model = Model::new();
            ending_at(&log, &mut model, 1000).await;
            // ~300 KiB: its pages past the first are written as they arrive.
            let (records, bytes) = common::produced(9, 100, 3000, 1);
            let mut early = log.begin_early(bytes.len()).expect("an early write");
            early.arrived(&bytes);
            log.arm_no_space(Some(NoSpaceAt::SegmentWrite));
            let r = log
                .append_batch_durable(bytes.clone(), Some(early.ticket()))
                .await;
            assert!(refused(&r), "{what}: {r:?}");
            drop(early);
            assert_eq!(
                file_len(dir.path(), 0),
                1000,
                "the early pages are cut off with the rest ({what})"
            );
            log.arm_no_space(None);
            let a = log.append_batch_durable(bytes, None).await.unwrap();
            assert_eq!(a.base_offset, Offset(1), "{what}");
            expect(&mut model, &records);
            assert_eq!(contents(&log).await, model, "{what}");
            model
        });
        run(async {
            let (log, _) = open(dir.path(), true, LogConfig::default().segment_bytes).await;
            assert_eq!(contents(&log).await, model, "after a crash ({what})");
        });
    }
}

/// A produced version 2 batch of one record (stamp 0, offsets from 0).
fn v2_batch(tag: &str) -> es_storage::BatchBuf {
    let mut out = Vec::new();
    es_storage::batch::encode_v2(
        Offset(0),
        &[rec(Some("k"), tag, 1_700_000_000_000)],
        ProducerStamp::NONE,
        es_storage::batch::RaftStamp::default(),
        &mut out,
    );
    es_storage::BatchBuf::from(out)
}

/// In a replicated log, a write refused in the middle of a Raft entry
/// (its first batch written, its second refused) refuses the entry: the
/// wait for its flush fails rather than waiting forever (a Raft log store
/// must not be told it is durable). Once there is room again, a probe
/// write passes and `cut_unfinished_entry` removes the half written, so
/// the log holds whole entries only and the entry is placed again at the
/// same offsets.
#[test]
fn a_raft_entry_cut_in_the_middle_is_refused_then_cut_whole() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, _) = open(dir.path(), true, LogConfig::default().segment_bytes).await;
        log.set_committed(Offset(0));
        let two = |tag: &str| {
            es_storage::EntryBody::Batches(
                vec![v2_batch(&format!("{tag}a")), v2_batch(&format!("{tag}b"))],
                es_storage::Stamping::Leader,
            )
        };
        log.append_entry(1, 1, two("one")).unwrap();
        log.wait_durable_index(1).await.unwrap();
        let after_one = log.next_offset();
        assert_eq!(after_one, Offset(2));

        // The write loop takes the entry's first batch at once (its
        // writer is open): the full disk meets only the second.
        log.append_entry(1, 2, two("two")).unwrap();
        log.arm_no_space(Some(NoSpaceAt::SegmentWrite));
        // A hang guard, not a timing: the wait ends at once or never.
        let waited = glommio::timer::timeout(std::time::Duration::from_secs(60), async {
            Ok(log.wait_durable_index(2).await)
        })
        .await
        .expect("the wait for a refused entry's flush never ended");
        assert!(refused(&waited), "{waited:?}");
        assert_eq!(log.written_index(), 2, "entry 2 was never written whole");
        assert_eq!(
            log.next_offset(),
            Offset(3),
            "the log went back to its last complete write: entry 2's first batch"
        );
        assert!(log.probe_room().await.is_err(), "still no room");

        log.arm_no_space(None);
        log.probe_room().await.expect("room again");
        log.cut_unfinished_entry().await.expect("cut");
        assert_eq!(log.next_offset(), after_one, "entry 2's first batch is cut");
        let placed = log.placed_batches().await.unwrap();
        let indexes: Vec<u64> = placed
            .iter()
            .filter_map(|p| p.header.raft.map(|r| r.index))
            .collect();
        assert_eq!(indexes, [1, 1], "only entry 1's batches");

        log.append_entry(1, 2, two("two")).unwrap();
        log.wait_durable_index(2).await.expect("entry 2 written again");
        assert_eq!(log.next_offset(), Offset(4));
        log.close().await.unwrap();
    });
}
