//! Producer id expiry against the real broker (`--producer-id-expiry-ms`,
//! default a day; docs/groups.md, "Producer id expiry").
//!
//! Contract: a producer id that wrote nothing on any partition (and got no
//! new epoch) for the expiry is forgotten by every partition and by the
//! registry: a produce with it, a retry of its last batch included, and a
//! `POST /v1/producers` for its next epoch are 404 `unknown_producer_id`,
//! and nothing is written; so is an id issued and never used. An id that
//! wrote within the expiry, on any partition, stays usable on every
//! partition with its window intact. Both hold after a kill -9.
//!
//! Time is the broker's test clock: with `ES_TEST_CLOCK` set, a debug
//! broker adds the milliseconds in `<data-dir>/test-clock-offset-ms` to
//! its clock, read at each cleanup tick and said in its log once in
//! effect (broker/src/operate/clock.rs). The test moves it a day ahead; nothing
//! waits on the wall clock.

mod common;

use common::{fnv1a64, values_of, wait_for, Broker};
use serde_json::{json, Value};

const TOPIC: &str = "expiry";
const PARTITIONS: u32 = 4;
const SHARDS: usize = 2;
const HOUR_MS: i64 = 60 * 60 * 1000;

/// The shard that owns a partition (docs/api.md, "Placement").
fn shard_of(topic: &str, partition: u32) -> usize {
    let mut key = topic.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(&partition.to_le_bytes());
    (fnv1a64(&key) % SHARDS as u64) as usize
}

/// Two partitions of the topic on different shards.
fn partitions_on_two_shards() -> (u32, u32) {
    let a = 0;
    let b = (1..PARTITIONS)
        .find(|&p| shard_of(TOPIC, p) != shard_of(TOPIC, a))
        .expect("a partition on the other shard");
    (a, b)
}

fn init(b: &Broker, existing: Option<i64>) -> (u16, Value) {
    let body = match existing {
        Some(id) => json!({"producer_id": id}),
        None => json!({}),
    };
    b.post("/v1/producers", body)
}

fn new_id(b: &Broker) -> i64 {
    let (status, body) = init(b, None);
    assert_eq!(status, 200, "POST /v1/producers: {body}");
    body["producer_id"].as_i64().expect("producer_id")
}

fn produce(b: &Broker, partition: u32, id: i64, epoch: i64, seq: i64, value: &str) -> (u16, Value) {
    b.post(
        &format!("/v1/topics/{TOPIC}/records"),
        json!({"records": [{"value": value, "partition": partition}],
               "producer_id": id, "epoch": epoch, "sequence": seq}),
    )
}

/// Produces and returns the offset it was written at.
fn written(b: &Broker, partition: u32, id: i64, epoch: i64, seq: i64, value: &str) -> u64 {
    let (status, body) = produce(b, partition, id, epoch, seq, value);
    assert_eq!(
        status, 200,
        "producer {id} seq {seq} on partition {partition}: {body}"
    );
    body["offsets"][0]["offset"].as_u64().expect("offset")
}

fn assert_unknown(got: (u16, Value), what: &str) {
    let (status, body) = got;
    assert_eq!(status, 404, "{what}: {body}");
    assert_eq!(body["error"]["code"], "unknown_producer_id", "{what}: {body}");
}

/// Moves the broker's clock to `offset_ms` past the system clock, and
/// waits until the broker says it is in effect.
fn set_clock(b: &Broker, offset_ms: i64) {
    std::fs::write(b.data_dir().join("test-clock-offset-ms"), offset_ms.to_string())
        .expect("write the test clock");
    wait_for(&format!("the broker's clock {offset_ms} ms ahead"), || {
        b.stderr_text().contains(&format!("offset_ms={offset_ms}"))
    });
}

fn expired_total(b: &Broker) -> f64 {
    b.metric("es_producer_ids_expired_total").unwrap_or(0.0)
}

#[test]
fn ids_idle_for_the_expiry_are_forgotten_everywhere_and_active_ones_stay() {
    // Every test of this binary sets the same value: no race between them.
    std::env::set_var("ES_TEST_CLOCK", "1");
    let mut b = Broker::start_opts(SHARDS, &["--cleanup-interval-ms", "50"]);
    assert_eq!(
        b.post("/v1/topics", json!({"name": TOPIC, "partitions": PARTITIONS}))
            .0,
        201
    );
    let (pa, pb) = partitions_on_two_shards();

    let idle = new_id(&b);
    let active = new_id(&b);
    let never = new_id(&b);
    let bumped = new_id(&b);
    let (status, body) = init(&b, Some(bumped));
    assert_eq!((status, body["epoch"].as_i64()), (200, Some(1)), "{body}");

    written(&b, pa, idle, 0, 0, "idle-a0");
    written(&b, pb, idle, 0, 0, "idle-b0");
    written(&b, pa, active, 0, 0, "active-a0");
    // The sweeps mark which ids were issued by when (every 1/128 of the
    // expiry at most): one 30 minutes on marks these four.
    set_clock(&b, HOUR_MS / 2);
    // Half a day later the active producer writes again, on one partition.
    set_clock(&b, 12 * HOUR_MS);
    let active_a1 = written(&b, pa, active, 0, 1, "active-a1");
    // A day and an hour after the start: a day since the others were
    // last active, half a day since the active one.
    set_clock(&b, 25 * HOUR_MS);
    wait_for("the sweep to forget the idle ids", || expired_total(&b) >= 2.0);
    assert_eq!(
        expired_total(&b),
        2.0,
        "the idle id and the re-initialized one had state to forget, no other"
    );

    let check_forgotten = |b: &Broker, after: &str| {
        assert_unknown(
            produce(b, pa, idle, 0, 1, "x"),
            &format!("idle, next batch {after}"),
        );
        assert_unknown(
            produce(b, pa, idle, 0, 0, "idle-a0"),
            &format!("idle, a retry {after}"),
        );
        assert_unknown(
            produce(b, pb, idle, 0, 1, "x"),
            &format!("idle, other shard {after}"),
        );
        assert_unknown(
            produce(b, pa, bumped, 1, 0, "x"),
            &format!("re-initialized {after}"),
        );
        assert_unknown(produce(b, pa, never, 0, 0, "x"), &format!("never used {after}"));
        assert_unknown(init(b, Some(idle)), &format!("next epoch of idle {after}"));
        assert_unknown(init(b, Some(never)), &format!("next epoch of never {after}"));
    };
    check_forgotten(&b, "after the sweep");
    let (_, body) = produce(&b, pa, idle, 0, 1, "x");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("expired")),
        "the error says the id expired: {body}"
    );

    // The active id is live on every partition, with its window: its retry
    // is still a duplicate, and it writes where it never wrote before.
    let (status, retry) = produce(&b, pa, active, 0, 1, "active-a1");
    assert_eq!(status, 200, "{retry}");
    assert_eq!(retry["offsets"][0]["offset"], active_a1, "a duplicate: {retry}");
    written(&b, pa, active, 0, 2, "active-a2");
    written(&b, pb, active, 0, 0, "active-b0");
    // Ids issued now work.
    let fresh = new_id(&b);
    written(&b, pa, fresh, 0, 0, "fresh-a0");

    // A kill -9 brings nothing back: the sweep snapshotted the partitions
    // it changed, and the registry keeps the expired floor.
    b.kill9();
    b.restart();
    check_forgotten(&b, "after kill -9");
    written(&b, pa, active, 0, 3, "active-a3");
    written(&b, pb, active, 0, 1, "active-b1");
    written(&b, pa, fresh, 0, 1, "fresh-a1");

    assert_eq!(
        values_of(&b, TOPIC, pa),
        [
            "idle-a0",
            "active-a0",
            "active-a1",
            "active-a2",
            "fresh-a0",
            "active-a3",
            "fresh-a1"
        ],
        "nothing refused was written"
    );
    assert_eq!(values_of(&b, TOPIC, pb), ["idle-b0", "active-b0", "active-b1"]);
}

#[test]
fn the_expiry_is_a_documented_flag_with_a_range() {
    for bad in ["999", "31536000001"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_es-broker"))
            .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
            .args(["--producer-id-expiry-ms", bad])
            .output()
            .expect("run es-broker");
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--producer-id-expiry-ms must be in 1000..=31536000000"),
            "{bad}: {err}"
        );
    }
}
