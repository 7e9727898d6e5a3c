//! SIGTERM stops a broker in any state, and the exit code says whether the
//! stop was clean.
//!
//! Contract:
//! - SIGTERM while partitions are still being recovered stops the broker:
//!   it opens no further topic, closes what it opened, and exits 0 (a
//!   clean stop) without ever becoming ready.
//! - A second SIGTERM while the first one's shutdown waits for open
//!   connections exits at once, with code 1 and a message saying the next
//!   start recovers the partitions.
//! - A stop where a partition did not close cleanly exits 1, not 0.
//!
//! The states are held by debug-build hooks (`ES_TEST_HOLD_RECOVERY`,
//! `ES_TEST_UNCLEAN_CLOSE`, broker/src/shard/runtime.rs) or by a client, never
//! reached by waiting a fixed time.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};

use common::{free_port, wait_for, Broker};
use serde_json::json;

/// Starts es-broker on `data_dir` with `env`, its output in `log`; does
/// not wait for anything.
fn spawn(data_dir: &Path, log: &Path, env: &[(&str, &str)]) -> (Child, u16) {
    let http = free_port();
    let out = std::fs::File::create(log).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .args(["--data-dir", data_dir.to_str().expect("utf-8 path")])
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(["--binary-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--shards", "2"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("clone"))
        .stderr(out)
        .spawn()
        .expect("spawn es-broker");
    (child, http)
}

fn log_text(log: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned()
}

fn sigterm(child: &Child) {
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
}

/// Waits for `child` to exit, with the hang guard only.
fn wait_exit(child: &mut Child, log: &Path) -> ExitStatus {
    let mut status = None;
    wait_for("the broker to exit", || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status.unwrap_or_else(|| panic!("no exit status; log:\n{}", log_text(log)))
}

/// A data directory holding two topics (so recovery has more than one to
/// open), stopped cleanly.
fn data_with_topics() -> tempfile::TempDir {
    let mut b = Broker::start(2);
    for name in ["a", "b", "c"] {
        let (status, _) = b.post("/v1/topics", json!({"name": name, "partitions": 4}));
        assert_eq!(status, 201);
        let (status, _) = b.post(
            &format!("/v1/topics/{name}/records"),
            json!({"records": [{"value": "x"}]}),
        );
        assert_eq!(status, 200);
    }
    assert_eq!(b.sigterm_and_wait().code(), Some(0));
    let dir = tempfile::tempdir().expect("tempdir");
    let status = Command::new("cp")
        .arg("-a")
        .arg(b.data_dir())
        .arg(dir.path().join("data"))
        .status()
        .expect("cp");
    assert!(status.success());
    dir
}

#[test]
fn sigterm_during_recovery_stops_the_broker_cleanly() {
    let dir = data_with_topics();
    let log = dir.path().join("broker.log");
    let (mut child, _) = spawn(&dir.path().join("data"), &log, &[("ES_TEST_HOLD_RECOVERY", "1")]);
    wait_for("recovery to be held", || {
        log_text(&log).matches("recovery waits for shutdown").count() >= 2
    });
    sigterm(&child);
    let status = wait_exit(&mut child, &log);
    let text = log_text(&log);
    assert_eq!(status.code(), Some(0), "a stop during recovery is clean:\n{text}");
    assert!(
        text.contains("shutdown during recovery"),
        "recovery must stop at the next topic:\n{text}"
    );
    assert!(
        !text.contains("shard ready"),
        "no shard may go on recovering and become ready after SIGTERM:\n{text}"
    );
    // Nothing was lost or changed: the next start serves every topic.
    let b = restart_on(dir.path());
    for name in ["a", "b", "c"] {
        let (status, body) = b.get(&format!("/v1/topics/{name}"));
        assert_eq!(status, 200, "{body}");
    }
}

/// A broker started on the data directory under `dir` (moved into a
/// fixture so the usual helpers apply).
fn restart_on(dir: &Path) -> Broker {
    let mut b = Broker::start(2);
    let status = b.sigterm_and_wait();
    assert_eq!(status.code(), Some(0));
    std::fs::remove_dir_all(b.data_dir()).expect("clear the fixture's data");
    let status = Command::new("cp")
        .arg("-a")
        .arg(dir.join("data"))
        .arg(b.data_dir())
        .status()
        .expect("cp");
    assert!(status.success());
    b.restart();
    b
}

#[test]
fn a_second_sigterm_exits_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("broker.log");
    let (mut child, http) = spawn(&dir.path().join("data"), &log, &[]);
    let client = common::Client::new(format!("127.0.0.1:{http}").parse().expect("addr"));
    wait_for("the broker to be ready", || {
        matches!(client.try_get("/ready"), Ok((200, _)))
    });
    // A connection in the middle of a request: the first SIGTERM's shutdown
    // waits for it (up to 30 s) before closing partitions.
    let mut held = TcpStream::connect(("127.0.0.1", http)).expect("connect");
    held.write_all(b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .expect("write");
    sigterm(&child);
    wait_for("shutdown to start", || log_text(&log).contains("shutting down"));
    sigterm(&child);
    let status = wait_exit(&mut child, &log);
    let text = log_text(&log);
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("again: exiting now without closing partitions; the next start recovers them"),
        "{text}"
    );
    drop(held);
}

#[test]
fn a_stop_that_leaves_partitions_unclean_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("broker.log");
    let (mut child, http) = spawn(&dir.path().join("data"), &log, &[("ES_TEST_UNCLEAN_CLOSE", "1")]);
    let client = common::Client::new(format!("127.0.0.1:{http}").parse().expect("addr"));
    wait_for("the broker to be ready", || {
        matches!(client.try_get("/ready"), Ok((200, _)))
    });
    sigterm(&child);
    let status = wait_exit(&mut child, &log);
    let text = log_text(&log);
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("did not close cleanly") && text.contains("the next start recovers them"),
        "{text}"
    );
}
