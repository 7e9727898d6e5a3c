//! The broker across restarts, shard-count changes, signals and crashes.
//!
//! Contract proven here (docs/api.md, "Running the broker" and "Durability"):
//! - Topics, their config and every record survive a restart, and producing
//!   continues at the high watermark.
//! - `--shards` can change between runs (2, then 1, then 3, then 2 after a
//!   kill -9): every partition is found with every record.
//! - SIGTERM and SIGINT make the broker exit with code 0 after closing its
//!   segments cleanly: the next start scans no segment
//!   (`es_recovery_segments_scanned_total` is 0), whereas after kill -9 it
//!   scans at least one. SIGTERM under concurrent produce loses no
//!   acknowledged record; requests caught by the shutdown fail with 503
//!   `unavailable` or a closed connection, never anything else.
//! - kill -9 under concurrent produce (8 threads, about 2000 acknowledged
//!   records, small segments so logs roll): after the restart every
//!   acknowledged (partition, offset) reads back the exact value sent, no
//!   value appears twice, and nothing but sent values appears.
//! - Garbage appended to a partition's last segment while the broker is
//!   stopped is trimmed at start-up (the file returns to its clean length and
//!   the segment counts as scanned); all records still read, and the next
//!   produce continues at the right offset.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use common::*;
use serde_json::{json, Value};

fn segment_count(dir: &std::path::Path) -> usize {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {dir:?}: {e}"))
        .filter(|e| {
            let name = e.as_ref().expect("dir entry").file_name();
            let name = name.to_string_lossy();
            name.len() == 24 && name.ends_with(".log")
        })
        .count()
}

#[test]
fn restart_keeps_topics_config_and_records() {
    let mut b = Broker::start(2);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "keep", "partitions": 3, "config": { "segment_bytes": 4096, "segment_ms": 600000 } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    create_topic(&b, "other", 1);

    // Enough data for several 4 KiB segments per partition.
    for p in 0..3u32 {
        for req in 0..20 {
            let values: Vec<String> = (0..10)
                .map(|i| format!("p{p}-r{req}-i{i}-{}", "d".repeat(30)))
                .collect();
            produce_values(&b, "keep", p, &values);
        }
    }
    produce(
        &b,
        "keep",
        json!({ "encoding": "base64", "records": [
            { "key": b64_encode(&[0, 255, 1]), "value": b64_encode(&[0, 0, 255, 254]) },
            { "key": b64_encode(b"user-42"), "value": b64_encode(b"hello"), "timestamp": 1700000000000i64 }
        ] }),
    );
    produce(&b, "other", json!({ "records": [ { "value": "solo" } ] }));
    for p in 0..3 {
        let n = segment_count(&b.partition_dir("keep", p));
        assert!(
            n >= 2,
            "segment_bytes 4096 must roll partition {p} (found {n} segments)"
        );
    }

    let list_before = b.get("/v1/topics");
    let keep_before = describe(&b, "keep");
    let other_before = describe(&b, "other");
    let records_before: Vec<Vec<Value>> = (0..3).map(|p| fetch_all(&b, "keep", p, "base64")).collect();
    let hws = high_watermarks(&b, "keep");

    let status = b.sigterm_and_wait();
    assert_eq!(status.code(), Some(0), "SIGTERM must exit 0 (got {status})");
    b.restart();

    assert_eq!(b.get("/v1/topics"), list_before);
    assert_eq!(describe(&b, "keep"), keep_before);
    assert_eq!(describe(&b, "other"), other_before);
    for p in 0..3u32 {
        assert_eq!(
            fetch_all(&b, "keep", p, "base64"),
            records_before[p as usize],
            "partition {p}"
        );
    }
    assert_eq!(values_of(&b, "other", 0), vec!["solo"]);

    // Producing continues at the high watermark.
    for p in 0..3u32 {
        let offsets = produce_values(&b, "keep", p, &[format!("after-{p}")]);
        assert_eq!(offsets, vec![hws[p as usize]], "partition {p}");
    }

    // And the same after kill -9.
    b.kill9();
    b.restart();
    assert_eq!(describe(&b, "keep")["config"], keep_before["config"]);
    for p in 0..3u32 {
        let mut expected = records_before[p as usize].clone();
        let after = fetch_all(&b, "keep", p, "base64");
        assert_eq!(after.len(), expected.len() + 1, "partition {p}");
        expected.push(after[after.len() - 1].clone());
        assert_eq!(after, expected, "partition {p}");
        assert_eq!(
            b64_decode(after[after.len() - 1]["value"].as_str().expect("value")),
            format!("after-{p}").as_bytes()
        );
    }
}

/// Produces ten records to each of the 8 partitions, checking offsets, and
/// remembers them.
fn add_round(c: &Client, expected: &mut [Vec<String>], round: &str) {
    for (p, part) in expected.iter_mut().enumerate() {
        let values: Vec<String> = (0..10).map(|i| format!("{round}-p{p}-{i}")).collect();
        let offsets = produce_values(c, "sharded", p as u32, &values);
        let first = part.len() as u64;
        assert_eq!(
            offsets,
            (first..first + 10).collect::<Vec<u64>>(),
            "round {round}, partition {p}"
        );
        part.extend(values);
    }
}

fn check_all(c: &Client, expected: &[Vec<String>], when: &str) {
    for (p, part) in expected.iter().enumerate() {
        assert_eq!(&values_of(c, "sharded", p as u32), part, "{when}: partition {p}");
    }
}

#[test]
fn changing_the_shard_count_keeps_every_record_on_every_partition() {
    let mut b = Broker::start(2);
    create_topic(&b, "sharded", 8);
    let mut expected: Vec<Vec<String>> = vec![Vec::new(); 8];

    add_round(&b, &mut expected, "two");
    check_all(&b, &expected, "with 2 shards");

    assert!(b.sigterm_and_wait().success(), "SIGTERM exit");
    b.restart_with_shards(1);
    check_all(&b, &expected, "after restarting with 1 shard");
    add_round(&b, &mut expected, "one");
    create_topic(&b, "born-on-one-shard", 3);
    produce_values(&b, "born-on-one-shard", 2, &["x".to_string()]);

    assert!(b.sigterm_and_wait().success(), "SIGTERM exit");
    b.restart_with_shards(3);
    check_all(&b, &expected, "after restarting with 3 shards");
    assert_eq!(values_of(&b, "born-on-one-shard", 2), vec!["x"]);
    add_round(&b, &mut expected, "three");
    // Keyed records still follow the key hash, whatever the shard count.
    let acks = produce(
        &b,
        "sharded",
        json!({ "records": [ { "key": "user-42", "value": "keyed" } ] }),
    );
    assert_eq!(acks[0].0, key_partition(b"user-42", 8));
    expected[acks[0].0 as usize].push("keyed".to_string());

    b.kill9();
    b.restart_with_shards(2);
    check_all(&b, &expected, "after kill -9 with 3 shards and a restart with 2");
    assert_eq!(values_of(&b, "born-on-one-shard", 2), vec!["x"]);
    let (status, list) = b.get("/v1/topics");
    assert_eq!(status, 200);
    assert_eq!(
        list,
        json!({ "topics": [
            { "name": "born-on-one-shard", "partitions": 3 },
            { "name": "sharded", "partitions": 8 }
        ] })
    );
}

#[test]
fn sigterm_and_sigint_exit_zero_and_the_restart_scans_nothing() {
    let mut b = Broker::start(2);
    create_topic(&b, "calm", 4);
    create_topic(&b, "untouched", 2);
    let mut expected: Vec<Vec<String>> = vec![Vec::new(); 4];
    for (p, part) in expected.iter_mut().enumerate() {
        let values: Vec<String> = (0..5).map(|i| format!("calm-{p}-{i}")).collect();
        produce_values(&b, "calm", p as u32, &values);
        part.extend(values);
    }

    let status = b.sigterm_and_wait();
    assert_eq!(status.code(), Some(0), "SIGTERM must exit 0 (got {status})");
    b.restart();
    assert_eq!(
        b.metric("es_recovery_segments_scanned_total"),
        Some(0.0),
        "a clean shutdown leaves nothing to scan"
    );
    for (p, part) in expected.iter_mut().enumerate() {
        assert_eq!(&values_of(&b, "calm", p as u32), part);
        produce_values(&b, "calm", p as u32, &[format!("second-{p}")]);
        part.push(format!("second-{p}"));
    }

    let status = b.signal_and_wait("INT");
    assert_eq!(status.code(), Some(0), "SIGINT must exit 0 (got {status})");
    b.restart();
    assert_eq!(
        b.metric("es_recovery_segments_scanned_total"),
        Some(0.0),
        "a clean shutdown leaves nothing to scan"
    );
    for (p, part) in expected.iter().enumerate() {
        assert_eq!(&values_of(&b, "calm", p as u32), part);
    }

    // The metric is not stuck at 0: after kill -9 the written segments are scanned.
    produce_values(&b, "calm", 0, &["third".to_string()]);
    b.kill9();
    b.restart();
    let scanned = b
        .metric("es_recovery_segments_scanned_total")
        .expect("es_recovery_segments_scanned_total");
    assert!(
        scanned >= 1.0,
        "after kill -9 the last segment of a written partition is scanned (got {scanned})"
    );
    expected[0].push("third".to_string());
    for (p, part) in expected.iter().enumerate() {
        assert_eq!(&values_of(&b, "calm", p as u32), part);
    }
}

/// What the producer threads of the concurrent tests share.
struct Shared {
    acked: Mutex<Vec<(u32, u64, String)>>,
    count: AtomicUsize,
    /// Set before the broker is signalled or killed: failures after it are expected.
    stopping: AtomicBool,
    /// Failures that must not happen (before `stopping`, or of the wrong kind).
    unexpected: Mutex<Vec<String>>,
}

/// The records producer `t` sends in its `seq`-th request: 1-3 records,
/// keyed, pinned to a partition or keyless, each value unique.
fn records_for(t: usize, seq: usize, partitions: u32) -> Vec<Value> {
    let n = 1 + (t + seq) % 3;
    (0..n)
        .map(|i| {
            let value = format!("t{t}-s{seq}-r{i}-{}", "z".repeat((t * 31 + seq * 7) % 200));
            match (seq + i) % 3 {
                0 => json!({ "key": format!("k{t}-{i}"), "value": value }),
                1 => json!({ "partition": ((t + i) as u32) % partitions, "value": value }),
                _ => json!({ "value": value }),
            }
        })
        .collect()
}

/// Runs `threads` producers against `topic` until the broker goes away (or
/// `shared.stopping` is set and a request fails).
fn spawn_producers(
    c: &Client,
    topic: &str,
    partitions: u32,
    threads: usize,
    shared: &Arc<Shared>,
    allow_503: bool,
) -> Vec<thread::JoinHandle<()>> {
    (0..threads)
        .map(|t| {
            let c = c.clone();
            let shared = Arc::clone(shared);
            let path = format!("/v1/topics/{topic}/records");
            thread::spawn(move || {
                for seq in 0.. {
                    let records = records_for(t, seq, partitions);
                    let values: Vec<String> = records
                        .iter()
                        .map(|r| r["value"].as_str().expect("value").to_string())
                        .collect();
                    let result = c.try_post(&path, &json!({ "records": records }));
                    let stopping = shared.stopping.load(Ordering::SeqCst);
                    match result {
                        Ok((200, body)) => {
                            let offsets = parse_offsets(&body);
                            if offsets.len() != values.len() {
                                shared.unexpected.lock().unwrap().push(format!("bad ack {body}"));
                                return;
                            }
                            let mut acked = shared.acked.lock().unwrap();
                            for ((p, o), v) in offsets.into_iter().zip(values) {
                                acked.push((p, o, v));
                            }
                            shared.count.fetch_add(records.len(), Ordering::SeqCst);
                        }
                        Ok((503, body)) if stopping && allow_503 => {
                            if body["error"]["code"] != "unavailable" {
                                shared
                                    .unexpected
                                    .lock()
                                    .unwrap()
                                    .push(format!("503 without unavailable: {body}"));
                            }
                            return;
                        }
                        Ok((status, body)) => {
                            shared
                                .unexpected
                                .lock()
                                .unwrap()
                                .push(format!("producer {t}: {status} {body}"));
                            return;
                        }
                        Err(e) => {
                            if !stopping {
                                shared
                                    .unexpected
                                    .lock()
                                    .unwrap()
                                    .push(format!("producer {t}: {e}"));
                            }
                            return;
                        }
                    }
                }
            })
        })
        .collect()
}

/// Every acknowledged record reads back exactly; every value in the log was
/// sent, and only once. Returns the high watermarks.
fn verify_acked(b: &Broker, topic: &str, partitions: u32, shared: &Shared) -> Vec<u64> {
    let mut logs: BTreeMap<u32, BTreeMap<u64, String>> = BTreeMap::new();
    let mut seen = HashSet::new();
    for p in 0..partitions {
        let log = logs.entry(p).or_default();
        for r in fetch_all(b, topic, p, "utf8") {
            let offset = r["offset"].as_u64().expect("offset");
            let value = r["value"].as_str().expect("value").to_string();
            assert!(
                value.starts_with('t') && value.contains("-s"),
                "a value nobody sent: {value:?} at {p}/{offset}"
            );
            assert!(
                seen.insert(value.clone()),
                "value {value:?} stored twice (again at {p}/{offset})"
            );
            log.insert(offset, value);
        }
    }
    let acked = shared.acked.lock().unwrap();
    for (p, o, v) in acked.iter() {
        let got = logs.get(p).and_then(|l| l.get(o));
        assert_eq!(got, Some(v), "acknowledged record {p}/{o} lost or changed");
    }
    high_watermarks(b, topic)
}

#[test]
fn kill9_under_concurrent_produce_loses_no_acknowledged_record() {
    const PARTITIONS: u32 = 4;
    const THREADS: usize = 8;
    const TARGET_ACKS: usize = 2000;
    let mut b = Broker::start(2);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "crash", "partitions": PARTITIONS, "config": { "segment_bytes": 65536 } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);

    let shared = Arc::new(Shared {
        acked: Mutex::new(Vec::new()),
        count: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        unexpected: Mutex::new(Vec::new()),
    });
    let producers = spawn_producers(&b, "crash", PARTITIONS, THREADS, &shared, false);
    wait_for("2000 acknowledged records", || {
        shared.count.load(Ordering::SeqCst) >= TARGET_ACKS || !shared.unexpected.lock().unwrap().is_empty()
    });
    shared.stopping.store(true, Ordering::SeqCst);
    b.kill9();
    for h in producers {
        h.join().expect("producer thread");
    }
    let unexpected = shared.unexpected.lock().unwrap().clone();
    assert!(unexpected.is_empty(), "failures before the kill: {unexpected:?}");
    let acked_count = shared.acked.lock().unwrap().len();
    assert!(acked_count >= TARGET_ACKS, "only {acked_count} acks");

    b.restart();
    let scanned = b
        .metric("es_recovery_segments_scanned_total")
        .expect("es_recovery_segments_scanned_total");
    assert!(scanned >= 1.0, "a crash leaves segments to scan (got {scanned})");
    let hws = verify_acked(&b, "crash", PARTITIONS, &shared);

    // The logs take new records right after what survived.
    for p in 0..PARTITIONS {
        let offsets = produce_values(&b, "crash", p, &[format!("after-crash-{p}")]);
        assert_eq!(offsets, vec![hws[p as usize]], "partition {p}");
    }
    let status = b.sigterm_and_wait();
    assert_eq!(status.code(), Some(0), "SIGTERM after recovery (got {status})");
}

#[test]
fn sigterm_under_concurrent_produce_exits_zero_and_loses_no_acknowledged_record() {
    const PARTITIONS: u32 = 4;
    let mut b = Broker::start(2);
    create_topic(&b, "graceful", PARTITIONS);
    let shared = Arc::new(Shared {
        acked: Mutex::new(Vec::new()),
        count: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        unexpected: Mutex::new(Vec::new()),
    });
    let producers = spawn_producers(&b, "graceful", PARTITIONS, 4, &shared, true);
    wait_for("300 acknowledged records", || {
        shared.count.load(Ordering::SeqCst) >= 300 || !shared.unexpected.lock().unwrap().is_empty()
    });
    shared.stopping.store(true, Ordering::SeqCst);
    let status = b.sigterm_and_wait();
    for h in producers {
        h.join().expect("producer thread");
    }
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM under load must exit 0 (got {status})"
    );
    let unexpected = shared.unexpected.lock().unwrap().clone();
    assert!(unexpected.is_empty(), "unexpected failures: {unexpected:?}");

    b.restart();
    assert_eq!(
        b.metric("es_recovery_segments_scanned_total"),
        Some(0.0),
        "a clean shutdown leaves nothing to scan"
    );
    verify_acked(&b, "graceful", PARTITIONS, &shared);
}

#[test]
fn garbage_appended_to_the_last_segment_is_trimmed_at_restart() {
    let mut b = Broker::start(1);
    let got = b.post(
        "/v1/topics",
        json!({ "name": "torn", "partitions": 2, "config": { "segment_bytes": 1024 } }),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    // One batch per request, ~250 bytes each: several segments.
    let values: Vec<String> = (0..10).map(|i| format!("torn-{i}-{}", "v".repeat(180))).collect();
    for v in &values {
        produce_values(&b, "torn", 0, std::slice::from_ref(v));
    }
    produce_values(&b, "torn", 1, &["p1-a".to_string(), "p1-b".to_string()]);
    assert!(b.sigterm_and_wait().success(), "SIGTERM exit");

    let dir = b.partition_dir("torn", 0);
    assert!(segment_count(&dir) >= 2, "segment_bytes 1024 must roll");
    let seg = last_segment(&dir);
    let clean_len = fs::metadata(&seg).expect("segment").len();
    let garbage: Vec<u8> = (0..300u32).map(|i| (i.wrapping_mul(37) ^ 0xa5) as u8).collect();
    append_to_file(&seg, &garbage);

    b.restart();
    assert_eq!(
        fs::metadata(&seg).expect("segment").len(),
        clean_len,
        "the garbage after the last batch of {seg:?} must be trimmed at start-up"
    );
    let scanned = b
        .metric("es_recovery_segments_scanned_total")
        .expect("es_recovery_segments_scanned_total");
    assert!(scanned >= 1.0, "the damaged segment was scanned (got {scanned})");
    assert_eq!(values_of(&b, "torn", 0), values);
    assert_eq!(values_of(&b, "torn", 1), vec!["p1-a", "p1-b"]);
    assert_eq!(high_watermarks(&b, "torn"), vec![10, 2]);

    // The next produce continues at the right offset, and reads back.
    assert_eq!(produce_values(&b, "torn", 0, &["after".to_string()]), vec![10]);
    let mut expected = values.clone();
    expected.push("after".to_string());
    assert_eq!(values_of(&b, "torn", 0), expected);

    // A clean restart afterwards scans nothing and keeps everything.
    assert!(b.sigterm_and_wait().success(), "SIGTERM exit");
    b.restart();
    assert_eq!(b.metric("es_recovery_segments_scanned_total"), Some(0.0));
    assert_eq!(values_of(&b, "torn", 0), expected);
    assert_eq!(values_of(&b, "torn", 1), vec!["p1-a", "p1-b"]);
}
