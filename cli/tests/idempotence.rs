//! `es produce` through its idempotent producer (the default) against the
//! real broker: every line stored once, in order per partition, also
//! across a broker killed with -9 and restarted. What exactly is resent on
//! a lost connection, and with which sequences, is unit-tested against a
//! fake broker in src/idempotent/fake_broker.rs. The harness is in common/mod.rs.

mod common;

use std::collections::BTreeMap;

use serde_json::Value;

use common::*;

/// partition -> values, in offset order, checking that offsets are 0, 1, 2...
fn stored(b: &Broker, topic: &str) -> BTreeMap<u64, Vec<String>> {
    let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for r in json_lines(&ok(b.es(&["--json", "consume", topic, "--from-beginning"]))) {
        let p = r["partition"].as_u64().expect("partition");
        let values = out.entry(p).or_default();
        assert_eq!(r["offset"].as_u64(), Some(values.len() as u64), "{r}");
        values.push(r["value"].as_str().expect("value").to_string());
    }
    out
}

/// The acks, zipped with the values sent, grouped by partition in ack
/// order; checks that each partition's offsets count up from `base`.
fn acked(acks: &[Value], values: &[String]) -> BTreeMap<u64, Vec<String>> {
    assert_eq!(acks.len(), values.len(), "one ack per line");
    let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (a, v) in acks.iter().zip(values) {
        let p = a["partition"].as_u64().expect("partition");
        let list = out.entry(p).or_default();
        assert_eq!(a["offset"].as_u64(), Some(list.len() as u64), "{a}");
        list.push(v.clone());
    }
    out
}

#[test]
fn every_line_is_stored_once_and_in_order() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "3"]));

    // keyed: the client-side partitioner agrees with the broker's rule
    let keys = ["user-42", "alice", "bob", "", "carol"];
    let mut input = String::new();
    let mut values = Vec::new();
    for i in 0..3000 {
        let key = keys[i % keys.len()];
        input.push_str(&format!("{key}:{i}\n"));
        values.push(i.to_string());
    }
    let acks = json_lines(&ok(b.es_stdin(
        &["--json", "produce", "t", "--key-separator", ":"],
        input.as_bytes(),
    )));
    for (i, a) in acks.iter().enumerate() {
        let key = keys[i % keys.len()];
        assert_eq!(
            a["partition"].as_u64(),
            Some(fnv1a_64(key.as_bytes()) % 3),
            "{key:?}"
        );
    }
    let want = acked(&acks, &values);
    assert_eq!(stored(&b, "t"), want);

    // keyless: one partition per batch, rotating; still once and in order
    ok(b.es(&["topic", "create", "k", "--partitions", "3"]));
    let pad = "x".repeat(100);
    let values: Vec<String> = (0..25_000).map(|i| format!("{i:05}{pad}")).collect();
    let input: String = values.iter().map(|v| format!("{v}\n")).collect();
    let acks = json_lines(&ok(b.es_stdin(&["--json", "produce", "k"], input.as_bytes())));
    let want = acked(&acks, &values);
    assert!(
        want.len() >= 2,
        "2.6 MB make several 1 MiB batches, on several partitions"
    );
    let got = stored(&b, "k");
    assert_eq!(got, want);
    for list in got.values() {
        assert!(
            list.windows(2).all(|w| w[0] < w[1]),
            "input order within a partition"
        );
    }

    // --no-idempotence: the plain producer, same keyed placement
    let out = ok(b.es_stdin(
        &[
            "--json",
            "produce",
            "t",
            "--key-separator",
            ":",
            "--no-idempotence",
        ],
        b"user-42:plain\n",
    ));
    let ack = &json_lines(&out)[0];
    assert_eq!(ack["partition"].as_u64(), Some(fnv1a_64(b"user-42") % 3));
    let summary = ok(b.es_stdin(&["produce", "t", "--partition", "2"], b"a\nb\n"));
    assert!(
        stderr(&summary).starts_with("produced 2 records to t\n"),
        "{}",
        stderr(&summary)
    );
    let help = stdout(&ok(run_es(&["produce", "--help"], b"", &[])));
    assert!(help.contains("--no-idempotence"), "{help}");
}

#[test]
fn produce_goes_on_across_a_broker_killed_and_restarted() {
    let mut b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "3"]));
    let line = |i: usize| format!("k{}:{i}\n", i % 7);
    let mut producer = Running::start(&b, &["--json", "produce", "t", "--key-separator", ":"]);
    let first: String = (0..50).map(line).collect();
    producer.write(first.as_bytes());
    producer.wait_for_lines("50 acks", |l| l.len() == 50);

    // The broker dies between two chunks of input and comes back; es finds
    // its connection gone when it sends the next batch, reconnects and
    // resends: each record is written once.
    b.kill9_and_restart();
    let second: String = (50..100).map(line).collect();
    producer.write(second.as_bytes());
    producer.close_stdin();
    let (status, lines, err) = producer.wait();
    assert!(status.success(), "{status}: {err}");
    let values: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    let want = acked(&parse_lines(&lines), &values);
    assert_eq!(stored(&b, "t"), want, "every record once, in order per partition");

    // the records acknowledged before the kill were durable, the producer id
    // still works after the restart, and a new run starts a new one
    ok(b.es_stdin(&["produce", "t", "--key-separator", ":"], b"k1:after\n"));
    let total: usize = stored(&b, "t").values().map(Vec::len).sum();
    assert_eq!(total, 101);
}
