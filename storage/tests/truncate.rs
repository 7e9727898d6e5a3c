//! Truncating a replicated log at every entry boundary of a log spanning
//! several segments, with a crash after every step of the cut: the log
//! reopens to the old log or a prefix of it holding at least the kept
//! entries, never a hole; redone, the truncation gives exactly the kept
//! entries, and appends after it continue the log.

mod common;

use std::path::Path;

use common::run;
use es_storage::batch::{encode_v2, RaftStamp, CONTROL_BLANK};
use es_storage::{
    apply_truncate_step, truncation_plan, BatchBuf, EntryBody, FsyncBatcher, LogConfig, Offset, PartitionLog,
    PlacedBatch, ProducerStamp, Record, Stamping,
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

#[test]
fn truncate_at_every_entry_boundary_with_a_crash_at_every_step() {
    let template = tempfile::tempdir().unwrap();
    let (placed, full) = run(async {
        let log = open(template.path()).await;
        for &(t, i, n) in ENTRIES {
            append(&log, t, i, n);
        }
        log.wait_durable_index(7).await.unwrap();
        let placed = log.placed_batches().await.unwrap();
        let full = stamps(&log).await;
        log.close().await.unwrap();
        (placed, full)
    });
    let segments: std::collections::BTreeSet<_> = placed.iter().map(|p| p.segment).collect();
    assert!(
        segments.len() >= 3,
        "the log spans several segments: {segments:?}"
    );
    for cut_index in 1..=7u64 {
        // The entry's first batch: where the cut goes.
        let first = placed
            .iter()
            .find(|p| p.header.raft.unwrap().index == cut_index)
            .unwrap();
        let kept: Vec<_> = full.iter().copied().filter(|s| s.1 < cut_index).collect();
        let plan = run(truncation_plan(template.path(), first.segment, first.position)).unwrap();
        for crash_after in 0..=plan.len() {
            let dir = tempfile::tempdir().unwrap();
            copy_dir(template.path(), dir.path());
            run(async {
                for step in &plan[..crash_after] {
                    apply_truncate_step(dir.path(), step).await.unwrap();
                }
                // The crash: reopen whatever is on disk.
                let log = open(dir.path()).await;
                let now = stamps(&log).await;
                let what = format!("cut at entry {cut_index}, crash after step {crash_after}");
                assert_eq!(now[..], full[..now.len()], "{what}: a prefix of the old log");
                assert!(now.len() >= kept.len(), "{what}: the kept entries are all there");
                if crash_after == plan.len() {
                    assert_eq!(now, kept, "{what}: the whole cut is the new log");
                }
                // The store redoes the truncation, then the log goes on.
                let log = log.truncate_at(first.segment, first.position).await.unwrap();
                assert_eq!(stamps(&log).await, kept, "{what}: redone");
                let next_offset = kept.last().map_or(0, |_| log.next_offset().0);
                assert_eq!(log.next_offset().0, next_offset);
                log.resume_entries(cut_index - 1);
                append(&log, 9, cut_index, 2);
                append(&log, 9, cut_index + 1, 0);
                log.wait_durable_index(cut_index + 1).await.unwrap();
                log.close().await.unwrap();
                let log = open(dir.path()).await;
                let after = stamps(&log).await;
                assert_eq!(after[..kept.len()], kept[..], "{what}: the prefix stays");
                let new: Vec<_> = after[kept.len()..].iter().map(|s| (s.0, s.1)).collect();
                assert_eq!(
                    new,
                    vec![(9, cut_index), (9, cut_index), (9, cut_index + 1)],
                    "{what}"
                );
                log.close().await.unwrap();
            });
        }
    }
}
