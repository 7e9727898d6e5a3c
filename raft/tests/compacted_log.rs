//! A replicated log compacted below its purge point: the Raft log store
//! still reads every entry above it by index (log ids, payloads, bytes),
//! before and after a reopen that scans the compacted segments again.

mod common;

use common::run;
use es_raft::openraft::storage::RaftLogStorage;
use es_raft::openraft::RaftLogReader;
use es_raft::{log_id, EsEntry, EsPayload, LogStore, RaftMeta};
use es_storage::batch::{encode_v2, RaftStamp, CONTROL_BLANK, CONTROL_MEMBERSHIP};
use es_storage::{
    BatchBuf, CleanupPolicy, EntryBody, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record,
    Stamping,
};

/// A produced version 2 batch of one record per key, valued `tag-key`.
fn keyed(tag: &str, keys: &[&str]) -> BatchBuf {
    let recs: Vec<Record> = keys
        .iter()
        .map(|k| Record {
            key: Some(k.as_bytes().to_vec()),
            value: format!("{tag}-{k}").into_bytes(),
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

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 200,
        index_interval_bytes: 64,
        cleanup: CleanupPolicy {
            delete: false,
            compact: true,
            ..CleanupPolicy::default()
        },
        ..LogConfig::default()
    }
}

/// `(index, payload kind, the record values of its batches)` of entries.
fn summary(entries: &[EsEntry]) -> Vec<(u64, &'static str, Vec<String>)> {
    entries
        .iter()
        .map(|e| {
            let (kind, values) = match &e.payload {
                EsPayload::Blank => ("blank", Vec::new()),
                EsPayload::Membership(_) => ("membership", Vec::new()),
                EsPayload::Batches(bs) => {
                    let mut values = Vec::new();
                    for b in bs {
                        let h = es_storage::batch::check(b.bytes()).unwrap();
                        let r = h.raft.unwrap();
                        assert_eq!((r.term, r.index), (e.log_id.leader_id.term, e.log_id.index));
                        for rec in es_storage::batch::records(&h, b.bytes()).unwrap() {
                            values.push(String::from_utf8(rec.value).unwrap());
                        }
                    }
                    ("data", values)
                }
                _ => ("other", Vec::new()),
            };
            (e.log_id.index, kind, values)
        })
        .collect()
}

#[test]
fn entries_above_the_purge_point_stay_readable_by_index_after_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let (log_dir, meta_dir) = (dir.path().join("log"), dir.path().join("raft"));
    run(async {
        // The log as a replica wrote it: below the purge point (entry 6),
        // records that later ones supersede.
        let (log, _) = PartitionLog::open(&log_dir, config(), FsyncBatcher::new())
            .await
            .unwrap();
        let control = |kind| EntryBody::Control {
            kind,
            body: br#"{"configs":[[1]],"nodes":[1]}"#.to_vec(),
        };
        let data = |bs: Vec<BatchBuf>| EntryBody::Batches(bs, Stamping::Leader);
        log.append_entry(1, 1, control(CONTROL_MEMBERSHIP)).unwrap();
        log.append_entry(1, 2, data(vec![keyed("2a", &["a"]), keyed("2b", &["x"])]))
            .unwrap();
        log.append_entry(2, 3, control(CONTROL_BLANK)).unwrap();
        log.append_entry(2, 4, data(vec![keyed("4", &["p", "x"])]))
            .unwrap();
        log.append_entry(2, 5, data(vec![keyed("5", &["x"])])).unwrap();
        log.append_entry(2, 6, data(vec![keyed("6", &["x", "q"])]))
            .unwrap();
        log.append_entry(3, 7, control(CONTROL_BLANK)).unwrap();
        log.append_entry(3, 8, data(vec![keyed("8a", &["x"]), keyed("8b", &["z"])]))
            .unwrap();
        log.append_entry(3, 9, data(vec![keyed("9", &["z"])])).unwrap();
        log.append_entry(3, 10, data(vec![keyed("10", &["w"])])).unwrap();
        log.wait_durable_index(10).await.unwrap();
        log.close().await.unwrap();
        drop(log);
        let meta = RaftMeta::open(&meta_dir).await.unwrap();
        meta.save_purged(&log_id(2, 6)).await.unwrap();
        meta.close().await;
        drop(meta);

        let want = vec![
            (7, "blank", vec![]),
            (8, "data", vec!["8a-x".to_string(), "8b-z".to_string()]),
            (9, "data", vec!["9-z".to_string()]),
            (10, "data", vec!["10-w".to_string()]),
        ];
        let mut store = LogStore::open(&log_dir, &meta_dir, config(), FsyncBatcher::new())
            .await
            .unwrap();
        let before = store.try_get_log_entries(7..11).await.unwrap();
        assert_eq!(summary(&before), want);

        // Compaction below the purge point (the store set the limit).
        let log = store.log();
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
        let kept: Vec<String> = log
            .read(Offset(0), usize::MAX, log.next_offset())
            .await
            .unwrap()
            .into_iter()
            .map(|r| String::from_utf8(r.value).unwrap())
            .collect();
        assert_eq!(
            kept,
            ["2a-a", "4-p", "6-x", "6-q", "8a-x", "8b-z", "9-z", "10-w"],
            "below the purge point, the latest record of each key"
        );
        let after = store.try_get_log_entries(7..11).await.unwrap();
        assert_eq!(summary(&after), want, "the entries above it, unchanged");
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(log_id(2, 6)));
        assert_eq!(state.last_log_id, Some(log_id(3, 10)));
        store.close().await.unwrap();
        drop((store, log));

        // Reopened, the compacted segments are scanned (indexes removed)
        // and the store finds the same entries.
        for e in std::fs::read_dir(&log_dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "index") {
                std::fs::remove_file(&path).unwrap();
            }
        }
        let mut store = LogStore::open(&log_dir, &meta_dir, config(), FsyncBatcher::new())
            .await
            .unwrap();
        let reopened = store.try_get_log_entries(7..11).await.unwrap();
        assert_eq!(summary(&reopened), want);
        assert_eq!(
            store.get_log_state().await.unwrap().last_log_id,
            Some(log_id(3, 10))
        );
        store.close().await.unwrap();
    });
}
