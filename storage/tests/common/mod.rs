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

pub fn rec(key: Option<&str>, value: &str, ts: i64) -> Record {
    Record {
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.as_bytes().to_vec(),
        timestamp_ms: ts,
    }
}
