//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use std::future::Future;

use es_storage::Record;

/// Runs `fut` on a fresh glommio executor, as a shard would.
pub fn run<T>(fut: impl Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .make()
        .expect("glommio executor (needs io_uring and >= 512 KiB memlock)")
        .run(fut)
}

/// Like [`run`], with the segment writer's direct writes and fsyncs on
/// `threads` disk threads (0: through io_uring, as `run`).
pub fn run_with_disk_threads<T>(threads: usize, fut: impl Future<Output = T>) -> T {
    es_storage::start_disk_threads(threads, "es-test-disk").expect("disk threads");
    run(fut)
}

/// Disk thread counts a test runs with: io_uring, then two threads.
pub const DISK_THREAD_MODES: [usize; 2] = [0, 2];

pub fn rec(key: Option<&str>, value: &str, ts: i64) -> Record {
    Record {
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.as_bytes().to_vec(),
        timestamp_ms: ts,
    }
}

/// The wall clock in ms since the Unix epoch, as the broker passes it to
/// `PartitionLog::cleanup`.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Every record from the log start to the high watermark, paging with
/// `read_records` and a small byte budget (so gaps and segment edges are
/// crossed one batch at a time).
pub async fn read_all(log: &es_storage::PartitionLog) -> Vec<es_storage::StoredRecord> {
    let hw = log.durable_offset();
    let mut from = log.log_start_offset();
    let mut out = Vec::new();
    while from < hw {
        let got = log.read_records(from, 1, hw).await.expect("read");
        assert!(
            got.next_offset > from,
            "a read below the high watermark makes progress"
        );
        out.extend(got.records);
        from = got.next_offset;
    }
    out
}

/// Names of the files in a directory, sorted.
pub fn file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
