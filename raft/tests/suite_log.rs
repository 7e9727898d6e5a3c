//! openraft's storage conformance suite (`openraft::testing::Suite`, every
//! case: common/suite.rs) against `LogStore` (the Raft log over a real
//! partition log in a temporary directory) and `PartitionSm`.

mod common;

use es_raft::openraft::testing::StoreBuilder;
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

storage_suite!(Disk: LogStore, PartitionSm, TempDir);

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
