//! A shard whose thread dies stops the broker.
//!
//! Contract: a panic in a shard's detached task (one a connection or an
//! operation does not contain: a bug in a storage task, say) ends that
//! shard's thread; the broker then exits with an error that says so,
//! instead of serving on without that shard's partitions and never
//! exiting. The panic is a debug-build test hook (`ES_TEST_PANIC_AFTER_MS`
//! in broker/src/shard/runtime.rs): shard 0 panics that long after it starts.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use common::{free_port, poll_until};

/// Kills the broker, and prints its log, if the test fails first.
struct Guard(Child, PathBuf);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "----- es-broker log -----\n{}",
                std::fs::read_to_string(&self.1).unwrap_or_default()
            );
        }
    }
}

#[test]
fn a_shard_thread_that_dies_stops_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("broker.log");
    let child = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .args(["--data-dir", dir.path().join("data").to_str().unwrap()])
        .args(["--http-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--binary-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--shards", "2"])
        .env("ES_TEST_PANIC_AFTER_MS", "300")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut broker = Guard(child, log.clone());
    // However long it takes; a broker that keeps running with a dead shard
    // fails at the hang guard.
    let status = poll_until(
        "the broker to exit after its shard thread died",
        || None,
        || broker.0.try_wait().unwrap(),
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "exited with {status}; log:\n{text}");
    assert!(text.contains("shard thread ended"), "{text}");
}
