//! The committed log id's file, written behind openraft's `save_committed`
//! without a close: it reaches the file on its own (what a replica killed
//! before it could close leaves), the latest of a burst is the one written,
//! and a metadata directory opened again reads it.

mod common;

use std::path::Path;

use common::{run, HANG_GUARD};
use es_raft::{log_id, LogId, RaftMeta};

/// Waits (a hang guard, not a deadline) until `dir`'s committed file,
/// opened afresh, reads `want`.
async fn wait_for_file(dir: &Path, want: LogId) {
    let start = std::time::Instant::now();
    loop {
        let seen = RaftMeta::open(dir).await.unwrap().committed();
        if seen == Some(want) {
            return;
        }
        assert!(
            start.elapsed() < HANG_GUARD,
            "the committed file never read {want} (last {seen:?})"
        );
        glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[test]
fn the_committed_log_id_reaches_its_file_without_a_close() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("raft");
    run(async {
        let meta = RaftMeta::open(&dir).await.unwrap();
        assert_eq!(meta.committed(), None);
        meta.note_committed(Some(log_id(3, 7)));
        assert_eq!(meta.committed(), Some(log_id(3, 7)), "in memory at once");
        wait_for_file(&dir, log_id(3, 7)).await;
        // A burst: the file ends with its last value.
        for i in 8..40 {
            meta.note_committed(Some(log_id(3, i)));
        }
        wait_for_file(&dir, log_id(3, 39)).await;
        // Dropped without a close, as a kill would: the file stands.
        drop(meta);
        let again = RaftMeta::open(&dir).await.unwrap();
        assert_eq!(again.committed(), Some(log_id(3, 39)));
        again.close().await;
    });
}
