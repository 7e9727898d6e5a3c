//! A read of the Raft log that a truncation overtakes: a deposed leader's
//! replication reads its uncommitted suffix while its follower side,
//! hearing the new leader, cuts that suffix. The read answers with what
//! was still there, as openraft's contract allows (a shorter answer, asked
//! again), rather than a storage error, which would stop the node.

mod common;

use common::run;
use es_raft::openraft::storage::RaftLogStorage;
use es_raft::openraft::RaftLogReader;
use es_raft::{log_id, LogStore};
use es_storage::batch::CONTROL_BLANK;
use es_storage::{EntryBody, FsyncBatcher, LogConfig, PartitionLog};

#[test]
fn a_read_overtaken_by_a_truncation_answers_the_prefix_left() {
    let dir = tempfile::tempdir().unwrap();
    let (log_dir, meta_dir) = (dir.path().join("log"), dir.path().join("raft"));
    run(async {
        let (log, _) = PartitionLog::open(&log_dir, LogConfig::default(), FsyncBatcher::new())
            .await
            .unwrap();
        for index in 1..=5 {
            let blank = EntryBody::Control {
                kind: CONTROL_BLANK,
                body: Vec::new(),
            };
            log.append_entry(1, index, blank).unwrap();
        }
        log.wait_durable_index(5).await.unwrap();
        log.close().await.unwrap();
        drop(log);
        // Reopened: the entries are read from the file, not from memory,
        // so a read waits on the disk and the truncation can overtake it.
        let mut store = LogStore::open(&log_dir, &meta_dir, LogConfig::default(), FsyncBatcher::new())
            .await
            .unwrap();

        // The log is cut, the table not yet: a read then finds the cut
        // entries gone from where the table says they lie.
        let mut cutter = store.clone();
        let mut cut = Box::pin(async move { cutter.truncate(log_id(1, 3)).await });
        assert!(
            futures::poll!(cut.as_mut()).is_pending(),
            "the truncation waits on the disk"
        );
        let got = store
            .try_get_log_entries(1..6)
            .await
            .expect("a read overtaken by a cut is no storage error");
        let ids: Vec<_> = got.iter().map(|e| e.log_id).collect();
        assert!(
            ids.len() < 5 && ids.iter().zip(1..).all(|(id, i)| *id == log_id(1, i)),
            "a prefix of what the log held, short of the cut entries: {ids:?}"
        );
        cut.await.unwrap();
        assert_eq!(store.log_ids(), vec![log_id(1, 1), log_id(1, 2)]);

        // With no cut under it, a read that fails is the log's error.
        let again = store.try_get_log_entries(1..6).await.unwrap();
        assert_eq!(again.len(), 2);
        store.close().await.unwrap();
    });
}
