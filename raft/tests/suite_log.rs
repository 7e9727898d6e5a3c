//! openraft's storage conformance suite (`openraft::testing::Suite`), run
//! on a glommio executor against `LogStore` (the Raft log over a real
//! partition log in a temporary directory) and `PartitionSm`. Each case is a test of its own (the
//! suite's `test_all` builds a tokio runtime, which glommio code cannot
//! use), so a failure names its case. No case is excluded.

mod common;

use es_raft::openraft::testing::{StoreBuilder, Suite};
use es_raft::{EsRaft, LogStore, PartitionSm, StorageResult};
use es_storage::{FsyncBatcher, LogConfig};
use tempfile::TempDir;

struct Disk;

impl StoreBuilder<EsRaft, LogStore, PartitionSm, TempDir> for Disk {
    async fn build(&self) -> StorageResult<(TempDir, LogStore, PartitionSm)> {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let store = LogStore::open(
            &dir.path().join("log"),
            &dir.path().join("raft"),
            config,
            FsyncBatcher::new(),
        )
        .await?;
        let sm = PartitionSm::new(&store)?;
        Ok((dir, store, sm))
    }
}

type S = Suite<EsRaft, LogStore, PartitionSm, Disk, TempDir>;

macro_rules! cases {
    ($($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            common::run_with_tokio_timer(async {
                let (_dir, log, sm) = Disk.build().await.unwrap();
                S::$case(log, sm).await.unwrap();
            });
        }
    )*};
}

cases!(
    last_membership_in_log_initial,
    last_membership_in_log,
    last_membership_in_log_multi_step,
    get_membership_initial,
    get_membership_from_log_and_empty_sm,
    get_membership_from_empty_log_and_sm,
    get_membership_from_log_le_sm_last_applied,
    get_membership_from_log_gt_sm_last_applied_1,
    get_membership_from_log_gt_sm_last_applied_2,
    get_initial_state_without_init,
    get_initial_state_membership_from_log_and_sm,
    get_initial_state_with_state,
    get_initial_state_last_log_gt_sm,
    get_initial_state_last_log_lt_sm,
    get_initial_state_log_ids,
    get_initial_state_re_apply_committed,
    save_vote,
    get_log_entries,
    limited_get_log_entries,
    try_get_log_entry,
    initial_logs,
    get_log_state,
    get_log_id,
    last_id_in_log,
    last_applied_state,
    purge_logs_upto_0,
    purge_logs_upto_5,
    purge_logs_upto_20,
    delete_logs_since_11,
    delete_logs_since_0,
    append_to_log,
    snapshot_meta,
    apply_single,
    apply_multiple,
);

#[test]
fn transfer_snapshot() {
    common::run_with_tokio_timer(async {
        S::transfer_snapshot(&Disk).await.unwrap();
    });
}

/// Not a suite case: a snapshot descriptor whose records the log lacks
/// (a follower behind a purge, before snapshots carry records) is refused.
#[test]
fn a_snapshot_without_its_records_is_refused() {
    use es_raft::openraft::storage::RaftStateMachine;
    use es_raft::openraft::{RaftSnapshotBuilder, SnapshotMeta};
    use es_raft::EsSnapshot;
    common::run(async {
        let (_d1, _l1, mut sm) = Disk.build().await.unwrap();
        let (_d2, _l2, mut empty) = Disk.build().await.unwrap();
        let snap = sm.build_snapshot().await.unwrap();
        let image = String::from_utf8(snap.snapshot.image().to_vec()).unwrap();
        let claims = image.replace("\"end_offset\":0", "\"end_offset\":100");
        assert_ne!(image, claims);
        let meta: SnapshotMeta<u64, es_raft::openraft::EmptyNode> = snap.meta.clone();
        let refused = empty
            .install_snapshot(&meta, Box::new(EsSnapshot::Image(claims.into_bytes())))
            .await;
        assert!(
            refused.is_err(),
            "records at offsets 0..100 were never transferred"
        );
        empty
            .install_snapshot(&meta, Box::new(EsSnapshot::Image(image.into_bytes())))
            .await
            .expect("a descriptor of what the log holds installs");
    });
}
