//! `es consume --group` and `es group ...` against the real broker; the
//! harness is in common/mod.rs.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use common::*;

/// Produces `n` records `k<i>:v<i>` (keys spread them over the partitions).
fn produce_keyed(b: &Broker, topic: &str, from: usize, n: usize) {
    let input: String = (from..from + n).map(|i| format!("k{i}:v{i}\n")).collect();
    ok(b.es_stdin(&["produce", topic, "--key-separator", ":"], input.as_bytes()));
}

/// (partition, offset) -> value of records printed with --json; panics on
/// a record printed twice.
fn by_position(records: &[Value]) -> BTreeMap<(u64, u64), String> {
    let mut out = BTreeMap::new();
    for r in records {
        let key = (
            r["partition"].as_u64().expect("partition"),
            r["offset"].as_u64().expect("offset"),
        );
        let value = r["value"].as_str().expect("value").to_string();
        assert!(out.insert(key, value).is_none(), "printed twice: {r}");
    }
    out
}

/// Every partition's offsets come in order, each one after the other.
#[track_caller]
fn in_offset_order(records: &[Value]) {
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    for r in records {
        let (p, o) = (r["partition"].as_u64(), r["offset"].as_u64());
        let (Some(p), Some(o)) = (p, o) else {
            panic!("no partition or offset: {r}")
        };
        if let Some(prev) = last.insert(p, o) {
            assert_eq!(o, prev + 1, "partition {p} jumps from {prev} to {o}");
        }
    }
}

fn describe(b: &Broker, group: &str) -> Value {
    json_lines(&ok(b.es(&["--json", "group", "describe", group])))
        .pop()
        .expect("one line")
}

fn members(doc: &Value) -> Vec<(String, BTreeSet<u64>)> {
    doc["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| {
            let parts = m["assignments"]
                .as_array()
                .expect("assignments")
                .iter()
                .map(|a| a["partition"].as_u64().expect("partition"))
                .collect();
            (m["member_id"].as_str().expect("member_id").to_string(), parts)
        })
        .collect()
}

#[test]
fn a_group_consumer_stops_and_resumes_without_losing_or_repeating() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "3"]));
    produce_keyed(&b, "t", 0, 100);

    let first = json_lines(&ok(b.es(&[
        "--json",
        "consume",
        "t",
        "--group",
        "g",
        "--from-beginning",
        "--max",
        "40",
    ])));
    assert_eq!(first.len(), 40);
    in_offset_order(&first);
    // every partition's position is committed, read or not
    let doc = describe(&b, "g");
    assert_eq!(doc["members"], Value::Array(vec![]), "it left the group");
    let committed: u64 = doc["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .map(|p| p["committed_offset"].as_u64().expect("committed"))
        .sum();
    assert_eq!(committed, 40);

    // no --from-beginning: the commits decide where it starts
    let second = json_lines(&ok(b.es(&["--json", "consume", "t", "--group", "g"])));
    assert_eq!(second.len(), 60);
    in_offset_order(&second);
    let mut all = by_position(&first);
    for (k, v) in by_position(&second) {
        assert!(all.insert(k, v).is_none(), "printed again: {k:?}");
    }
    let values: BTreeSet<String> = all.into_values().collect();
    let want: BTreeSet<String> = (0..100).map(|i| format!("v{i}")).collect();
    assert_eq!(values, want, "together exactly the 100 produced");

    // nothing left: exit 0, nothing printed, and a word on stderr
    let third = ok(b.es(&["consume", "t", "--group", "g"]));
    assert_eq!(stdout(&third), "");
    assert!(
        stderr(&third).contains("has consumed everything"),
        "{}",
        stderr(&third)
    );
    // new records come to the group's next run, and only those
    produce_keyed(&b, "t", 100, 5);
    let out = stdout(&ok(b.es(&["consume", "t", "--group", "g"])));
    let got: BTreeSet<&str> = out.lines().collect();
    assert_eq!(
        got,
        ["v100", "v101", "v102", "v103", "v104"].into_iter().collect()
    );

    // a new group without --from-beginning starts at the high watermark
    let fresh = ok(b.es(&["consume", "t", "--group", "late"]));
    assert_eq!(stdout(&fresh), "");
    assert!(stderr(&fresh).contains("--from-beginning"), "{}", stderr(&fresh));
    produce_keyed(&b, "t", 105, 1);
    assert_eq!(stdout(&ok(b.es(&["consume", "t", "--group", "late"]))), "v105\n");
}

#[test]
fn two_group_consumers_split_the_partitions() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "3"]));
    produce_keyed(&b, "t", 0, 30);
    // Sessions of 10 s (heartbeats every 3.3 s): a member of a slow run is
    // not expired between two heartbeats (were it, es would join again).
    let args = [
        "--json",
        "consume",
        "t",
        "--group",
        "g",
        "--from-beginning",
        "--follow",
        "--session-timeout-ms",
        "10000",
    ];
    let one = Running::start(&b, &args);
    one.wait_for_lines("the first consumer to read the 30 records", |l| l.len() >= 30);
    let two = Running::start(&b, &args);
    let doc = wait_until("two members in the group", || {
        let doc = describe(&b, "g");
        (members(&doc).len() == 2).then_some(doc)
    });
    // members and assignments: disjoint, together every partition
    let split = members(&doc);
    let mut sizes: Vec<usize> = split.iter().map(|(_, p)| p.len()).collect();
    sizes.sort();
    assert_eq!(sizes, vec![1, 2], "{doc}");
    let union: BTreeSet<u64> = split.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    assert_eq!(union, [0, 1, 2].into_iter().collect());
    assert_eq!(doc["topics"], serde_json::json!(["t"]));
    for p in doc["partitions"].as_array().expect("partitions") {
        let owner = p["member_id"].as_str().expect("an owner");
        let partition = p["partition"].as_u64().expect("partition");
        assert!(
            split
                .iter()
                .any(|(m, parts)| m == owner && parts.contains(&partition)),
            "{doc}"
        );
    }
    // the table form says the same
    let table = stdout(&ok(b.es(&["group", "describe", "g"])));
    assert!(table.starts_with("group g: generation "), "{table}");
    assert!(table.contains(", 2 members, topics t\n"), "{table}");

    // records produced now are consumed, and committed, by their owners
    produce_keyed(&b, "t", 30, 30);
    wait_until("the group to commit all 60 records", || {
        let doc = describe(&b, "g");
        doc["partitions"]
            .as_array()
            .expect("partitions")
            .iter()
            .all(|p| p["lag"] == 0 && p["committed_offset"] == p["high_watermark"])
            .then_some(())
    });

    // SIGTERM: finish the page, commit, leave, exit 0
    one.terminate();
    two.terminate();
    let (status_one, lines_one, err_one) = one.wait();
    let (status_two, lines_two, err_two) = two.wait();
    assert!(status_one.success(), "{status_one}: {err_one}");
    assert!(status_two.success(), "{status_two}: {err_two}");
    assert_eq!(members(&describe(&b, "g")).len(), 0, "both left");
    // at least once: every record was printed by one of them (a record
    // can be printed by both around the rebalance)
    let mut values: BTreeSet<String> = BTreeSet::new();
    for r in parse_lines(&lines_one).iter().chain(&parse_lines(&lines_two)) {
        values.insert(r["value"].as_str().expect("value").to_string());
    }
    assert_eq!(values, (0..60).map(|i| format!("v{i}")).collect());
    // and what they committed is everything
    assert_eq!(stdout(&ok(b.es(&["consume", "t", "--group", "g"]))), "");
}

#[test]
fn reset_to_earliest_makes_the_next_run_read_everything_again() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "2"]));
    produce_keyed(&b, "t", 0, 20);
    let read = |args: &[&str]| -> usize {
        let mut all = vec!["consume", "t", "--group", "g"];
        all.extend_from_slice(args);
        stdout(&ok(b.es(&all))).lines().count()
    };
    assert_eq!(read(&["--from-beginning"]), 20);
    assert_eq!(read(&[]), 0);

    let out = stdout(&ok(b.es(&[
        "group",
        "reset",
        "g",
        "--topic",
        "t",
        "--to-earliest",
    ])));
    assert!(
        out.starts_with("reset group g on topic t to earliest\nTOPIC"),
        "{out}"
    );
    assert!(
        has_row(&out, &["t", "0", "0"]) && has_row(&out, &["t", "1", "0"]),
        "{out}"
    );
    assert_eq!(read(&[]), 20, "everything again");

    // --to-offset clamps into each partition; --to-latest skips everything
    let doc = &json_lines(&ok(b.es(&[
        "--json",
        "group",
        "reset",
        "g",
        "--topic",
        "t",
        "--to-offset",
        "3",
    ])))[0];
    let offsets: Vec<u64> = doc["offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .filter_map(|o| o["offset"].as_u64())
        .collect();
    assert_eq!(offsets, vec![3, 3]);
    assert_eq!(read(&[]), 14);
    ok(b.es(&["group", "reset", "g", "--topic", "t", "--to-timestamp", "0"]));
    assert_eq!(read(&[]), 20, "every record is after time 0");
    ok(b.es(&["group", "reset", "g", "--topic", "t", "--to-latest"]));
    assert_eq!(
        read(&["--from-beginning"]),
        0,
        "commits win over --from-beginning"
    );

    // not while the group has members
    let member = Running::start(&b, &["consume", "t", "--group", "g", "--follow"]);
    wait_until("the consumer to join", || {
        (members(&describe(&b, "g")).len() == 1).then_some(())
    });
    let err = fails(
        &b.es(&["group", "reset", "g", "--topic", "t", "--to-earliest"]),
        1,
    );
    assert!(
        err.starts_with("es: group \"g\" has members") && err.contains("(group_not_empty)"),
        "{err}"
    );
    let err = fails(&b.es(&["group", "delete", "g"]), 1);
    assert!(err.contains("(group_not_empty)"), "{err}");
    member.terminate();
    let (status, _, err) = member.wait();
    assert!(status.success(), "{status}: {err}");
    ok(b.es(&["group", "reset", "g", "--topic", "t", "--to-earliest"]));
}

#[test]
fn group_list_describe_delete() {
    let b = Broker::start();
    let none = ok(b.es(&["group", "list"]));
    assert_eq!(stdout(&none), "");
    assert!(
        stderr(&none).contains("no consumer groups yet"),
        "{}",
        stderr(&none)
    );
    assert_eq!(stdout(&ok(b.es(&["--json", "group", "list"]))), "");

    ok(b.es(&["topic", "create", "orders", "--partitions", "2"]));
    produce_keyed(&b, "orders", 0, 10);
    ok(b.es(&[
        "consume",
        "orders",
        "--group",
        "billing",
        "--from-beginning",
        "--max",
        "3",
    ]));
    ok(b.es(&["consume", "orders", "--group", "audit"]));

    let table = stdout(&ok(b.es(&["group", "list"])));
    assert!(
        table.starts_with("NAME     MEMBERS  GENERATION  TOPICS\n"),
        "{table}"
    );
    let listed = rows(&table);
    assert_eq!(listed.len(), 2, "{table}");
    assert_eq!(listed[0][0], "audit");
    assert_eq!(listed[1][..2], ["billing".to_string(), "0".to_string()]);
    let listed = json_lines(&ok(b.es(&["--json", "group", "list"])));
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1]["name"], "billing");
    assert_eq!(listed[1]["members"], 0);

    let text = stdout(&ok(b.es(&["group", "describe", "billing"])));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("group billing: generation "), "{text}");
    assert!(lines[0].ends_with(", 0 members, topics -"), "{text}");
    assert_eq!(lines[2], "MEMBER  SESSION TIMEOUT MS  PARTITIONS");
    assert_eq!(lines[3], "", "no members");
    assert_eq!(
        lines[4].split_whitespace().collect::<Vec<_>>(),
        [
            "TOPIC",
            "PARTITION",
            "MEMBER",
            "COMMITTED",
            "OFFSET",
            "HIGH",
            "WATERMARK",
            "LAG"
        ]
    );
    let doc = describe(&b, "billing");
    let mut committed = 0;
    for (i, p) in doc["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .enumerate()
    {
        let c = p["committed_offset"].as_u64().expect("committed");
        let hw = p["high_watermark"].as_u64().expect("hw");
        assert_eq!(p["lag"].as_u64(), Some(hw - c));
        assert!(
            has_row(
                &text,
                &[
                    "orders",
                    &i.to_string(),
                    "-",
                    &c.to_string(),
                    &hw.to_string(),
                    &(hw - c).to_string()
                ]
            ),
            "{text}"
        );
        committed += c;
    }
    assert_eq!(committed, 3);

    let out = stdout(&ok(b.es(&["group", "delete", "billing"])));
    assert_eq!(out, "deleted group billing\n");
    let want = "es: group \"billing\" does not exist (group_not_found). See the groups with: es group list\n";
    assert_eq!(fails(&b.es(&["group", "describe", "billing"]), 1), want);
    assert_eq!(fails(&b.es(&["group", "delete", "billing"]), 1), want);
    let doc = &json_lines(&ok(b.es(&["--json", "group", "delete", "audit"])))[0];
    assert_eq!(doc["deleted"], true);
    assert_eq!(stdout(&ok(b.es(&["group", "list"]))), "");
}

#[test]
fn group_flags() {
    let out = run_es(&["consume", "t", "--group", "g", "--partition", "1"], b"", &[]);
    fails(&out, 2);
    let out = run_es(&["consume", "t", "--group", "g", "--offset", "1"], b"", &[]);
    fails(&out, 2);
    let out = run_es(&["consume", "t", "--session-timeout-ms", "1000"], b"", &[]);
    fails(&out, 2);
    let out = run_es(
        &["consume", "t", "--group", "g", "--session-timeout-ms", "5"],
        b"",
        &[],
    );
    assert!(fails(&out, 2).contains("100..=300000"));
    let out = run_es(&["group", "reset", "g", "--topic", "t"], b"", &[]);
    fails(&out, 2);
    let out = run_es(
        &[
            "group",
            "reset",
            "g",
            "--topic",
            "t",
            "--to-earliest",
            "--to-latest",
        ],
        b"",
        &[],
    );
    fails(&out, 2);
    let help = stdout(&ok(run_es(&["consume", "--help"], b"", &[])));
    assert!(help.contains("at-least-once"), "{help}");
}
