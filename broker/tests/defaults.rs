//! Defaults that the other tests override:
//! - no `--shards` (one shard per core, pinned): the broker becomes ready
//!   and serves; every shard must agree on the shard count, which is
//!   counted once, before the shards pin themselves to one core each.
//! - no `--data-dir` (`./data`, relative to the working directory): topics
//!   are created, written, read and found again after a restart (glommio
//!   cannot open relative paths, so the broker resolves them at start).

#[path = "common/wait.rs"]
mod wait;

use std::process::{Command, Stdio};
use std::time::Duration;

/// Kills the broker if the test fails before stopping it.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn default_shard_count_becomes_ready_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let (http, binary) = (free_port(), free_port());
    let data = dir.path().join("data");
    let mut cmd = broker_command(http, binary);
    cmd.args(["--data-dir", data.to_str().unwrap()]);
    let mut guard = Guard(cmd.spawn().unwrap());
    wait_ready(&mut guard, http);
    create_and_check(http);
    stop(&mut guard);
}

#[test]
fn default_data_dir_is_relative_to_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (http, binary) = (free_port(), free_port());
    let start = || {
        let mut cmd = broker_command(http, binary);
        cmd.current_dir(dir.path()).args(["--shards", "2"]);
        cmd.spawn().unwrap()
    };
    let mut guard = Guard(start());
    wait_ready(&mut guard, http);
    create_and_check(http);
    stop(&mut guard);
    assert!(
        dir.path().join("data/topics/d/meta.json").is_file(),
        "data went to ./data"
    );
    let mut guard = Guard(start());
    wait_ready(&mut guard, http);
    for p in 0..8 {
        assert_eq!(
            read_first(http, p),
            format!("v{p}"),
            "partition {p} after a restart"
        );
    }
    stop(&mut guard);
}

/// es-broker on these ports, its output discarded.
fn broker_command(http: u16, binary: u16) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_es-broker"));
    cmd.args(["--registry-addr", "disabled", "--kafka-addr", "disabled"]);
    cmd.args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(["--binary-addr", &format!("127.0.0.1:{binary}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

fn url(http: u16, p: &str) -> String {
    format!("http://127.0.0.1:{http}{p}")
}

/// Waits until the broker answers `GET /ready` 200 (however long it
/// takes, up to the hang guard); panics at once if it exits first.
fn wait_ready(guard: &mut Guard, http: u16) {
    wait::poll_until(
        "GET /ready to answer 200",
        || {
            let status = guard.0.try_wait().expect("try_wait")?;
            Some(format!("es-broker exited with {status} before it was ready"))
        },
        || {
            let probe = ureq::get(&url(http, "/ready")).timeout(Duration::from_secs(5));
            probe.call().is_ok_and(|r| r.status() == 200).then_some(())
        },
    )
}

/// Creates topic `d` with 8 partitions, writes one record to each and reads
/// it back.
fn create_and_check(http: u16) {
    ureq::post(&url(http, "/v1/topics"))
        .send_json(serde_json::json!({"name": "d", "partitions": 8}))
        .unwrap();
    for p in 0..8 {
        let body = serde_json::json!({"records": [{"value": format!("v{p}"), "partition": p}]});
        ureq::post(&url(http, "/v1/topics/d/records"))
            .send_json(body)
            .unwrap();
        assert_eq!(read_first(http, p), format!("v{p}"));
    }
}

fn read_first(http: u16, p: u32) -> String {
    let got: serde_json::Value = ureq::get(&url(
        http,
        &format!("/v1/topics/d/partitions/{p}/records?offset=0"),
    ))
    .call()
    .unwrap()
    .into_json()
    .unwrap();
    got["records"][0]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn stop(guard: &mut Guard) {
    let pid = guard.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status = wait::poll_until(
        "es-broker to exit after SIGTERM",
        || None,
        || guard.0.try_wait().expect("try_wait"),
    );
    assert_eq!(status.code(), Some(0));
}
