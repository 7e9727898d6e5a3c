//! Runs of a replicated log's entries as a snapshot transfer reads them
//! (`PartitionLog::entry_cursor`, `read_entry_run`): from any entry's first
//! offset, in chunks of any size, every batch of the entries asked for,
//! zero-width control batches included, in order, each once, across
//! segment rolls, and nothing outside the range.

mod common;

use common::run;
use es_storage::batch::{encode_v2, RaftStamp, CONTROL_BLANK, CONTROL_MEMBERSHIP};
use es_storage::{
    BatchBuf, EntryBody, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record, Stamping,
};

fn batch(tag: &str, n: usize) -> BatchBuf {
    let recs: Vec<Record> = (0..n)
        .map(|i| Record {
            key: Some(format!("k{i}").into_bytes()),
            value: format!("{tag}-{i}").into_bytes(),
            timestamp_ms: 7,
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

/// `(term, index, batches)`; 0 batches = a zero-width control entry.
/// Control entries sit at a segment's end and after one another.
const ENTRIES: &[(u64, u64, usize)] = &[
    (1, 0, 0),
    (1, 1, 0),
    (1, 2, 3),
    (2, 3, 0),
    (2, 4, 1),
    (2, 5, 4),
    (2, 6, 0),
    (2, 7, 0),
    (3, 8, 2),
    (3, 9, 1),
    (3, 10, 0),
];

#[test]
fn every_batch_of_the_entries_asked_for_comes_once_in_order() {
    run(async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            // A few batches per segment: entries land on both sides of rolls.
            segment_bytes: 400,
            ..LogConfig::default()
        };
        let (log, _) = PartitionLog::open(dir.path(), config, FsyncBatcher::new())
            .await
            .unwrap();
        for &(term, index, batches) in ENTRIES {
            let body = if batches == 0 {
                let kind = if index == 0 {
                    CONTROL_MEMBERSHIP
                } else {
                    CONTROL_BLANK
                };
                EntryBody::Control {
                    kind,
                    body: b"{}".to_vec(),
                }
            } else {
                let bs = (0..batches).map(|b| batch(&format!("{index}/{b}"), 2)).collect();
                EntryBody::Batches(bs, Stamping::Leader)
            };
            log.append_entry(term, index, body).unwrap();
        }
        log.wait_durable_index(10).await.unwrap();
        let placed = log.placed_batches().await.unwrap();
        assert!(log.segment_count() > 3, "the log rolled: {}", log.segment_count());
        let all: Vec<(u64, u64)> = placed
            .iter()
            .map(|p| (p.header.raft.unwrap().index, p.header.base_offset.0))
            .collect();
        for first in 0..=10u64 {
            for through in first..=10u64 {
                for max_bytes in [1usize, 150, 1 << 20] {
                    let from = all.iter().find(|(i, _)| *i == first).unwrap().1;
                    let mut got = Vec::new();
                    let mut at = Some(log.entry_cursor(Offset(from)).await.unwrap());
                    while let Some(c) = at {
                        let run = log
                            .read_entry_run(c, first, through, max_bytes, 1 << 20)
                            .await
                            .unwrap();
                        got.extend(
                            run.batches
                                .iter()
                                .map(|b| (b.header.raft.unwrap().index, b.header.base_offset.0)),
                        );
                        at = run.next;
                    }
                    let want: Vec<(u64, u64)> = all
                        .iter()
                        .copied()
                        .filter(|(i, _)| (first..=through).contains(i))
                        .collect();
                    assert_eq!(got, want, "entries {first}..={through}, chunks of {max_bytes}");
                }
            }
        }
        log.close().await.unwrap();
    });
}
