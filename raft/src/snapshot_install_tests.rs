//! Crash tests of a snapshot install (snapshot_install.rs): an install
//! stopped after each of its steps, as a crash would leave it, then the
//! store opened again: the log is the old one (before the commit) or the
//! new one (from the commit on, recovery finishing it), never a mix, and
//! never a hole. Real partition logs in a temporary directory.

use std::path::Path;

use bytes::Bytes;
use es_storage::batch::{encode_v2, RaftStamp};
use es_storage::{
    BatchBuf, EntryBody, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record, Stamping,
};

use super::*;
use crate::log_store::LogStore;

fn run<T>(fut: impl std::future::Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .make()
        .expect("glommio executor")
        .run(fut)
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        ..LogConfig::default()
    }
}

fn batch(tag: &str) -> BatchBuf {
    let recs: Vec<Record> = (0..3)
        .map(|i| Record {
            key: Some(format!("k{i}-{}", "x".repeat(100)).into_bytes()),
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

/// Places entries `(term, tag)` at indexes from `first` on, durably.
async fn place(log: &PartitionLog, first: u64, entries: &[(u64, String)]) {
    for (i, (term, tag)) in entries.iter().enumerate() {
        let index = first + i as u64;
        log.append_entry(
            *term,
            index,
            EntryBody::Batches(vec![batch(tag)], Stamping::Leader),
        )
        .expect("place an entry");
        log.wait_durable_index(index).await.expect("durable");
    }
}

/// Every stored batch of `log`, with its base offset.
async fn batches(log: &PartitionLog) -> Vec<(u64, Bytes)> {
    let mut out = Vec::new();
    let mut at = Some(log.entry_cursor(log.hot_start_offset()).await.unwrap());
    while let Some(c) = at {
        let run = log
            .read_entry_run(c, 0, u64::MAX, 1 << 20, 64 << 20)
            .await
            .unwrap();
        out.extend(
            run.batches
                .iter()
                .map(|b| (b.header.base_offset.0, b.bytes.clone())),
        );
        at = run.next;
    }
    out
}

/// The leader's log (entries 0..12, term 1 then 2) and a follower's: the
/// first 5 entries, then 3 of its own no one committed (term 1). Returns
/// the leader's batches and the follower's store, its last kept entry
/// applied and committed, with the leader's entries 5..12 staged.
async fn setup(root: &Path) -> (Vec<(u64, Bytes)>, LogStore, Manifest, u64) {
    let leader_entries: Vec<(u64, String)> = (0..12)
        .map(|i| (if i < 5 { 1 } else { 2 }, format!("L{i}")))
        .collect();
    let (leader, _) = PartitionLog::open(&root.join("leader"), config(), FsyncBatcher::new())
        .await
        .unwrap();
    place(&leader, 0, &leader_entries).await;
    let all = batches(&leader).await;
    let end = leader.next_offset().0;
    leader.close().await.unwrap();

    let store = LogStore::open(
        &root.join("f-log"),
        &root.join("f-raft"),
        config(),
        FsyncBatcher::new(),
    )
    .await
    .unwrap();
    let log = store.log();
    place(&log, 0, &leader_entries[..5]).await;
    let tail: Vec<(u64, String)> = (0..3).map(|i| (1, format!("lost{i}"))).collect();
    place(&log, 5, &tail).await;
    log.close().await.unwrap();
    store.close_meta().await;
    // Open again, as a replica does: the store finds its entries.
    let store = LogStore::open(
        &root.join("f-log"),
        &root.join("f-raft"),
        config(),
        FsyncBatcher::new(),
    )
    .await
    .unwrap();
    let kept_end = all[4].0 + 3;
    store.set_committed(kept_end);

    // The staged run: the leader's batches of entries 5..12.
    let staged: Vec<u8> = all[5..].iter().flat_map(|(_, b)| b.to_vec()).collect();
    let dir = root.join("f-raft").join(INCOMING);
    es_storage::create_dir_all(&dir).await.unwrap();
    es_storage::write_file_atomic(&dir, "9.stage", staged)
        .await
        .unwrap();
    let manifest = Manifest {
        after: Some(log_id(1, 4)),
        start: None,
        staged: Some("9.stage".into()),
        descriptor: br#"{"test":"descriptor"}"#.to_vec(),
    };
    (all, store, manifest, end)
}

async fn reopen(root: &Path) -> LogStore {
    LogStore::open(
        &root.join("f-log"),
        &root.join("f-raft"),
        config(),
        FsyncBatcher::new(),
    )
    .await
    .expect("open after the crash")
}

async fn crash(store: LogStore) {
    store.close().await.expect("close");
}

async fn incoming_names(root: &Path) -> Vec<String> {
    es_storage::list_names(&root.join("f-raft").join(INCOMING))
        .await
        .unwrap_or_default()
}

#[test]
fn an_install_stopped_after_any_step_recovers_to_the_new_log() {
    for step in [
        None,
        Some(Step::Committed),
        Some(Step::Cut),
        Some(Step::Placed),
        Some(Step::Described),
    ] {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().to_path_buf();
        run(async move {
            let (leader, store, manifest, end) = setup(&root).await;
            store.install(&manifest, end, step).await.expect("install");
            crash(store).await;
            let store = reopen(&root).await;
            assert_eq!(
                batches(&store.log()).await,
                leader,
                "after {step:?}: the leader's log"
            );
            assert_eq!(
                store.meta().snapshot(),
                Some(manifest.descriptor.clone()),
                "after {step:?}"
            );
            assert_eq!(
                read_manifest(&store.meta()).await.unwrap(),
                None,
                "after {step:?}"
            );
            assert!(
                incoming_names(&root).await.is_empty(),
                "after {step:?}: nothing staged left"
            );
            assert_eq!(
                store.log_ids().last().map(|l| l.index),
                Some(11),
                "after {step:?}: the store holds every entry"
            );
            store.close().await.unwrap();
        });
    }
}

#[test]
fn an_install_stopped_half_way_through_placing_recovers_to_the_new_log() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().to_path_buf();
    run(async move {
        let (leader, store, manifest, end) = setup(&root).await;
        store.install(&manifest, end, Some(Step::Cut)).await.unwrap();
        // Two of the seven staged entries placed, then the crash.
        let log = store.log();
        for (i, (_, b)) in leader[5..7].iter().enumerate() {
            let index = 5 + i as u64;
            log.append_entry(
                2,
                index,
                EntryBody::Batches(vec![BatchBuf::from(b.to_vec())], Stamping::Verify),
            )
            .unwrap();
            log.wait_durable_index(index).await.unwrap();
        }
        crash(store).await;
        let store = reopen(&root).await;
        assert_eq!(batches(&store.log()).await, leader);
        store.close().await.unwrap();
    });
}

#[test]
fn a_transfer_not_committed_leaves_the_old_log_and_no_leftovers() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().to_path_buf();
    run(async move {
        let (_, store, _, _) = setup(&root).await;
        let before = batches(&store.log()).await;
        crash(store).await;
        let store = reopen(&root).await;
        assert_eq!(
            batches(&store.log()).await,
            before,
            "the old log, its tail included"
        );
        assert!(incoming_names(&root).await.is_empty(), "the staged file is gone");
        assert_eq!(store.meta().snapshot(), None);
        store.close().await.unwrap();
    });
}

#[test]
fn an_install_with_nothing_staged_keeps_the_log_and_what_follows() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().to_path_buf();
    run(async move {
        let (_, store, manifest, _) = setup(&root).await;
        let before = batches(&store.log()).await;
        let end = before[4].0 + 3;
        // The replica held the snapshot's last entry (index 4): nothing
        // was streamed, and its entries after it stay.
        let nothing = Manifest {
            staged: None,
            ..manifest
        };
        store.install(&nothing, end, None).await.unwrap();
        assert_eq!(batches(&store.log()).await, before);
        crash(store).await;
        let store = reopen(&root).await;
        assert_eq!(batches(&store.log()).await, before);
        assert_eq!(store.meta().snapshot(), Some(nothing.descriptor.clone()));
        store.close().await.unwrap();
    });
}

/// A whole-log install: the follower holds entries 0..3 and a tail of its
/// own; the leader's log starts at entry 6 (retention there deleted the
/// rest), and entries 6..12 are staged to replace the follower's log
/// whole. Returns the leader's batches from entry 6, the store and the
/// manifest.
async fn setup_whole(root: &Path) -> (Vec<(u64, Bytes)>, LogStore, Manifest, u64) {
    let (all, store, _, end) = setup(&root.join("w")).await;
    // The same layout under `w/`; move it where reopen() looks.
    crash(store).await;
    for d in ["f-log", "f-raft"] {
        std::fs::rename(root.join("w").join(d), root.join(d)).unwrap(); // blocking-ok: a test's setup
    }
    let store = reopen(root).await;
    store.set_committed(all[3].0 + 3);
    let from = all[6..].to_vec();
    let staged: Vec<u8> = from.iter().flat_map(|(_, b)| b.to_vec()).collect();
    let dir = root.join("f-raft").join(INCOMING);
    es_storage::create_dir_all(&dir).await.unwrap();
    es_storage::write_file_atomic(&dir, "9.stage", staged)
        .await
        .unwrap();
    let manifest = Manifest {
        after: None,
        start: Some(crate::snapshot::Start {
            offset: from[0].0,
            index: 6,
        }),
        staged: Some("9.stage".into()),
        descriptor: br#"{"test":"whole"}"#.to_vec(),
    };
    (from, store, manifest, end)
}

/// Checks that the store at `root` holds the leader's log from entry 6 on,
/// and that nothing of the install is left.
async fn assert_whole(root: &Path, leader: &[(u64, Bytes)], manifest: &Manifest, what: &str) {
    let store = reopen(root).await;
    assert_eq!(batches(&store.log()).await, leader, "{what}: the leader's log");
    assert_eq!(
        store.log().hot_start_offset().0,
        leader[0].0,
        "{what}: the log starts at the leader's first hot offset"
    );
    let ids = store.log_ids();
    assert_eq!(
        (ids.first().map(|l| l.index), ids.last().map(|l| l.index)),
        (Some(6), Some(11)),
        "{what}: the store holds entries 6..=11"
    );
    assert_eq!(
        store.meta().snapshot(),
        Some(manifest.descriptor.clone()),
        "{what}"
    );
    assert_eq!(read_manifest(&store.meta()).await.unwrap(), None, "{what}");
    assert!(
        incoming_names(root).await.is_empty(),
        "{what}: nothing staged left"
    );
    // The log takes the next entry after them.
    let log = store.log();
    place(&log, 12, &[(2, "next".to_string())]).await;
    store.close().await.unwrap();
}

#[test]
fn a_whole_log_install_stopped_after_any_step_recovers_to_the_new_log() {
    for step in [
        None,
        Some(Step::Committed),
        Some(Step::Cut),
        Some(Step::Placed),
        Some(Step::Described),
    ] {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().to_path_buf();
        run(async move {
            let (leader, store, manifest, end) = setup_whole(&root).await;
            store.install(&manifest, end, step).await.expect("install");
            crash(store).await;
            assert_whole(&root, &leader, &manifest, &format!("after {step:?}")).await;
        });
    }
}

#[test]
fn a_whole_log_install_stopped_inside_the_reset_or_placing_recovers_to_the_new_log() {
    // What a crash inside step 3 can leave: the newest segment gone (a
    // prefix left), every segment gone, the new empty segment alone, or
    // some of the staged entries placed after it.
    for case in ["newest gone", "all gone", "half placed"] {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().to_path_buf();
        run(async move {
            let (leader, store, manifest, end) = setup_whole(&root).await;
            let stop = if case == "half placed" {
                Step::Cut
            } else {
                Step::Committed
            };
            store.install(&manifest, end, Some(stop)).await.unwrap();
            if case == "half placed" {
                let log = store.log();
                for (i, (_, b)) in leader[..2].iter().enumerate() {
                    let index = 6 + i as u64;
                    log.append_entry(
                        2,
                        index,
                        EntryBody::Batches(vec![BatchBuf::from(b.to_vec())], Stamping::Verify),
                    )
                    .unwrap();
                    log.wait_durable_index(index).await.unwrap();
                }
            }
            crash(store).await;
            let dir = root.join("f-log");
            let mut logs: Vec<_> = std::fs::read_dir(&dir) // blocking-ok: a test's crash
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "index"))
                .collect();
            logs.sort();
            match case {
                "newest gone" => {
                    let newest = logs.last().unwrap().with_extension("");
                    for ext in ["log", "index"] {
                        // blocking-ok: a test's crash
                        let _ = std::fs::remove_file(newest.with_extension(ext));
                    }
                }
                "all gone" => {
                    for p in &logs {
                        std::fs::remove_file(p).unwrap(); // blocking-ok: a test's crash
                    }
                }
                _ => {}
            }
            assert_whole(&root, &leader, &manifest, case).await;
        });
    }
}
