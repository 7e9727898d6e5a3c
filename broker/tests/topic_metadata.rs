//! A topic's `meta.json` damaged or lost, against the real broker.
//!
//! Contract: a damaged `meta.json` (not JSON, cut short, naming another
//! topic) stops the start with exit status 1 and an error that names the
//! file, changing nothing under the topic's directory; once the file is
//! restored the records read back. A topic directory that holds records but
//! no `meta.json` is never served and never wiped: a create of its name is
//! refused (409 `topic_data_exists`) and leaves every file as it was. What
//! the broker itself left (a delete cut short after its first step) is
//! cleared.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use common::{assert_error, create_topic, free_port, poll_until, produce_values, values_of, Broker, Client};
use serde_json::json;

/// Every file under `dir` with its bytes.
fn files_under(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("list {d:?}: {e}")) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
                out.insert(path, bytes);
            }
        }
    }
    out
}

/// Runs `es-broker` on `data_dir`, which must refuse to start: returns its
/// exit status and what it wrote. Fails at once if it becomes ready.
fn start_refused(data_dir: &Path) -> (ExitStatus, String) {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let log_path = out_dir.path().join("refused.log");
    let log = std::fs::File::create(&log_path).expect("create the log");
    let http = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--http-addr", &http])
        .args(["--binary-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--shards", "2"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone the log"))
        .stderr(log)
        .spawn()
        .expect("spawn es-broker");
    let client = Client::new(http.parse().expect("address"));
    let exited = poll_until(
        "es-broker to refuse to start",
        || None,
        || {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return Some(Ok(status));
            }
            matches!(client.try_get("/ready"), Ok((200, _))).then_some(Err(()))
        },
    );
    let status = exited.unwrap_or_else(|()| {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "es-broker started and became ready; its log:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        )
    });
    let text = std::fs::read_to_string(&log_path).expect("read the log");
    (status, text)
}

/// A topic with records on both partitions, the broker stopped cleanly.
fn topic_with_records(name: &str) -> (Broker, Vec<Vec<String>>) {
    let mut b = Broker::start(2);
    create_topic(&b, name, 2);
    let mut written = Vec::new();
    for p in 0..2 {
        let values: Vec<String> = (0..5).map(|i| format!("{name}-{p}-{i}")).collect();
        produce_values(&b, name, p, &values);
        written.push(values);
    }
    assert!(b.sigterm_and_wait().success());
    (b, written)
}

#[test]
fn a_damaged_meta_json_stops_the_start_naming_the_file_and_changes_nothing() {
    let (mut b, written) = topic_with_records("orders");
    let topic_dir = b.data_dir().join("topics").join("orders");
    let meta = topic_dir.join("meta.json");
    let good = std::fs::read(&meta).expect("meta.json");
    let damages: Vec<(&str, Vec<u8>)> = vec![
        ("garbled", b"{\"name\": \"orders\", \x00\xff".to_vec()),
        ("cut short", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        (
            "naming another topic",
            String::from_utf8(good.clone())
                .expect("utf8")
                .replace("\"orders\"", "\"other\"")
                .into_bytes(),
        ),
    ];
    for (what, bytes) in damages {
        std::fs::write(&meta, &bytes).expect("damage meta.json");
        let before = files_under(&topic_dir);
        let (status, log) = start_refused(&b.data_dir());
        assert_eq!(status.code(), Some(1), "{what} meta.json: exit 1; log:\n{log}");
        assert!(
            log.contains(&meta.display().to_string()),
            "{what} meta.json: the error names {}; log:\n{log}",
            meta.display()
        );
        assert!(
            log.contains("restore"),
            "{what}: the error says what to do; log:\n{log}"
        );
        assert_eq!(files_under(&topic_dir), before, "{what}: nothing changed");
    }
    // Restored, the topic is served with every record.
    std::fs::write(&meta, &good).expect("restore meta.json");
    b.restart();
    for (p, values) in written.iter().enumerate() {
        assert_eq!(&values_of(&b, "orders", p as u32), values);
    }
}

#[test]
fn a_create_over_records_without_meta_json_is_refused_and_wipes_nothing() {
    let (mut b, written) = topic_with_records("lost");
    let topic_dir = b.data_dir().join("topics").join("lost");
    std::fs::remove_file(topic_dir.join("meta.json")).expect("lose meta.json");
    let before = files_under(&topic_dir);
    assert!(before.len() >= 2, "segments on disk: {before:?}");
    b.restart();
    assert_error(&b.get("/v1/topics/lost"), 404, "topic_not_found");
    for partitions in [2, 1, 3] {
        let got = b.post("/v1/topics", json!({"name": "lost", "partitions": partitions}));
        let message = assert_error(&got, 409, "topic_data_exists");
        assert!(
            message.contains(&topic_dir.display().to_string()),
            "names the directory: {message}"
        );
        assert_eq!(files_under(&topic_dir), before, "the create changed nothing");
    }
    assert_error(&b.get("/v1/topics/lost"), 404, "topic_not_found");
    // Other names are unaffected.
    create_topic(&b, "fresh", 1);

    // Kept across a restart, and served again once meta.json is back.
    assert!(b.sigterm_and_wait().success());
    assert_eq!(files_under(&topic_dir), before);
    let fresh_meta =
        std::fs::read_to_string(b.data_dir().join("topics/fresh/meta.json")).expect("fresh meta.json");
    let restored = fresh_meta
        .replace("\"fresh\"", "\"lost\"")
        .replace("\"partitions\": 1", "\"partitions\": 2");
    std::fs::write(topic_dir.join("meta.json"), restored).expect("restore meta.json");
    b.restart();
    for (p, values) in written.iter().enumerate() {
        assert_eq!(&values_of(&b, "lost", p as u32), values);
    }
}

/// A delete cut short after `meta.json` became `meta.json.deleted` is the
/// broker's own: the next start finishes it and the name is free, empty.
#[test]
fn a_delete_cut_short_is_finished_at_the_next_start() {
    let (mut b, _) = topic_with_records("gone");
    let topic_dir = b.data_dir().join("topics").join("gone");
    std::fs::rename(topic_dir.join("meta.json"), topic_dir.join("meta.json.deleted"))
        .expect("a delete's first step");
    b.restart();
    assert!(!topic_dir.exists(), "the delete was finished");
    assert_error(&b.get("/v1/topics/gone"), 404, "topic_not_found");
    create_topic(&b, "gone", 2);
    for p in 0..2 {
        assert!(values_of(&b, "gone", p).is_empty());
    }
    // And a live delete followed by a create of the name still works.
    let (status, body) = b.delete("/v1/topics/gone");
    assert_eq!(status, 200, "{body}");
    create_topic(&b, "gone", 1);
}
