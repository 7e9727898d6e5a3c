//! What a new user meets first: `--broker` forms, hints that fit the
//! command, plurals, an empty group, errors as JSON with `--json`, the
//! hint of `es produce` on a terminal, `es consume --from-time` and
//! `--last`, and shell completions. The real `es` against the real
//! `es-broker`; the harness is in common/mod.rs.

mod common;

use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use es_protocol::client::{Client, Options};
use es_protocol::requests::produce::ProduceRecord;
use es_protocol::Kind;
use serde_json::{json, Value};

use common::*;

/// The one JSON error line `es --json` wrote on stderr.
#[track_caller]
fn json_error(o: &std::process::Output, exit: i32) -> Value {
    let err = fails(o, exit);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let doc: Value = serde_json::from_str(err.trim_end()).unwrap_or_else(|e| panic!("not JSON ({e}): {err}"));
    assert!(doc["error"]["code"].is_string(), "{doc}");
    assert!(doc["error"]["message"].is_string(), "{doc}");
    assert_eq!(doc.as_object().map(|o| o.len()), Some(1), "{doc}");
    doc
}

#[test]
fn broker_address_forms_say_what_is_wrong() {
    let cases = [
        ("localhost", "missing port (e.g. localhost:9090)"),
        ("localhost:", "missing port (e.g. localhost:9090)"),
        (":9090", "missing host (e.g. 127.0.0.1:9090)"),
        ("[::1]", "missing port (e.g. [::1]:9090)"),
        (
            "::1",
            "an IPv6 address goes in brackets, the port after them (e.g. [::1]:9090)",
        ),
        (
            "localhost:90x",
            "the port \"90x\" is not a number from 1 to 65535 (e.g. localhost:9090)",
        ),
        (
            "localhost:70000",
            "the port \"70000\" is not a number from 1 to 65535 (e.g. localhost:9090)",
        ),
    ];
    for (addr, reason) in cases {
        let out = run_es(&["--broker", addr, "topic", "list"], b"", &[]);
        assert_eq!(fails(&out, 1), format!("es: --broker {addr:?}: {reason}\n"));
        let out = run_es(&["consume", "t"], b"", &[("ES_BROKER", addr)]);
        assert_eq!(fails(&out, 1), format!("es: ES_BROKER={addr:?}: {reason}\n"));
    }
    let out = run_es(&["--broker", "http://127.0.0.1:8080", "topic", "list"], b"", &[]);
    let err = fails(&out, 1);
    assert!(
        err.contains("a URL, but --broker takes the HOST:PORT") && err.contains("(e.g. 127.0.0.1:9090)"),
        "{err}"
    );
    let doc = json_error(
        &run_es(&["--json", "--broker", "localhost", "topic", "list"], b"", &[]),
        1,
    );
    assert_eq!(
        doc,
        json!({"error": {"code": "invalid_argument",
                         "message": "--broker \"localhost\": missing port (e.g. localhost:9090)"}})
    );
}

#[test]
fn hints_fit_the_command() {
    let b = Broker::start();
    let err = fails(&b.es(&["topic", "delete", "nope"]), 1);
    assert_eq!(
        err,
        "es: topic \"nope\" does not exist (topic_not_found). See the topics with: es topic list\n"
    );
    assert!(!err.contains("create"), "{err}");
    let err = fails(
        &b.es(&["group", "reset", "g", "--topic", "nope", "--to-earliest"]),
        1,
    );
    assert_eq!(
        err,
        "es: topic \"nope\" does not exist (topic_not_found). See the topics with: es topic list\n"
    );
    // Where creating it is what to do, the hint still says so.
    let err = fails(&b.es_stdin(&["produce", "nope"], b"x\n"), 1);
    assert!(
        err.contains("Create it with: es topic create nope --partitions N"),
        "{err}"
    );
}

#[test]
fn plurals_in_human_output() {
    let b = Broker::start();
    let out = stdout(&ok(b.es(&["topic", "create", "one", "--partitions", "1"])));
    assert!(
        out.starts_with("created topic one: 1 partition, replication factor 1\n"),
        "{out}"
    );
    let out = stdout(&ok(b.es(&["topic", "create", "two", "--partitions", "2"])));
    assert!(
        out.starts_with("created topic two: 2 partitions, replication factor 1\n"),
        "{out}"
    );
    let out = stdout(&ok(b.es(&["topic", "describe", "one"])));
    assert!(
        out.starts_with("topic one: 1 partition, replication factor 1\n"),
        "{out}"
    );

    let err = fails(&b.es(&["consume", "one", "--partition", "1"]), 1);
    assert!(err.contains("it has 1 partition (0)."), "{err}");
    let err = fails(&b.es(&["consume", "two", "--partition", "2"]), 1);
    assert!(err.contains("it has 2 partitions (0 to 1)."), "{err}");

    let produce = |input: &[u8]| b.es_stdin(&["produce", "one", "--key-separator", ":"], input);
    let err = fails(&produce(b"k:v\nno separator\n"), 1);
    assert!(err.starts_with("produced 1 record to one\n"), "{err}");
    assert!(err.contains(". The 1 record before it was produced.\n"), "{err}");
    let err = fails(&produce(b"no separator\n"), 1);
    assert!(err.contains(". Nothing before it was produced.\n"), "{err}");
    let err = fails(&produce(b"a:1\nb:2\nno separator\n"), 1);
    assert!(
        err.contains(". The 2 records before it were produced.\n"),
        "{err}"
    );
    assert!(!err.contains("(s)"), "{err}");
}

#[test]
fn a_group_left_without_commits_is_gone() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "2"]));
    // A member joins and leaves without committing anything: the group is
    // forgotten with its last member (docs/groups.md), and describe says
    // so, with where to look.
    let client = Client::connect(&b.addr, Options::default()).expect("connect");
    let joined = client
        .admin(Kind::JoinGroup, json!({"group": "idle", "topics": ["t"]}))
        .expect("join");
    let member = joined["member_id"].as_str().expect("member_id").to_string();
    client
        .admin(Kind::LeaveGroup, json!({"group": "idle", "member_id": member}))
        .expect("leave");
    let out = b.es(&["group", "describe", "idle"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("group \"idle\" does not exist (group_not_found)"),
        "{err}"
    );
    assert!(err.contains("es group list"), "{err}");
    // Once it has commits, it is not empty: the tables, with the commits.
    ok(b.es_stdin(&["produce", "t", "--partition", "0"], b"a\nb\n"));
    ok(b.es(&["consume", "t", "--group", "idle", "--from-beginning"]));
    let out = stdout(&ok(b.es(&["group", "describe", "idle"])));
    assert!(!out.contains("is empty"), "{out}");
    assert!(has_row(&out, &["t", "0", "-", "2", "2", "0"]), "{out}");
}

#[test]
fn with_json_errors_are_json() {
    let b = Broker::start();
    let doc = json_error(&b.es(&["--json", "topic", "describe", "nope"]), 1);
    assert_eq!(doc["error"]["code"], "topic_not_found");
    assert_eq!(
        doc["error"]["message"],
        "topic \"nope\" does not exist (topic_not_found). Create it with: es topic create nope --partitions N"
    );
    // --json after the command, and an error from the broker's own message.
    let doc = json_error(
        &b.es(&["topic", "create", "bad/name", "--partitions", "1", "--json"]),
        1,
    );
    assert_eq!(doc["error"]["code"], "invalid_topic_name");
    ok(b.es(&["topic", "create", "t", "--partitions", "1"]));
    let doc = json_error(&b.es(&["--json", "consume", "t", "--offset", "5"]), 1);
    assert_eq!(doc["error"]["code"], "offset_out_of_range");
    let err = fails(&b.es(&["consume", "t", "--offset", "5"]), 1);
    assert!(
        err.contains("Use --from-beginning, --last N, --from-time TIME, or an --offset between"),
        "{err}"
    );
    // An error of es's own: a line without the separator.
    let doc = json_error(
        &b.es_stdin(&["--json", "produce", "t", "--key-separator", ":"], b"nope\n"),
        1,
    );
    assert_eq!(doc["error"]["code"], "invalid_input");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("line 1 has no key separator")),
        "{doc}"
    );

    // No broker there.
    let addr = format!("127.0.0.1:{}", free_port());
    let doc = json_error(
        &run_es(&["--json", "--broker", &addr, "topic", "list"], b"", &[]),
        1,
    );
    assert_eq!(doc["error"]["code"], "broker_unreachable");
    // clap's usage errors: exit code 2 as before, the first paragraph as the message.
    let doc = json_error(&run_es(&["--json", "topic", "create", "x"], b"", &[]), 2);
    assert_eq!(
        doc,
        json!({"error": {"code": "usage",
            "message": "the following required arguments were not provided: --partitions <PARTITIONS>"}})
    );
    let doc = json_error(
        &run_es(&["topic", "list", "--no-such-flag", "--json"], b"", &[]),
        2,
    );
    assert_eq!(doc["error"]["code"], "usage");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--no-such-flag")),
        "{doc}"
    );
    // Without --json, still text; help is still help.
    let err = fails(&b.es(&["topic", "describe", "nope"]), 1);
    assert!(err.starts_with("es: topic \"nope\" does not exist"), "{err}");
    assert!(fails(&run_es(&["topic", "create", "x"], b"", &[]), 2).starts_with("error: "));
    let help = stdout(&ok(run_es(&["--json", "--help"], b"", &[])));
    assert!(help.contains("Usage: es"), "{help}");
}

/// A pseudo-terminal: (master, slave).
fn pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two new descriptors into the two ints; the
    // other arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned by nothing else.
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

#[test]
fn produce_from_a_terminal_says_how_to_end() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "1"]));
    let hint = "es: reading records for t from the terminal, one per line; Ctrl-D ends the input.";

    let (mut master, slave) = pty();
    let mut cmd = Command::new(es_path());
    cmd.args(["--broker", &b.addr, "produce", "t"])
        .env_remove("ES_BROKER")
        .env_remove("ES_API_KEY")
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("start es");
    drop(cmd); // closes our copy of the terminal's slave end
               // A line, then Ctrl-D at the start of the next: end of input, as typed.
    master.write_all(b"typed\n\x04").expect("type");
    let out = child.wait_with_output().expect("es output");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.lines().next(), Some(hint), "{err}");
    assert!(err.contains("ok: partition 0, offset 0"), "{err}");
    drop(master);
    assert_eq!(
        stdout(&ok(b.es(&["consume", "t", "--from-beginning"]))),
        "typed\n"
    );

    // Not from a pipe.
    let out = ok(b.es_stdin(&["produce", "t"], b"piped\n"));
    assert!(!stderr(&out).contains("Ctrl-D"), "{}", stderr(&out));
}

/// 2024-05-01T12:00:00Z in milliseconds.
const NOON: i64 = 1_714_564_800_000;

/// Produces `n` records to `partition` in batches of `per`, record `i`
/// with value `{prefix}{i}` and timestamp `NOON + i * step_ms`.
fn produce_timed(client: &Client, topic: &str, partition: u32, n: i64, per: i64, step_ms: i64, prefix: &str) {
    let mut i = 0;
    while i < n {
        let batch: Vec<ProduceRecord> = (i..(i + per).min(n))
            .map(|j| ProduceRecord {
                partition: Some(partition),
                timestamp_ms: Some(NOON + j * step_ms),
                key: None,
                value: format!("{prefix}{j}").into_bytes(),
            })
            .collect();
        client.produce(topic, batch).expect("produce");
        i += per;
    }
}

/// The values `es consume ARGS` printed, one per line.
fn values(b: &Broker, args: &[&str]) -> Vec<String> {
    stdout(&ok(b.es(args))).lines().map(String::from).collect()
}

fn range(prefix: &str, from: i64, to: i64) -> Vec<String> {
    (from..to).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn consume_from_a_time_and_the_last_records() {
    let b = Broker::start();
    ok(b.es(&["topic", "create", "t", "--partitions", "2"]));
    let client = Client::connect(&b.addr, Options::default()).expect("connect");
    // Partition 0: 60 records a second apart, in 12 batches; partition 1:
    // 30 records two seconds apart, in batches of 7.
    produce_timed(&client, "t", 0, 60, 5, 1000, "a");
    produce_timed(&client, "t", 1, 30, 7, 2000, "b");

    let p0 = |time: &str| values(&b, &["consume", "t", "--partition", "0", "--from-time", time]);
    assert_eq!(p0("2024-05-01T12:00:17Z"), range("a", 17, 60));
    assert_eq!(p0("2024-05-01T14:00:17+02:00"), range("a", 17, 60));
    assert_eq!(p0(&(NOON + 17_000).to_string()), range("a", 17, 60));
    // Between two records: the later one. At a batch's first record.
    assert_eq!(p0("2024-05-01T12:00:17.500Z"), range("a", 18, 60));
    assert_eq!(p0("2024-05-01T12:00:35Z"), range("a", 35, 60));
    assert_eq!(p0("2024-05-01T12:00:59Z"), range("a", 59, 60));
    // Before everything: all of it; after everything: nothing, and why.
    assert_eq!(p0("2024-05-01"), range("a", 0, 60));
    let out = ok(b.es(&["consume", "t", "--from-time", "2024-05-02T00:00:00Z"]));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("no records in t at or after 2024-05-02T00:00:00Z"),
        "{}",
        stderr(&out)
    );

    // Every partition from its own start.
    let records = json_lines(&ok(b.es(&[
        "--json",
        "consume",
        "t",
        "--from-time",
        "2024-05-01T12:00:41Z",
    ])));
    let first = |p: u64| {
        records
            .iter()
            .find(|r| r["partition"] == p)
            .map(|r| (r["offset"].as_u64(), r["timestamp"].as_i64()))
    };
    assert_eq!(first(0), Some((Some(41), Some(NOON + 41_000))));
    assert_eq!(first(1), Some((Some(21), Some(NOON + 42_000))));
    assert_eq!(records.len(), 19 + 9);

    // --last N of each partition; more than there are: from the log start.
    assert_eq!(
        values(&b, &["consume", "t", "--partition", "0", "--last", "3"]),
        range("a", 57, 60)
    );
    let both = values(&b, &["consume", "t", "--last", "2"]);
    assert_eq!(both, ["a58", "a59", "b28", "b29"]);
    assert_eq!(
        values(&b, &["consume", "t", "--partition", "1", "--last", "1000"]),
        range("b", 0, 30)
    );
    assert_eq!(values(&b, &["consume", "t", "--last", "0"]), Vec::<String>::new());

    // Start positions exclude each other, and --group has its own.
    for args in [
        &["--from-time", "0", "--offset", "1"][..],
        &["--from-time", "0", "--from-beginning"],
        &["--from-time", "0", "--last", "1"],
        &["--last", "1", "--offset", "1"],
        &["--last", "1", "--from-beginning"],
        &["--group", "g", "--last", "1"],
        &["--group", "g", "--from-time", "0"],
    ] {
        let mut all = vec!["consume", "t"];
        all.extend_from_slice(args);
        let err = fails(&b.es(&all), 2);
        assert!(err.contains("cannot be used with"), "{args:?}: {err}");
    }
    let err = fails(&b.es(&["consume", "t", "--from-time", "yesterday"]), 2);
    assert!(err.contains("expected an RFC 3339 time"), "{err}");
}

#[test]
fn shell_completions() {
    for shell in ["bash", "zsh", "fish"] {
        let out = ok(run_es(&["completions", shell], b"", &[]));
        let script = stdout(&out);
        assert!(!script.is_empty(), "{shell}");
        for word in ["topic", "produce", "consume", "group", "completions", "from-time"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    // No broker is needed, nor a valid --broker.
    ok(run_es(
        &["completions", "bash"],
        b"",
        &[("ES_BROKER", "nonsense")],
    ));
    fails(&run_es(&["completions", "tcsh"], b"", &[]), 2);
}
