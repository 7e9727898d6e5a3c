//! A broker started with no `--shards` (one shard per core, pinned) becomes
//! ready and serves: every shard must agree on the shard count, which is
//! counted once, before the shards pin themselves to one core each.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let child = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .args(["--data-dir", dir.path().join("data").to_str().unwrap()])
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(["--binary-addr", &format!("127.0.0.1:{binary}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut guard = Guard(child);
    let url = |p: &str| format!("http://127.0.0.1:{http}{p}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = ureq::get(&url("/ready")).call() {
            if r.status() == 200 {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "never ready with the default shard count"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    ureq::post(&url("/v1/topics"))
        .send_json(serde_json::json!({"name": "d", "partitions": 8}))
        .unwrap();
    for p in 0..8 {
        let body = serde_json::json!({"records": [{"value": format!("v{p}"), "partition": p}]});
        ureq::post(&url("/v1/topics/d/records")).send_json(body).unwrap();
        let got: serde_json::Value =
            ureq::get(&url(&format!("/v1/topics/d/partitions/{p}/records?offset=0")))
                .call()
                .unwrap()
                .into_json()
                .unwrap();
        assert_eq!(got["records"][0]["value"], format!("v{p}"));
    }
    let pid = guard.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert_eq!(guard.0.wait().unwrap().code(), Some(0));
}
