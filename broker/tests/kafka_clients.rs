//! Real Kafka clients against a real es-broker's Kafka port
//! (docs/kafka.md): kcat (librdkafka 2.0.2), confluent-kafka (librdkafka
//! current) and kafka-python, installed by ./scripts/clients.sh. What they
//! write is read back through es's HTTP and binary protocols, and the
//! reverse.

mod common;
mod kafka_common;

use std::collections::{BTreeMap, BTreeSet};

use common::{create_topic, fetch_all, wait_for};
use es_protocol::client::{Client, Options};
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::produce::ProduceRecord;
use kafka_common::{kcat, py, start, Running};
use serde_json::{json, Value};

/// `kcat -L`: the broker, its advertised address, topics and partitions.
#[test]
fn kcat_lists_brokers_topics_and_partitions() {
    let (b, kafka) = start(2, &[]);
    create_topic(&b, "orders", 3);
    let (ok, out, err) = kcat(&["-b", &kafka, "-L", "-J"], "");
    assert!(ok, "{err}");
    let md: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(md["brokers"][0]["name"], json!(format!("{kafka}")), "{md}");
    let t = &md["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "orders")
        .unwrap()["partitions"];
    assert_eq!(t.as_array().unwrap().len(), 3, "{md}");
    assert_eq!(t[0]["leader"], json!(1));
}

/// kcat `-P` plain, gzip and snappy; `-C` from the beginning prints keys,
/// offsets and timestamps, which es HTTP reads identically.
#[test]
fn kcat_produces_compressed_and_consumes_with_keys_offsets_timestamps() {
    let (b, kafka) = start(2, &[]);
    create_topic(&b, "orders", 1);
    for (z, lines) in [
        (None, "k1:v1\nk2:v2\n"),
        (Some("gzip"), "k3:v3\nk4:v4\n"),
        (Some("snappy"), "k5:v5\n"),
    ] {
        let mut args = vec!["-b", &kafka, "-P", "-t", "orders", "-p", "0", "-K:"];
        if let Some(z) = z {
            args.extend(["-z", z]);
        }
        let (ok, _, err) = kcat(&args, lines);
        assert!(ok, "kcat -P {z:?}: {err}");
    }
    let (ok, out, err) = kcat(
        &[
            "-b",
            &kafka,
            "-C",
            "-t",
            "orders",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k:%s:%o:%T\n",
        ],
        "",
    );
    assert!(ok, "{err}");
    let http = fetch_all(&b, "orders", 0, "utf8");
    let expected: Vec<String> = http
        .iter()
        .map(|r| {
            format!(
                "{}:{}:{}:{}",
                r["key"].as_str().unwrap(),
                r["value"].as_str().unwrap(),
                r["offset"],
                r["timestamp"]
            )
        })
        .collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);
    let values: Vec<&str> = http.iter().map(|r| r["value"].as_str().unwrap()).collect();
    assert_eq!(values, ["v1", "v2", "v3", "v4", "v5"]);
}

/// `kcat -G`: a balanced consumer joins, is assigned every partition,
/// reads everything and commits; es's group describe shows the commits
/// and no lag.
#[test]
fn kcat_balanced_consumer_commits_into_the_es_group() {
    let (b, kafka) = start(2, &[]);
    create_topic(&b, "events", 2);
    for p in 0..2 {
        let (ok, _, err) = kcat(
            &["-b", &kafka, "-P", "-t", "events", "-p", &p.to_string()],
            "a\nb\nc\n",
        );
        assert!(ok, "{err}");
    }
    let (ok, out, err) = kcat(
        &[
            "-b",
            &kafka,
            "-G",
            "kg",
            "-o",
            "beginning",
            "-e",
            "-X",
            "enable.auto.commit=true",
            "-f",
            "%p:%o\n",
            "events",
        ],
        "",
    );
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 6, "{out}\n{err}");
    assert!(err.contains("assigned: events [0], events [1]"), "{err}");
    let (status, g) = b.get("/v1/groups/kg");
    assert_eq!(status, 200, "{g}");
    for p in g["partitions"].as_array().unwrap() {
        assert_eq!(p["committed_offset"], json!(3), "{g}");
        assert_eq!(p["lag"], json!(0), "{g}");
    }
}

/// confluent-kafka: 10,000 records (acks=all) over 3 partitions with
/// delivery reports; es HTTP reads the same offsets, keys, values and
/// timestamps.
#[test]
fn confluent_producer_records_read_back_identically_through_http() {
    let (b, kafka) = start(2, &[]);
    create_topic(&b, "bulk", 3);
    let lines = py(&["produce", &kafka, "bulk", "10000", "3"]);
    let reports: Vec<&Value> = lines.iter().filter(|l| l.get("o").is_some()).collect();
    assert_eq!(
        reports.len(),
        10_000,
        "{:?}",
        lines.iter().find(|l| l.get("error").is_some())
    );
    let mut by_partition: BTreeMap<u64, BTreeMap<u64, &Value>> = BTreeMap::new();
    for r in &reports {
        by_partition
            .entry(r["p"].as_u64().unwrap())
            .or_default()
            .insert(r["o"].as_u64().unwrap(), r);
    }
    for (p, reported) in by_partition {
        let stored = fetch_all(&b, "bulk", p as u32, "utf8");
        assert_eq!(stored.len(), reported.len(), "partition {p}");
        for s in stored {
            let r = reported[&s["offset"].as_u64().unwrap()];
            assert_eq!(
                (&s["key"], &s["value"], &s["timestamp"]),
                (&r["k"], &r["v"], &r["ts"]),
                "partition {p}"
            );
        }
    }
}

/// A record with a header is refused whole (INVALID_RECORD) and nothing
/// is written.
#[test]
fn a_record_with_headers_is_refused_and_nothing_written() {
    let (b, kafka) = start(1, &[]);
    create_topic(&b, "h", 1);
    let out = py(&["produce-headers", &kafka, "h"]);
    assert_eq!(out[0]["name"], json!("INVALID_RECORD"), "{out:?}");
    assert!(fetch_all(&b, "h", 0, "utf8").is_empty());
}

/// ListOffsets as clients ask it: earliest and latest; the max
/// timestamp (-3, KIP-734) is the first record with the largest
/// timestamp; by time, the first record at or after it with that
/// record's own timestamp (confluent-kafka and kafka-python); and the log
/// start offset a consumer learns from Fetch.
#[test]
fn list_offsets_answers_max_timestamp_and_the_found_records_timestamp() {
    let (b, kafka) = start(2, &[]);
    create_topic(&b, "times", 1);
    let client = Client::connect(&b.binary_addr(), Options::default()).expect("binary connect");
    let base = 1_600_000_000_000i64;
    let records = [100, 300, 200, 300, 50]
        .iter()
        .map(|t| ProduceRecord {
            partition: Some(0),
            timestamp_ms: Some(base + t),
            key: None,
            value: b"v".to_vec(),
        })
        .collect();
    client.produce("times", records).expect("binary produce");
    let asked = (base + 150).to_string();
    let got: BTreeMap<String, Value> = py(&["offsets", &kafka, "times", &asked])
        .into_iter()
        .map(|l| (l["spec"].as_str().unwrap().to_string(), l))
        .collect();
    let at = |spec: &str| {
        (
            got[spec]["offset"].as_i64().unwrap(),
            got[spec]["ts"].as_i64().unwrap(),
        )
    };
    assert_eq!(at("earliest").0, 0, "{got:?}");
    assert_eq!(at("latest").0, 5, "{got:?}");
    assert_eq!(
        at("max"),
        (1, base + 300),
        "the first of the two largest: {got:?}"
    );
    assert_eq!(
        at("time"),
        (1, base + 300),
        "the found record's timestamp: {got:?}"
    );
    assert_eq!(at("kafka-python time"), (1, base + 300), "{got:?}");
    let w = &got["cached watermarks"];
    assert_eq!(
        (w["lo"].as_i64(), w["hi"].as_i64()),
        (Some(0), Some(5)),
        "{got:?}"
    );
}

/// Kafka to es and es to Kafka: null and empty keys, values, offsets and
/// timestamps read the same through Kafka, HTTP and the binary protocol.
#[test]
fn cross_protocol_records_are_identical() {
    let (b, kafka) = start(2, &[]);
    create_topic(&b, "x", 1);
    // es binary writes: a null key, an empty key, a key.
    let client = Client::connect(&b.binary_addr(), Options::default()).expect("binary connect");
    let rec = |key: Option<&[u8]>, value: &[u8], ts| ProduceRecord {
        partition: Some(0),
        timestamp_ms: Some(ts),
        key: key.map(<[u8]>::to_vec),
        value: value.to_vec(),
    };
    client
        .produce(
            "x",
            vec![
                rec(None, b"n", 1_600_000_000_001),
                rec(Some(b""), b"e", 1_600_000_000_002),
                rec(Some(b"k"), b"v", 1_600_000_000_003),
            ],
        )
        .expect("binary produce");
    // Kafka writes three more (keys k0.. and explicit timestamps).
    py(&["produce", &kafka, "x", "3", "1"]);
    // Kafka reads all six.
    let read = py(&["consume", &kafka, "x", "0", "6"]);
    let kafka_view: Vec<(u64, Option<String>, String, i64)> = read
        .iter()
        .map(|r| {
            (
                r["o"].as_u64().unwrap(),
                r["k"].as_str().map(String::from),
                r["v"].as_str().unwrap().to_string(),
                r["ts"].as_i64().unwrap(),
            )
        })
        .collect();
    // es binary reads all six.
    let fetched = client
        .fetch(Fetch {
            topic: "x".into(),
            partition: 0,
            offset: Some(0),
            max_records: 100,
            max_bytes: 1 << 20,
            wait_ms: 0,
        })
        .expect("binary fetch");
    let binary_view: Vec<(u64, Option<String>, String, i64)> = fetched
        .records()
        .map(|r| {
            (
                r.offset,
                r.key.map(|k| String::from_utf8(k.to_vec()).unwrap()),
                String::from_utf8(r.value.to_vec()).unwrap(),
                r.timestamp_ms,
            )
        })
        .collect();
    assert_eq!(kafka_view, binary_view);
    assert_eq!(kafka_view[0].1, None, "a null key stays null");
    assert_eq!(kafka_view[1].1.as_deref(), Some(""), "an empty key stays empty");
    assert_eq!(
        kafka_view[3],
        (3, Some("k0".into()), "v0".into(), 1_700_000_000_000)
    );
    // And HTTP reads the same.
    let http = fetch_all(&b, "x", 0, "utf8");
    let http_view: Vec<(u64, Option<String>, String, i64)> = http
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["key"].as_str().map(String::from),
                r["value"].as_str().unwrap().to_string(),
                r["timestamp"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(kafka_view, http_view);
}

/// AdminClient: create (a second create is TOPIC_ALREADY_EXISTS), list
/// with its partitions, delete.
#[test]
fn admin_client_creates_lists_and_deletes_topics() {
    let (b, kafka) = start(1, &[]);
    let out = py(&["admin", &kafka, "made-by-admin"]);
    assert_eq!(out[0]["created"], json!("made-by-admin"));
    assert_eq!(out[1]["duplicate"], json!("TOPIC_ALREADY_EXISTS"));
    assert!(out[2]["listed"]
        .as_array()
        .unwrap()
        .contains(&json!("made-by-admin")));
    assert_eq!(out[2]["partitions"], json!(3));
    assert_eq!(out[3]["deleted"], json!("made-by-admin"));
    assert!(!out[4]["after"]
        .as_array()
        .unwrap()
        .contains(&json!("made-by-admin")));
    assert_eq!(b.get("/v1/topics/made-by-admin").0, 404);
}

/// kafka-python: a producer, a group consumer that reads 10 and commits,
/// and a second consumer of the group that resumes at the 11th.
#[test]
fn kafka_python_produces_and_its_group_resumes_after_the_commit() {
    let (b, kafka) = start(2, &[]);
    create_topic(&b, "kp", 1);
    let out = py(&["kafka-python", &kafka, "kp", "kpg"]);
    let first: Vec<Value> = (0..10).map(|i| json!(format!("v{i}"))).collect();
    let second: Vec<Value> = (10..20).map(|i| json!(format!("v{i}"))).collect();
    assert_eq!(out[1]["first"], json!(first), "{out:?}");
    assert_eq!(out[2]["second"], json!(second), "{out:?}");
    let (_, g) = b.get("/v1/groups/kpg");
    assert_eq!(g["partitions"][0]["committed_offset"], json!(20), "{g}");
}

/// An idempotent producer (enable.idempotence) across a broker restart
/// in the middle of its records: each record is written exactly once.
#[test]
fn idempotent_producer_writes_each_record_once_across_a_restart() {
    let (mut b, kafka) = start(2, &[]);
    create_topic(&b, "idem", 2);
    let producer = Running::start(&[
        "produce",
        &kafka,
        "idem",
        "20000",
        "2",
        "enable.idempotence=true",
        "message.timeout.ms=120000",
    ]);
    producer.until(|l| l.get("halfway").is_some());
    b.kill9();
    b.restart();
    let lines = producer.until(|l| l.get("done").is_some());
    assert_eq!(
        lines.last().unwrap()["undelivered"],
        json!(0),
        "{:?}",
        lines.last()
    );
    let errors: Vec<&Value> = lines.iter().filter(|l| l.get("error").is_some()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let mut seen = BTreeMap::new();
    for p in 0..2 {
        for r in fetch_all(&b, "idem", p, "utf8") {
            *seen.entry(r["value"].as_str().unwrap().to_string()).or_insert(0) += 1;
        }
    }
    assert_eq!(seen.len(), 20_000, "every record written");
    assert!(
        seen.values().all(|n| *n == 1),
        "each once: {:?}",
        seen.iter().filter(|(_, n)| **n > 1).take(5).collect::<Vec<_>>()
    );
}

/// A confluent-kafka consumer group of two processes: disjoint
/// assignments covering the topic; one killed, the other takes every
/// partition; commits in `GET /v1/groups/{g}`; a restart resumes where
/// the commits are, with no gap.
#[test]
fn confluent_group_of_two_rebalances_on_a_kill_and_resumes_without_gap() {
    let (b, kafka) = start(2, &[]);
    create_topic(&b, "gt", 4);
    for p in 0..4 {
        let (ok, _, err) = kcat(
            &["-b", &kafka, "-P", "-t", "gt", "-p", &p.to_string()],
            &"r\n".repeat(50),
        );
        assert!(ok, "{err}");
    }
    let assigned = |lines: &[Value]| -> Option<BTreeSet<u64>> {
        lines.iter().rev().find_map(|l| l.get("assigned")).map(|a| {
            a.as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_u64().unwrap())
                .collect()
        })
    };
    let a = Running::start(&["group-member", &kafka, "g2", "gt"]);
    let first = a.until(|l| {
        l.get("assigned")
            .is_some_and(|a| a.as_array().unwrap().len() == 4)
    });
    let mut consumed: Vec<(u64, u64)> = first.iter().filter_map(pair).collect();
    let bm = Running::start(&["group-member", &kafka, "g2", "gt"]);
    // Both rebalance: two disjoint halves.
    let b_lines = bm.until(|l| {
        l.get("assigned")
            .is_some_and(|a| !a.as_array().unwrap().is_empty())
    });
    let a_lines = a.until(|l| l.get("assigned").is_some_and(|a| a.as_array().unwrap().len() < 4));
    consumed.extend(a_lines.iter().chain(&b_lines).filter_map(pair));
    let (sa, sb) = (assigned(&a_lines).unwrap(), assigned(&b_lines).unwrap());
    assert!(sa.is_disjoint(&sb), "{sa:?} {sb:?}");
    assert_eq!(sa.union(&sb).count(), 4, "{sa:?} {sb:?}");
    // Kill A: B takes everything.
    a.signal("-KILL");
    drop(a);
    let b_lines = bm.until(|l| {
        l.get("assigned")
            .is_some_and(|a| a.as_array().unwrap().len() == 4)
    });
    consumed.extend(b_lines.iter().filter_map(pair));
    wait_for("every record read and committed", || {
        while let Ok(l) = bm.lines.try_recv() {
            consumed.extend(pair(&l));
        }
        let (_, g) = b.get("/v1/groups/g2");
        g["partitions"]
            .as_array()
            .is_some_and(|ps| ps.len() == 4 && ps.iter().all(|p| p["committed_offset"] == json!(50)))
    });
    bm.signal("-TERM");
    bm.until(|l| l.get("closed").is_some());
    // More records; a new member resumes at the commits, with no gap.
    for p in 0..4 {
        let (ok, _, err) = kcat(
            &["-b", &kafka, "-P", "-t", "gt", "-p", &p.to_string()],
            &"s\n".repeat(5),
        );
        assert!(ok, "{err}");
    }
    let c = Running::start(&["group-member", &kafka, "g2", "gt"]);
    let mut after: Vec<(u64, u64)> = Vec::new();
    while after.len() < 20 {
        after.extend(pair(&c.next()));
    }
    let mut firsts: BTreeMap<u64, u64> = BTreeMap::new();
    for (p, o) in &after {
        firsts.entry(*p).or_insert(*o);
    }
    assert_eq!(
        firsts.values().collect::<Vec<_>>(),
        [&50, &50, &50, &50],
        "resumed at the commits: {after:?}"
    );
    consumed.extend(after);
    for p in 0..4 {
        let offsets: BTreeSet<u64> = consumed
            .iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, o)| *o)
            .collect();
        assert_eq!(offsets, (0..55).collect(), "partition {p} read with no gap");
    }
}

fn pair(l: &Value) -> Option<(u64, u64)> {
    Some((l.get("p")?.as_u64()?, l.get("o")?.as_u64()?))
}
