//! A shard whose thread dies stops the broker.
//!
//! Contract: a panic in a shard's detached task (one a connection or an
//! operation does not contain: a bug in a storage task, say) ends that
//! shard's thread; the broker then exits with an error that says so,
//! instead of serving on without that shard's partitions and never
//! exiting. The panic is a debug-build test hook (`ES_TEST_PANIC_AFTER_MS`
//! in broker/src/runtime.rs): shard 0 panics that long after it starts.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;

#[test]
fn a_shard_thread_that_dies_stops_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("broker.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .args(["--data-dir", dir.path().join("data").to_str().unwrap()])
        .args(["--http-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--binary-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--shards", "2"])
        .env("ES_TEST_PANIC_AFTER_MS", "300")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the broker kept running with a dead shard; its log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "exited with {status}; log:\n{text}");
    assert!(text.contains("shard thread ended"), "{text}");
}
