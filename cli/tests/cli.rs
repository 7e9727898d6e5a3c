//! `es topic`, `es produce` and `es consume` (without groups) against the
//! real broker; the harness is in common/mod.rs.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::*;

// ------------------------------------------------------------------ tests

#[test]
fn topics_create_list_describe_config_delete() {
    let b = Broker::start();

    let out = stdout(&ok(b.es(&["topic", "create", "orders", "--partitions", "3"])));
    assert!(
        out.starts_with("created topic orders: 3 partitions, replication factor 1\n"),
        "{out}"
    );
    assert!(out.contains("segment_bytes"), "{out}");

    let created = json_lines(&ok(b.es(&[
        "--json",
        "topic",
        "create",
        "alpha",
        "--partitions",
        "1",
        "--replication-factor",
        "1",
        "--config",
        "segment_bytes=1048576",
        "--config",
        "segment_ms=600000",
    ])));
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["name"], "alpha");
    assert_eq!(created[0]["partitions"], 1);
    assert_eq!(created[0]["config"]["segment_bytes"], 1048576);
    assert_eq!(created[0]["config"]["segment_ms"], 600000);

    // list: a table for people, one object per topic for machines
    let table = stdout(&ok(b.es(&["topic", "list"])));
    assert!(table.starts_with("NAME    PARTITIONS\n"), "{table}");
    assert_eq!(rows(&table), vec![vec!["alpha", "1"], vec!["orders", "3"]]);
    // --api-key is sent in the handshake and ignored by the broker today
    let with_key = run_es(
        &["topic", "list"],
        b"",
        &[("ES_API_KEY", "secret"), ("ES_BROKER", b.addr.as_str())],
    );
    assert_eq!(stdout(&ok(with_key)), table);
    let listed = json_lines(&ok(b.es(&["topic", "list", "--json"])));
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1]["name"], "orders");
    assert_eq!(listed[1]["partitions"], 3);

    // describe
    ok(b.es_stdin(&["produce", "orders", "--partition", "2"], b"a\nb\n"));
    let described = stdout(&ok(b.es(&["topic", "describe", "orders"])));
    let lines: Vec<&str> = described.lines().collect();
    assert_eq!(lines[0], "topic orders: 3 partitions, replication factor 1");
    assert_eq!(
        lines[2],
        "PARTITION  LOG START OFFSET  HIGH WATERMARK  LEADER  REPLICAS"
    );
    let partitions: Vec<Vec<&str>> = lines[3..6]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        partitions,
        vec![
            vec!["0", "0", "0", "1", "1"],
            vec!["1", "0", "0", "1", "1"],
            vec!["2", "0", "2", "1", "1"]
        ]
    );
    assert!(lines[7].starts_with("CONFIG"), "{described}");
    assert!(has_row(&described, &["segment_ms", "null"]), "{described}");
    let doc = &json_lines(&ok(b.es(&["--json", "topic", "describe", "orders"])))[0];
    assert_eq!(doc["partitions"].as_array().map(Vec::len), Some(3));
    assert_eq!(doc["partitions"][2]["high_watermark"], 2);

    // config: integers go as integers, null clears
    let out = stdout(&ok(b.es(&[
        "topic",
        "config",
        "orders",
        "segment_bytes=2097152",
        "segment_ms=600000",
    ])));
    assert!(out.starts_with("updated the config of topic orders\n"), "{out}");
    assert!(has_row(&out, &["segment_bytes", "2097152"]), "{out}");
    let doc = &json_lines(&ok(b.es(&[
        "--json",
        "topic",
        "config",
        "orders",
        "segment_ms=null",
    ])))[0];
    assert_eq!(doc["config"]["segment_ms"], Value::Null);
    assert_eq!(doc["config"]["segment_bytes"], 2097152);
    // No KEY=VALUE: the config as it is, changed by nothing.
    let shown = stdout(&ok(b.es(&["topic", "config", "orders"])));
    assert!(shown.starts_with("CONFIG"), "{shown}");
    assert!(has_row(&shown, &["segment_bytes", "2097152"]), "{shown}");
    assert!(has_row(&shown, &["segment_ms", "null"]), "{shown}");
    let doc = &json_lines(&ok(b.es(&["--json", "topic", "config", "orders"])))[0];
    assert_eq!(doc["name"], "orders");
    assert_eq!(doc["config"]["segment_bytes"], 2097152);
    assert_eq!(
        fails(&b.es(&["topic", "config", "nope"]), 1),
        fails(&b.es(&["topic", "describe", "nope"]), 1),
        "a missing topic: the same error as describe"
    );
    let err = fails(&b.es(&["topic", "config", "orders", "no_such_key=5"]), 1);
    assert!(
        err.starts_with("es: ") && err.contains("(invalid_request)"),
        "{err}"
    );

    // errors
    let err = fails(&b.es(&["topic", "create", "orders", "--partitions", "3"]), 1);
    assert_eq!(
        err,
        "es: topic \"orders\" already exists (topic_exists). See it with: es topic describe orders\n"
    );
    let err = fails(&b.es(&["topic", "create", "a/b", "--partitions", "1"]), 1);
    assert!(err.contains("(invalid_topic_name)"), "{err}");
    // The broker's message states the rule; said once, not twice.
    assert_eq!(err.matches("1-249 characters").count(), 1, "{err}");

    // delete
    let out = stdout(&ok(b.es(&["topic", "delete", "orders"])));
    assert_eq!(out, "deleted topic orders\n");
    let err = fails(&b.es(&["topic", "describe", "orders"]), 1);
    assert_eq!(
        err,
        "es: topic \"orders\" does not exist (topic_not_found). Create it with: es topic create orders --partitions N\n"
    );
    let doc = &json_lines(&ok(b.es(&["--json", "topic", "delete", "alpha"])))[0];
    assert_eq!(doc["deleted"], true);
    let none = ok(b.es(&["topic", "list"]));
    assert_eq!(stdout(&none), "");
    assert!(stderr(&none).contains("no topics yet"), "{}", stderr(&none));
}

#[test]
fn produce_lines_then_consume_them_back_in_order() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "events", "--partitions", "3"]));
    let keys = ["user-42", "alice", "bob", "carol", "", "x:y"];
    let mut input = String::new();
    let mut sent = Vec::new();
    for i in 0..300 {
        let key = keys[i % keys.len()];
        let value = format!("value {i}:{key}");
        input.push_str(&format!("{key}:{value}\n"));
        sent.push((key.split(':').next().unwrap_or_default().to_string(), value));
    }
    // "x:y" splits at the first ':' -> key "x", value "y:value ..."
    for (i, s) in sent.iter_mut().enumerate() {
        if keys[i % keys.len()] == "x:y" {
            s.1 = format!("y:{}", s.1);
        }
    }

    let produced = ok(b.es_stdin(
        &["--json", "produce", "events", "--key-separator", ":"],
        input.as_bytes(),
    ));
    let acks = json_lines(&produced);
    assert_eq!(acks.len(), 300);
    let mut next_offset: BTreeMap<u64, u64> = BTreeMap::new();
    let mut per_partition: BTreeMap<u64, Vec<(String, String)>> = BTreeMap::new();
    for (ack, (key, value)) in acks.iter().zip(&sent) {
        let p = ack["partition"].as_u64().expect("partition");
        assert_eq!(p, fnv1a_64(key.as_bytes()) % 3, "key {key:?}");
        let want = next_offset.entry(p).or_insert(0);
        assert_eq!(
            ack["offset"].as_u64(),
            Some(*want),
            "offsets follow the input order"
        );
        *want += 1;
        per_partition
            .entry(p)
            .or_default()
            .push((key.clone(), value.clone()));
    }

    // everything back, in order within each partition
    let records = json_lines(&ok(b.es(&["--json", "consume", "events", "--from-beginning"])));
    assert_eq!(records.len(), 300);
    let mut got: BTreeMap<u64, Vec<(String, String)>> = BTreeMap::new();
    for r in &records {
        let p = r["partition"].as_u64().expect("partition");
        let offset = r["offset"].as_u64().expect("offset");
        assert_eq!(offset, got.get(&p).map_or(0, |v| v.len() as u64));
        assert!(r["timestamp"].as_i64().is_some_and(|t| t > 0), "{r}");
        assert_eq!(r.get("encoding"), None);
        let key = r["key"].as_str().expect("key").to_string();
        let value = r["value"].as_str().expect("value").to_string();
        got.entry(p).or_default().push((key, value));
    }
    assert_eq!(got, per_partition);

    // plain output of one partition, with keys
    let p0 = stdout(&ok(b.es(&[
        "consume",
        "events",
        "--from-beginning",
        "--partition",
        "0",
        "--print-key",
    ])));
    let want: String = per_partition
        .get(&0)
        .map(|v| v.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect())
        .unwrap_or_default();
    assert_eq!(p0, want);
    let values = stdout(&ok(b.es(&[
        "consume",
        "events",
        "--from-beginning",
        "--partition",
        "0",
    ])));
    assert_eq!(values.lines().count(), per_partition.get(&0).map_or(0, Vec::len));

    // the default start is the high watermark: nothing new, say so, exit 0
    let latest = ok(b.es(&["consume", "events"]));
    assert_eq!(stdout(&latest), "");
    assert!(
        stderr(&latest).contains("--from-beginning"),
        "{}",
        stderr(&latest)
    );

    // the summary for people goes to stderr
    let summary = ok(b.es_stdin(&["produce", "events", "--partition", "1"], b"one\ntwo\n"));
    assert_eq!(stdout(&summary), "");
    let err = stderr(&summary);
    assert!(err.starts_with("produced 2 records to events\n"), "{err}");
    let first = per_partition.get(&1).map_or(0, Vec::len);
    let row = vec![
        "1".to_string(),
        "2".into(),
        first.to_string(),
        (first + 1).to_string(),
    ];
    assert!(
        err.lines().nth(1).is_some_and(|l| l.starts_with("PARTITION")),
        "{err}"
    );
    assert!(
        rows(&err).iter().skip(1).any(|r| *r == row),
        "{err}\nwanted: {row:?}"
    );
}

#[test]
fn key_and_partition_flags_and_bad_lines() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "3"]));

    // --key for every record: one partition, FNV-1a of the key (user-42 -> 0 of 3)
    let acks = json_lines(&ok(
        b.es_stdin(&["--json", "produce", "t", "--key", "user-42"], b"a\nb\nc\n")
    ));
    assert_eq!(fnv1a_64(b"user-42") % 3, 0);
    let parts: Vec<u64> = acks.iter().filter_map(|a| a["partition"].as_u64()).collect();
    assert_eq!(parts, vec![0, 0, 0]);

    // --partition wins over keys
    let acks = json_lines(&ok(
        b.es_stdin(&["--json", "produce", "t", "--partition", "2"], b"x\r\ny\n")
    ));
    assert_eq!(acks.len(), 2);
    assert!(acks.iter().all(|a| a["partition"] == 2));
    let values = stdout(&ok(b.es(&[
        "consume",
        "t",
        "--from-beginning",
        "--partition",
        "2",
    ])));
    assert_eq!(values, "x\ny\n", "newline (and a CR before it) stripped");

    // a partition the topic does not have
    let err = fails(&b.es_stdin(&["produce", "t", "--partition", "5"], b"x\n"), 1);
    assert!(err.contains("has no partition 5"), "{err}");
    let err = fails(&b.es(&["consume", "t", "--partition", "3"]), 1);
    assert!(err.contains("has no partition 3"), "{err}");

    // a line without the separator: named, and what came before is produced
    let out = b.es_stdin(
        &["produce", "t", "--key-separator", "=", "--partition", "1"],
        b"a=1\nb=2\nno separator\nc=3\n",
    );
    let err = fails(&out, 1);
    assert!(err.contains("es: line 3 has no key separator \"=\""), "{err}");
    assert!(err.contains("The 2 records before it were produced"), "{err}");
    let got = stdout(&ok(b.es(&[
        "consume",
        "t",
        "--from-beginning",
        "--partition",
        "1",
        "--print-key",
    ])));
    assert_eq!(got, "a\t1\nb\t2\n");

    // a record without a key prints "null" as its key
    let got = stdout(&ok(b.es(&[
        "consume",
        "t",
        "--from-beginning",
        "--partition",
        "2",
        "--print-key",
    ])));
    assert_eq!(got, "null\tx\nnull\ty\n");

    // `\t` typed (as a shell passes '\t') separates at a tab
    ok(b.es_stdin(
        &["produce", "t", "--key-separator", "\\t", "--partition", "0"],
        b"k1\tv1\n",
    ));
    let got = stdout(&ok(b.es(&[
        "consume",
        "t",
        "--offset",
        "3",
        "--partition",
        "0",
        "--print-key",
    ])));
    assert_eq!(got, "k1\tv1\n");
}

#[test]
fn consume_max_and_offset() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "1"]));
    let input: String = (0..50).map(|i| format!("v{i}\n")).collect();
    ok(b.es_stdin(&["produce", "t"], input.as_bytes()));

    let out = stdout(&ok(b.es(&["consume", "t", "--from-beginning", "--max", "7"])));
    assert_eq!(out, "v0\nv1\nv2\nv3\nv4\nv5\nv6\n");
    let out = stdout(&ok(b.es(&["consume", "t", "--offset", "10", "--max", "3"])));
    assert_eq!(out, "v10\nv11\nv12\n");
    let out = stdout(&ok(b.es(&["consume", "t", "--offset", "48"])));
    assert_eq!(out, "v48\nv49\n");
    let out = stdout(&ok(b.es(&["consume", "t", "--from-beginning", "--max", "0"])));
    assert_eq!(out, "");
    // --max with --follow stops too, without waiting for more
    let out = stdout(&ok(b.es(&[
        "consume",
        "t",
        "--from-beginning",
        "--follow",
        "--max",
        "2",
    ])));
    assert_eq!(out, "v0\nv1\n");

    let err = fails(&b.es(&["consume", "t", "--offset", "99"]), 1);
    assert!(
        err.contains("(offset_out_of_range)") && err.contains("--from-beginning"),
        "{err}"
    );
    assert!(err.starts_with("es: partition 0: offset 99"), "{err}");
}

#[test]
fn follow_picks_up_a_record_produced_after_it_started() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "live", "--partitions", "2"]));
    ok(b.es_stdin(&["produce", "live", "--partition", "0"], b"before\n"));

    let mut child = Command::new(es_path())
        .args([
            "--broker",
            &b.addr,
            "--json",
            "consume",
            "live",
            "--from-beginning",
            "--follow",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start es consume --follow");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let child = Arc::new(Mutex::new(child));
    // A guard against a hang, not an assertion: kill the consumer if the
    // test is still waiting for it after the hang guard (10 minutes).
    let guard = {
        let child = child.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + hang_guard();
            while Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(200));
                if let Ok(mut c) = child.lock() {
                    if !matches!(c.try_wait(), Ok(None)) {
                        return;
                    }
                }
            }
            if let Ok(mut c) = child.lock() {
                let _ = c.kill();
            }
        })
    };

    // The record already there comes first: the consumer is running.
    let first: Value = serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("JSON");
    assert_eq!(first["value"], "before");
    assert_eq!(first["partition"], 0);
    // Produced after the consumer printed, to the other partition.
    ok(b.es_stdin(&["produce", "live", "--partition", "1"], b"after\n"));
    let second: Value = serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("JSON");
    assert_eq!(second["value"], "after");
    assert_eq!(second["partition"], 1);
    assert_eq!(second["offset"], 0);
    ok(b.es_stdin(&["produce", "live", "--partition", "0"], b"again\n"));
    let third: Value = serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("JSON");
    assert_eq!(
        (third["value"].as_str(), third["offset"].as_u64()),
        (Some("again"), Some(1))
    );

    if let Ok(mut c) = child.lock() {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = guard.join();
}

#[test]
fn unknown_topic_says_what_to_do() {
    let b = Broker::start();
    let want =
        "es: topic \"nope\" does not exist (topic_not_found). Create it with: es topic create nope --partitions N\n";
    assert_eq!(fails(&b.es_stdin(&["produce", "nope"], b"x\n"), 1), want);
    assert_eq!(fails(&b.es(&["consume", "nope", "--from-beginning"]), 1), want);
    assert_eq!(fails(&b.es(&["topic", "describe", "nope"]), 1), want);
    // Deleting a topic that does not exist suggests listing, not creating.
    assert_eq!(
        fails(&b.es(&["topic", "delete", "nope"]), 1),
        "es: topic \"nope\" does not exist (topic_not_found). See the topics with: es topic list\n"
    );
    assert_eq!(
        fails(&b.es(&["topic", "config", "nope", "segment_ms=1"]), 1),
        want
    );
}

#[test]
fn unreachable_broker_says_what_to_do() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let want = format!(
        "es: cannot reach the broker at {addr}: connection refused. Is es-broker running? Set --broker or ES_BROKER.\n"
    );
    let out = run_es(&["--broker", &addr, "topic", "list"], b"", &[]);
    assert_eq!(fails(&out, 1), want);
    let out = run_es(&["produce", "t"], b"x\n", &[("ES_BROKER", addr.as_str())]);
    assert_eq!(fails(&out, 1), want);
    let out = run_es(&["consume", "t", "--broker", &addr], b"", &[]);
    assert_eq!(fails(&out, 1), want);
}

#[test]
fn bad_usage_exits_2() {
    let out = run_es(&["topic", "create", "t"], b"", &[]);
    assert!(fails(&out, 2).contains("--partitions"));
    let out = run_es(&["consume", "t", "--offset", "1", "--from-beginning"], b"", &[]);
    fails(&out, 2);
    let out = run_es(&["produce", "t", "--key", "k", "--key-separator", ":"], b"", &[]);
    fails(&out, 2);
    let out = run_es(&["topic", "config", "t", "novalue"], b"", &[]);
    assert!(fails(&out, 2).contains("key=value"));
    let help = stdout(&ok(run_es(&["--help"], b"", &[])));
    assert!(
        help.contains("ES_BROKER") && help.contains("ES_API_KEY") && help.contains("--auth required"),
        "{help}"
    );
}

#[test]
fn gzip_produce_and_binary_values() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "z", "--partitions", "2"]));
    let input: String = (0..2000)
        .map(|i| format!("a fairly repetitive line number {i}\n"))
        .collect();
    let acks = json_lines(&ok(b.es_stdin(
        &["--json", "produce", "z", "--gzip", "--partition", "0"],
        input.as_bytes(),
    )));
    assert_eq!(acks.len(), 2000);
    assert_eq!(acks[1999]["offset"], 1999);
    let out = stdout(&ok(b.es(&[
        "consume",
        "z",
        "--from-beginning",
        "--partition",
        "0",
    ])));
    assert_eq!(out, input);

    // bytes that are not UTF-8 come back in base64
    ok(b.es_stdin(
        &["produce", "z", "--partition", "1", "--key-separator", "|"],
        b"\x00\xff|\xfe\x01\nk|v\n",
    ));
    let records = json_lines(&ok(b.es(&[
        "--json",
        "consume",
        "z",
        "--from-beginning",
        "--partition",
        "1",
    ])));
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["encoding"], "base64");
    assert_eq!(records[0]["key"], "AP8=");
    assert_eq!(records[0]["value"], "/gE=");
    assert_eq!(records[1]["key"], "k");
    assert_eq!(records[1]["value"], "v");
    assert_eq!(records[1].get("encoding"), None);
}
