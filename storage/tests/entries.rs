//! Raft entries in a partition log (format v2): placed whole, stamped,
//! zero-width control batches, entries never split across segments, a
//! follower's copy byte-identical to the leader's, index marks that a blank
//! entry moves, and recovery that keeps whole entries only.

mod common;

use std::path::Path;

use common::run;
use es_storage::batch::{encode_v2, RaftStamp, CONTROL_BLANK, CONTROL_MEMBERSHIP};
use es_storage::{
    BatchBuf, EntryBody, FsyncBatcher, LogConfig, Offset, PartitionLog, PlacedBatch, ProducerStamp, Record,
    Stamping,
};

/// `recs` as a produced version 2 batch (stamp 0, offsets from 0).
fn produced(recs: &[Record]) -> BatchBuf {
    let mut out = Vec::new();
    encode_v2(
        Offset(0),
        recs,
        ProducerStamp::NONE,
        RaftStamp::default(),
        &mut out,
    );
    BatchBuf::from(out)
}

/// A produced version 2 batch of `n` records (stamp 0, offsets from 0).
fn batch(tag: &str, n: usize) -> BatchBuf {
    let recs: Vec<Record> = (0..n)
        .map(|i| Record {
            key: Some(format!("k{i}").into_bytes()),
            value: format!("{tag}-{i}").into_bytes(),
            timestamp_ms: 7,
        })
        .collect();
    produced(&recs)
}

/// The entries every test writes: `(term, index, batches)`; 0 batches =
/// a control entry.
const ENTRIES: &[(u64, u64, usize)] = &[(1, 1, 0), (1, 2, 3), (2, 3, 0), (2, 4, 1), (2, 5, 4), (3, 6, 2)];

async fn open(dir: &Path, segment_bytes: u64) -> PartitionLog {
    let config = LogConfig {
        segment_bytes,
        ..LogConfig::default()
    };
    PartitionLog::open(dir, config, FsyncBatcher::new())
        .await
        .unwrap()
        .0
}

async fn write_entries(log: &PartitionLog) {
    for &(term, index, batches) in ENTRIES {
        let body = if batches == 0 {
            let kind = if index == 1 {
                CONTROL_MEMBERSHIP
            } else {
                CONTROL_BLANK
            };
            EntryBody::Control {
                kind,
                body: b"{}".to_vec(),
            }
        } else {
            let bs = (0..batches).map(|b| batch(&format!("{index}/{b}"), 3)).collect();
            EntryBody::Batches(bs, Stamping::Leader)
        };
        log.append_entry(term, index, body).unwrap();
    }
    log.wait_durable_index(6).await.unwrap();
}

/// Checks the placed batches against ENTRIES: stamps, dense offsets,
/// zero-width control batches, each entry in one segment.
fn check_entries(placed: &[PlacedBatch], upto_index: u64) {
    let mut it = placed.iter();
    let mut next = 0u64;
    for &(term, index, batches) in ENTRIES.iter().filter(|e| e.1 <= upto_index) {
        let mut segment = None;
        for b in 0..batches.max(1) {
            let p = it
                .next()
                .unwrap_or_else(|| panic!("entry {index} batch {b} is missing"));
            let r = p.header.raft.expect("a v2 batch");
            assert_eq!((r.term, r.index), (term, index));
            assert_eq!(
                r.entry_end,
                b + 1 == batches.max(1),
                "ENTRY_END on the last batch only"
            );
            assert_eq!(r.control, batches == 0);
            assert_eq!(p.header.base_offset, Offset(next), "offsets are dense");
            next = p.header.next_offset().0;
            assert!(
                segment.is_none_or(|s| s == p.segment),
                "entry {index} spans segments"
            );
            segment = Some(p.segment);
        }
    }
    assert!(it.next().is_none(), "no batch after entry {upto_index}");
}

#[test]
fn entries_are_placed_whole_and_read_back_by_position() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), 1 << 20).await;
        assert_eq!((log.written_index(), log.durable_index()), (0, 0));
        write_entries(&log).await;
        assert_eq!(log.durable_index(), 7);
        assert_eq!(log.next_offset(), Offset(3 * 10), "10 data batches of 3 records");
        let placed = log.placed_batches().await.unwrap();
        check_entries(&placed, 6);
        // Reading an entry by its position gives its batches.
        let first = &placed[1];
        let bytes = log
            .read_at(first.segment, first.position, first.position + 1_000_000)
            .await
            .unwrap();
        assert_eq!(bytes.len(), placed.len() - 1);
        log.close().await.unwrap();
    });
}

#[test]
fn a_blank_entry_alone_is_made_durable_by_index() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), 1 << 20).await;
        let body = EntryBody::Control {
            kind: CONTROL_BLANK,
            body: Vec::new(),
        };
        let placed = log.append_entry(1, 1, body).unwrap();
        assert_eq!(placed.next_offset, Offset(0), "zero width");
        log.wait_durable_index(1).await.unwrap();
        assert_eq!(log.durable_index(), 2);
        assert_eq!(log.durable_offset(), Offset(0), "no offset moved");
        log.close().await.unwrap();
    });
}

#[test]
fn an_entry_is_never_split_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        // Segments of 600 bytes: most entries roll the log; the 4-batch
        // entry is larger than a segment and gets one of its own.
        let log = open(dir.path(), 600).await;
        write_entries(&log).await;
        assert!(log.segment_count() > 2, "the log rolled");
        check_entries(&log.placed_batches().await.unwrap(), 6);
        log.close().await.unwrap();
        let log = open(dir.path(), 600).await;
        check_entries(&log.placed_batches().await.unwrap(), 6);
        log.close().await.unwrap();
    });
}

#[test]
fn a_follower_copy_is_byte_identical() {
    let (leader, follower) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let log = open(leader.path(), 700).await;
        write_entries(&log).await;
        let copy = open(follower.path(), 700).await;
        let placed = log.placed_batches().await.unwrap();
        let mut i = 0;
        while i < placed.len() {
            // One entry: its batches up to ENTRY_END.
            let first = &placed[i];
            let mut j = i;
            while !placed[j].header.ends_entry() {
                j += 1;
            }
            let last = &placed[j];
            let end = last.position + last.header.batch_len as u64;
            let raws = log.read_at(first.segment, first.position, end).await.unwrap();
            let r = first.header.raft.unwrap();
            let body = if first.header.is_control() {
                let (kind, b) = es_storage::batch::control_body(&raws[0].header, &raws[0].bytes).unwrap();
                EntryBody::Control {
                    kind,
                    body: b.to_vec(),
                }
            } else {
                let bs = raws
                    .into_iter()
                    .map(|b| BatchBuf::from(b.bytes.to_vec()))
                    .collect();
                EntryBody::Batches(bs, Stamping::Verify)
            };
            copy.append_entry(r.term, r.index, body).unwrap();
            i = j + 1;
        }
        copy.wait_durable_index(6).await.unwrap();
        // A batch that does not carry the expected stamp is refused.
        let stray = EntryBody::Batches(vec![batch("x", 1)], Stamping::Verify);
        assert!(copy.append_entry(4, 7, stray).is_err());
        log.close().await.unwrap();
        copy.close().await.unwrap();
    });
    let files = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        v.sort();
        v.iter().map(|p| std::fs::read(p).unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(
        files(leader.path()),
        files(follower.path()),
        "replica logs are byte-identical"
    );
}

#[test]
fn recovery_trims_an_incomplete_trailing_entry() {
    let dir = tempfile::tempdir().unwrap();
    let placed = run(async {
        let log = open(dir.path(), 1 << 20).await;
        write_entries(&log).await;
        let placed = log.placed_batches().await.unwrap();
        log.close().await.unwrap();
        placed
    });
    // Cut the log after each whole batch of the last two entries (a crash
    // between the writes of one entry's batches), and reopen.
    let path = es_storage::log_path(dir.path(), Offset(0));
    let whole = std::fs::read(&path).unwrap();
    for p in placed.iter().filter(|p| p.header.raft.unwrap().index >= 5) {
        let cut = p.position + p.header.batch_len as u64;
        std::fs::write(&path, &whole[..cut as usize]).unwrap();
        let _ = std::fs::remove_file(es_storage::index_path(dir.path(), Offset(0)));
        let r = p.header.raft.unwrap();
        let kept = if r.entry_end { r.index } else { r.index - 1 };
        run(async {
            let log = open(dir.path(), 1 << 20).await;
            check_entries(&log.placed_batches().await.unwrap(), kept);
            let expected: u64 = ENTRIES
                .iter()
                .filter(|e| e.1 <= kept)
                .map(|e| e.2 as u64 * 3)
                .sum();
            assert_eq!(log.next_offset(), Offset(expected), "cut after {cut}");
            log.close().await.unwrap();
        });
    }
}

#[test]
fn cleanup_never_passes_the_limit_and_the_high_watermark_is_set() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let config = LogConfig {
            segment_bytes: 600,
            cleanup: es_storage::CleanupPolicy {
                retention_bytes: Some(1),
                ..es_storage::CleanupPolicy::default()
            },
            ..LogConfig::default()
        };
        let log = PartitionLog::open(dir.path(), config, FsyncBatcher::new())
            .await
            .unwrap()
            .0;
        assert_eq!(
            log.cleanup_limit(),
            Offset(u64::MAX),
            "a standalone log is unlimited"
        );
        assert_eq!(
            log.committed_offset(),
            log.durable_offset(),
            "standalone: committed is durable"
        );
        write_entries(&log).await;
        log.set_committed(Offset(9));
        log.set_committed(Offset(6));
        assert_eq!(
            log.committed_offset(),
            Offset(9),
            "the high watermark never goes back"
        );
        let placed = log.placed_batches().await.unwrap();
        let segments: Vec<Offset> = {
            let mut s: Vec<Offset> = placed.iter().map(|p| p.segment).collect();
            s.dedup();
            s
        };
        assert!(segments.len() >= 3, "{segments:?}");
        // Nothing purged: retention may delete nothing.
        log.set_cleanup_limit(Offset(0));
        let (report, r) = log.cleanup(0).await;
        r.unwrap();
        assert_eq!(report.segments_deleted, 0);
        // Purged through the end of the second segment: the first two go.
        log.set_cleanup_limit(segments[2]);
        let (report, r) = log.cleanup(0).await;
        r.unwrap();
        assert_eq!(report.segments_deleted, 2);
        assert_eq!(log.hot_start_offset(), segments[2]);
        log.close().await.unwrap();
    });
}

#[test]
fn an_entry_is_placed_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let config = LogConfig {
            batch_bytes_max: 400,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(dir.path(), config, FsyncBatcher::new())
            .await
            .unwrap()
            .0;
        let big = {
            let recs = vec![Record {
                key: Some(b"k".to_vec()),
                value: vec![7; 500],
                timestamp_ms: 1,
            }];
            let mut out = Vec::new();
            encode_v2(
                Offset(0),
                &recs,
                ProducerStamp::NONE,
                RaftStamp::default(),
                &mut out,
            );
            BatchBuf::from(out)
        };
        let body = EntryBody::Batches(vec![batch("ok", 1), big], Stamping::Leader);
        assert!(
            log.append_entry(1, 1, body).is_err(),
            "its second batch is too large"
        );
        assert_eq!(log.next_offset(), Offset(0), "nothing of it was placed");
        let body = EntryBody::Batches(vec![batch("ok", 1)], Stamping::Leader);
        log.append_entry(1, 1, body).unwrap();
        log.wait_durable_index(1).await.unwrap();
        assert_eq!(log.placed_batches().await.unwrap().len(), 1);
        log.close().await.unwrap();
    });
}

/// The records ENTRIES hold, in offset order: `(offset, value)`.
fn data_records() -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for &(_, index, batches) in ENTRIES {
        for b in 0..batches {
            for i in 0..3 {
                out.push((out.len() as u64, format!("{index}/{b}-{i}").into_bytes()));
            }
        }
    }
    out
}

#[test]
fn clients_read_the_data_records_only_below_the_high_watermark() {
    // One segment (control batches between data batches), and small
    // segments (entries, control ones too, in several).
    for segment_bytes in [1 << 20, 400] {
        let dir = tempfile::tempdir().unwrap();
        run(async {
            let log = open(dir.path(), segment_bytes).await;
            write_entries(&log).await;
            if segment_bytes == 400 {
                assert!(log.segment_count() >= 3, "{} segments", log.segment_count());
            }
            client_reads(&log).await;
        });
    }
}

async fn client_reads(log: &PartitionLog) {
    {
        let all = data_records();
        assert_eq!(all.len(), 30);
        // Replicated from now on: nothing is committed yet.
        log.set_committed(Offset(0));
        assert!(log.is_replicated());
        assert_eq!(log.committed_offset(), Offset(0));
        let none = log
            .read(Offset(0), usize::MAX, log.committed_offset())
            .await
            .unwrap();
        assert!(none.is_empty(), "nothing above the high watermark: {none:?}");
        // Committed through entry 4 (offset 12).
        log.set_committed(Offset(12));
        let hw = log.committed_offset();
        assert_eq!(hw, Offset(12));
        let got: Vec<(u64, Vec<u8>)> = log
            .read(Offset(0), usize::MAX, hw)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.offset.0, r.value))
            .collect();
        assert_eq!(
            got,
            all[..12].to_vec(),
            "records, dense, below the high watermark"
        );
        // Batch-wise: the data batches only, and their records are the same.
        let mut parts = Vec::new();
        let read = log
            .read_batches_into(Offset(0), usize::MAX, usize::MAX, hw, &mut parts)
            .await
            .unwrap();
        assert_eq!((read.batches, read.next_offset), (4, hw));
        let mut from_batches = Vec::new();
        for p in &parts {
            let h = es_storage::batch::check(p).unwrap();
            assert!(!h.is_control(), "a control batch reached a client read");
            assert!(h.record_count > 0);
            let recs = es_storage::batch::records(&h, p).unwrap();
            from_batches.extend(recs.into_iter().map(|r| (r.offset.0, r.value)));
        }
        assert_eq!(from_batches, all[..12].to_vec());
        // From every offset, one batch at a time: never a control batch,
        // never an empty read below the high watermark, dense offsets.
        log.set_committed(Offset(30));
        let hw = log.committed_offset();
        assert_eq!(hw, Offset(30));
        let mut from = 0u64;
        let mut seen = Vec::new();
        while from < hw.0 {
            let mut parts = Vec::new();
            let read = log
                .read_batches_into(Offset(from), 1, 1, hw, &mut parts)
                .await
                .unwrap();
            assert_eq!(
                read.batches, 1,
                "a read at {from} below the high watermark finds a batch"
            );
            let h = es_storage::batch::check(&parts[0]).unwrap();
            assert!(!h.is_control());
            for r in es_storage::batch::records(&h, &parts[0]).unwrap() {
                if r.offset.0 >= from {
                    seen.push((r.offset.0, r.value));
                }
            }
            assert!(read.next_offset.0 > from, "a read moves on");
            from = read.next_offset.0;
        }
        assert_eq!(seen, all);
    }
}

#[test]
fn the_high_watermark_never_passes_what_is_written_and_wakes_a_long_poll() {
    use futures::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), 1 << 20).await;
        write_entries(&log).await;
        log.set_committed(Offset(30));
        assert_eq!(log.committed_offset(), Offset(30));
        // A long poll past the high watermark waits for the committed mark.
        assert!(log.wait_committed(Offset(31)).now_or_never().is_none());
        log.append_entry(4, 7, EntryBody::Batches(vec![batch("7/0", 3)], Stamping::Leader))
            .unwrap();
        log.wait_durable_index(7).await.unwrap();
        assert_eq!(
            log.committed_offset(),
            Offset(30),
            "written and durable, not yet committed"
        );
        assert!(
            log.wait_committed(Offset(31)).now_or_never().is_none(),
            "durable is not committed"
        );
        log.set_committed(Offset(33));
        assert_eq!(log.committed_offset(), Offset(33));
        assert!(matches!(
            log.wait_committed(Offset(31)).now_or_never(),
            Some(Ok(()))
        ));
        // A follower may learn that an entry is committed before its copy
        // is written: the high watermark stays at what is written.
        log.set_committed(Offset(1_000));
        assert_eq!(log.committed_offset(), log.written_offset());
        assert_eq!(log.committed_offset(), Offset(33));
    });
}

/// A produced version 2 batch of one record per key, valued `tag-key`.
fn keyed(tag: &str, keys: &[&str]) -> BatchBuf {
    let recs: Vec<Record> = keys
        .iter()
        .map(|k| Record {
            key: Some(k.as_bytes().to_vec()),
            value: format!("{tag}-{k}").into_bytes(),
            timestamp_ms: 7,
        })
        .collect();
    produced(&recs)
}

#[test]
fn compaction_keeps_entry_stamps_and_drops_control_batches() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let config = LogConfig {
            segment_bytes: 200,
            index_interval_bytes: 64,
            cleanup: es_storage::CleanupPolicy {
                delete: false,
                compact: true,
                ..es_storage::CleanupPolicy::default()
            },
            ..LogConfig::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config.clone(), FsyncBatcher::new())
            .await
            .unwrap();
        let control = |kind| EntryBody::Control {
            kind,
            body: b"{}".to_vec(),
        };
        let data = |bs: Vec<BatchBuf>| EntryBody::Batches(bs, Stamping::Leader);
        // Below the limit: entry 2's second batch, entry 4's `x` and all of
        // entry 5 are superseded by entry 6.
        log.append_entry(1, 1, control(CONTROL_MEMBERSHIP)).unwrap();
        log.append_entry(
            1,
            2,
            data(vec![keyed("2a", &["a1", "a2"]), keyed("2b", &["x", "y"])]),
        )
        .unwrap();
        log.append_entry(2, 3, control(CONTROL_BLANK)).unwrap();
        log.append_entry(2, 4, data(vec![keyed("4", &["p", "x"])]))
            .unwrap();
        log.append_entry(2, 5, data(vec![keyed("5", &["y"])])).unwrap();
        let six = log
            .append_entry(2, 6, data(vec![keyed("6a", &["x", "y"]), keyed("6b", &["q"])]))
            .unwrap();
        // Above it: entries Raft may still read; `x` again.
        log.append_entry(3, 7, control(CONTROL_BLANK)).unwrap();
        log.append_entry(3, 8, data(vec![keyed("8", &["x", "z1"])]))
            .unwrap();
        log.append_entry(3, 9, data(vec![keyed("9", &["z2"])])).unwrap();
        log.append_entry(3, 10, data(vec![keyed("10", &["z3"])])).unwrap();
        log.wait_durable_index(10).await.unwrap();
        let limit = six.next_offset;
        let before = log.placed_batches().await.unwrap();
        let above: Vec<(u64, Vec<u8>)> = {
            let mut out = Vec::new();
            for p in before
                .iter()
                .filter(|p| p.header.base_offset >= limit && !p.header.is_control())
            {
                let got = log
                    .read_at(p.segment, p.position, p.position + p.header.batch_len as u64)
                    .await
                    .unwrap();
                out.push((p.header.raft.unwrap().index, got[0].bytes.to_vec()));
            }
            out
        };
        assert_eq!(above.len(), 3);

        log.set_cleanup_limit(limit);
        let mut passes = 0;
        loop {
            let (report, res) = log.cleanup(0).await;
            res.unwrap();
            if report.compaction_passes == 0 {
                break;
            }
            passes += 1;
            assert!(passes < 100, "compaction never settled");
        }
        assert!(passes > 0, "compaction ran");

        let check = |placed: &[PlacedBatch]| {
            // Below the limit: the data batches that kept records, with
            // their stamps; every entry ends with ENTRY_END; no control.
            let below: Vec<(u64, u64, bool)> = placed
                .iter()
                .filter(|p| p.header.next_offset() <= limit && p.header.base_offset < limit)
                .map(|p| {
                    let r = p.header.raft.expect("a compacted v2 batch stays v2");
                    (r.term, r.index, r.entry_end)
                })
                .collect();
            assert_eq!(
                below,
                vec![(1, 2, true), (2, 4, true), (2, 6, false), (2, 6, true)],
                "stamps kept, ENTRY_END moved to entry 2's last kept batch, \
                 entry 5 and the control batches gone"
            );
            assert!(placed
                .iter()
                .filter(|p| p.header.is_control())
                .all(|p| p.header.raft.unwrap().index == 7));
        };
        let after = log.placed_batches().await.unwrap();
        check(&after);
        let values: Vec<(u64, String)> = log
            .read(Offset(0), usize::MAX, limit)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.offset.0, String::from_utf8(r.value).unwrap()))
            .collect();
        let want = [
            (0, "2a-a1"),
            (1, "2a-a2"),
            (4, "4-p"),
            (7, "6a-x"),
            (8, "6a-y"),
            (9, "6b-q"),
        ];
        assert_eq!(
            values,
            want.iter().map(|(o, v)| (*o, v.to_string())).collect::<Vec<_>>(),
            "the latest record of each key, at its offset"
        );
        // Entries above the limit: untouched, where they were.
        for (index, bytes) in &above {
            let p = after
                .iter()
                .find(|p| p.header.raft.unwrap().index == *index)
                .unwrap();
            let got = log
                .read_at(p.segment, p.position, p.position + p.header.batch_len as u64)
                .await
                .unwrap();
            assert_eq!(&got[0].bytes.to_vec(), bytes, "entry {index} unchanged");
        }
        log.close().await.unwrap();
        drop(log);

        // Recovery scans the compacted log (its indexes removed) and keeps
        // all of it: whole entries, stamps that never go back.
        let mut removed = 0;
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "index") {
                std::fs::remove_file(&path).unwrap();
                removed += 1;
            }
        }
        assert!(removed > 1);
        let (log, report) = PartitionLog::open(dir.path(), config, FsyncBatcher::new())
            .await
            .unwrap();
        assert!(!report.scanned.is_empty());
        assert!(
            report.scanned.iter().all(|(_, trimmed)| trimmed.is_none()),
            "{report:?}"
        );
        assert!(report.quarantined.is_empty(), "{report:?}");
        let reopened = log.placed_batches().await.unwrap();
        check(&reopened);
        let headers = |ps: &[PlacedBatch]| ps.iter().map(|p| p.header).collect::<Vec<_>>();
        assert_eq!(headers(&reopened), headers(&after));
    });
}
