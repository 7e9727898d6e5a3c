//! Producer ids while a broker starts after kill -9, against the real
//! broker.
//!
//! Contract: after a crash the registry cannot tell which ids of its last
//! block were handed out, so ids below its mark that no partition knows
//! are refused; but an id that wrote to a partition of one shard is known
//! on every shard once the broker is ready, and is never refused for good
//! while it starts: a produce to another shard's partition before every
//! shard has opened its partitions is 503 `unavailable` (retry), not 404
//! `unknown_producer_id`; once ready it is written, sequence 0 on that
//! partition. Shard 1's recovery is held by the debug-build hook
//! `ES_TEST_HOLD_RECOVERY=shard=1` (broker/src/shard/runtime.rs), so the test
//! waits on the broker's own log, never on time. One test in this binary:
//! it sets that variable for the brokers it starts after the first.

mod common;

use std::process::{Child, Command, Stdio};

use common::{fnv1a64, free_port, wait_for, Broker, Client};
use serde_json::{json, Value};

const TOPIC: &str = "boot";
const PARTITIONS: u32 = 4;
const SHARDS: usize = 2;

fn shard_of(partition: u32) -> usize {
    let mut key = TOPIC.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(&partition.to_le_bytes());
    (fnv1a64(&key) % SHARDS as u64) as usize
}

fn produce(c: &Client, partition: u32, id: i64, seq: i64, value: &str) -> (u16, Value) {
    c.post(
        &format!("/v1/topics/{TOPIC}/records"),
        json!({"records": [{"value": value, "partition": partition}],
               "producer_id": id, "epoch": 0, "sequence": seq}),
    )
}

/// A broker started by hand; killed if the test ends before it stops.
struct Held(Child);

impl Drop for Held {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn an_id_that_wrote_on_one_shard_is_not_refused_on_another_while_the_broker_starts() {
    let mut b = Broker::start(SHARDS);
    assert_eq!(
        b.post("/v1/topics", json!({"name": TOPIC, "partitions": PARTITIONS}))
            .0,
        201
    );
    let on_0 = (0..PARTITIONS)
        .find(|&p| shard_of(p) == 0)
        .expect("a partition on shard 0");
    let on_1 = (0..PARTITIONS)
        .find(|&p| shard_of(p) == 1)
        .expect("a partition on shard 1");
    let (_, body) = b.post("/v1/producers", json!({}));
    let id = body["producer_id"].as_i64().expect("producer_id");
    let (_, body) = b.post("/v1/producers", json!({}));
    let unused = body["producer_id"].as_i64().expect("producer_id");
    for seq in 0..2 {
        let (status, body) = produce(&b, on_1, id, seq, &format!("one-{seq}"));
        assert_eq!(status, 200, "{body}");
    }
    b.kill9();

    // Shard 1, whose partition knows the id, holds its recovery.
    let http = format!("127.0.0.1:{}", free_port());
    let log_path = b.data_dir().with_file_name("held.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut held = Held(
        Command::new(env!("CARGO_BIN_EXE_es-broker"))
            .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
            .arg("--data-dir")
            .arg(b.data_dir())
            .args(["--http-addr", &http])
            .args(["--binary-addr", &format!("127.0.0.1:{}", free_port())])
            .args(["--shards", &SHARDS.to_string()])
            .env("ES_TEST_HOLD_RECOVERY", "shard=1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn es-broker"),
    );
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_for("shard 0 to open its partitions, shard 1 held", || {
        let text = read_log();
        text.contains("shard ready shard=0") && text.contains("ES_TEST_HOLD_RECOVERY")
    });
    let c = Client::new(http.parse().expect("address"));
    let (status, body) = produce(&c, on_0, id, 0, "zero-0");
    assert_eq!(
        status,
        503,
        "not refused for good while shard 1 still opens: {body}\n{}",
        read_log()
    );
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    let sent = Command::new("kill")
        .args(["-TERM", &held.0.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let status = held.0.wait().expect("the held broker exits");
    assert!(status.code().is_some(), "{status:?}");

    b.restart();
    let (status, body) = produce(&b, on_0, id, 0, "zero-0");
    assert_eq!(status, 200, "known on shard 0 once ready: {body}");
    let (status, body) = produce(&b, on_1, id, 2, "one-2");
    assert_eq!(status, 200, "and its sequence goes on where it wrote: {body}");
    let (status, body) = produce(&b, on_1, id, 1, "one-1");
    assert_eq!(status, 200, "a retry is still a duplicate: {body}");
    assert_eq!(body["offsets"][0]["offset"], 1, "{body}");
    // An id handed out before the crash and never used: refused for good
    // (the registry cannot tell it from the rest of its block).
    let (status, body) = produce(&b, on_0, unused, 0, "never");
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "unknown_producer_id", "{body}");
}
