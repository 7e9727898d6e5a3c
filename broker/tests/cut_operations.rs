//! Operations no client can cut in half.
//!
//! Contract: a topic create, delete or config patch whose client closes the
//! connection at any point, once the broker has read the request (right
//! after sending it, with a FIN or a reset, or the moment its first durable
//! step shows on disk), is carried out whole; one whose body never arrived
//! does nothing. Either way the broker's state is consistent: a topic is
//! listed exactly when its directory holds its `meta.json` and every
//! partition, describes with every partition, and a re-create answers 409;
//! a topic not listed has no directory left under `data/topics` (no ghost,
//! no orphan), and a re-create answers 201 and serves records. A restart
//! finds the same topics with the same configs.
//!
//! The cuts are raw TCP requests without `Connection: close`, so the
//! server keeps reading the connection and sees the close while the
//! operation runs. Nothing here waits on time: after each cut the test
//! waits until the broker has closed that connection, then runs a topic
//! create and delete of its own, which the controller runs after every
//! operation already under way (one at a time, in order).

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{create_topic, hang_guard, produce, wait_for, Broker};
use serde_json::{json, Value};

/// Where the client closes the connection.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// After the request's headers, before its body: nothing must happen.
    AfterHeaders,
    /// Right after the whole request, with a FIN.
    AfterBody,
    /// Right after the whole request, with a reset.
    Reset,
    /// With a reset, as soon as the operation's first durable step shows
    /// on disk (`meta.json` written, removed or changed).
    AtCommit,
}

use Cut::{AfterBody, AfterHeaders, AtCommit, Reset};

/// Creates: every cut, partition counts up to 256; the large one where the
/// cut lands while the partitions open. Every cut meets small and large
/// counts; more rounds add time (each partition is fsynced directories),
/// not cases.
#[rustfmt::skip]
const CREATES: [(Cut, u32); 12] = [
    (AtCommit, 256), (AfterBody, 64), (Reset, 16), (AfterHeaders, 8), (AtCommit, 64),
    (AfterBody, 1), (Reset, 64), (AfterHeaders, 1), (AtCommit, 16), (AfterBody, 8),
    (Reset, 1), (AtCommit, 1),
];
/// Deletes (a DELETE is all headers: cut after them, or reset, or when
/// `meta.json` goes).
#[rustfmt::skip]
const DELETES: [(Cut, u32); 10] = [
    (AtCommit, 256), (AfterHeaders, 16), (Reset, 64), (AtCommit, 64), (AfterHeaders, 1),
    (Reset, 4), (AtCommit, 16), (Reset, 1), (AtCommit, 1), (AtCommit, 8),
];
/// Config patches.
#[rustfmt::skip]
const PATCHES: [(Cut, u32); 9] = [
    (AtCommit, 64), (AfterBody, 16), (Reset, 4), (AfterHeaders, 1), (AtCommit, 16),
    (AfterBody, 1), (Reset, 64), (AtCommit, 1), (AfterHeaders, 16),
];

/// Sends `method path` with `body` on a fresh connection and closes it at
/// `cut` (`committed` says when the operation's first step is on disk).
fn cut_request(b: &Broker, method: &str, path: &str, body: &[u8], cut: Cut, committed: impl Fn() -> bool) {
    let mut s = TcpStream::connect(b.addr()).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("send the headers");
    if !matches!(cut, Cut::AfterHeaders) {
        s.write_all(body).expect("send the body");
    }
    match cut {
        Cut::AfterHeaders | Cut::AfterBody => {}
        Cut::Reset => reset_on_close(&s),
        Cut::AtCommit => {
            watch_disk("the operation's first step on disk", committed);
            reset_on_close(&s);
        }
    }
    drop(s);
}

/// Makes closing `s` send a reset (SO_LINGER 0).
fn reset_on_close(s: &TcpStream) {
    socket2::SockRef::from(s)
        .set_linger(Some(Duration::ZERO))
        .expect("SO_LINGER");
}

/// Waits for a file system condition, looking every millisecond (the poll
/// of `wait_for` is coarser than the window the cut aims at); gives up only
/// at the hang guard.
fn watch_disk(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < hang_guard(), "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until the broker has closed every HTTP connection but the one
/// asking, then runs a create and a delete of a topic of the test's own:
/// the controller runs them after every topic operation already under way,
/// so once they answer, the cut operation has finished (or never started).
fn settle(b: &Broker, round: usize) {
    wait_for("the broker to close the cut connection", || {
        b.metric("es_connections_open{listener=\"http\"}") == Some(1.0)
    });
    let barrier = format!("barrier-{round}");
    create_topic(b, &barrier, 1);
    let (status, body) = b.delete(&format!("/v1/topics/{barrier}"));
    assert_eq!(status, 200, "delete {barrier}: {body}");
}

fn topic_dir(b: &Broker, name: &str) -> PathBuf {
    b.data_dir().join("topics").join(name)
}

fn listed(b: &Broker) -> BTreeMap<String, u64> {
    let (status, body) = b.get("/v1/topics");
    assert_eq!(status, 200, "list: {body}");
    body["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().expect("name").to_string(),
                t["partitions"].as_u64().expect("partitions"),
            )
        })
        .collect()
}

/// Topic directories under `data/topics`.
fn topic_dirs(b: &Broker) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(b.data_dir().join("topics"))
        .expect("data/topics")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn meta_json(dir: &Path) -> Option<Value> {
    let bytes = std::fs::read(dir.join("meta.json")).ok()?;
    Some(serde_json::from_slice(&bytes).expect("meta.json is JSON"))
}

/// The state of topic `name`, checked consistent: `Some(description)` when
/// it exists (listed with `partitions`, described with every partition,
/// its `meta.json` and partition directories on disk, a re-create 409),
/// `None` when it does not (not listed, 404, no directory left).
#[track_caller]
fn consistent(b: &Broker, name: &str, partitions: u64) -> Option<Value> {
    let dir = topic_dir(b, name);
    let (status, desc) = b.get(&format!("/v1/topics/{name}"));
    match listed(b).get(name) {
        Some(&n) => {
            assert_eq!(n, partitions, "{name} listed with {n} partitions");
            assert_eq!(status, 200, "{name} is listed; describe: {desc}");
            assert_eq!(
                desc["partitions"].as_array().map(Vec::len),
                Some(partitions as usize),
                "{name}: every partition described"
            );
            let meta = meta_json(&dir).unwrap_or_else(|| panic!("{name} is listed but has no meta.json"));
            assert_eq!(
                meta["partitions"].as_u64(),
                Some(partitions),
                "{name}'s meta.json"
            );
            assert_eq!(
                meta["config"], desc["config"],
                "{name}: meta.json and the catalog agree"
            );
            for p in 0..partitions {
                assert!(dir.join(p.to_string()).is_dir(), "{name}/{p} has no directory");
            }
            let again = b.post("/v1/topics", json!({"name": name, "partitions": partitions}));
            assert_eq!(again.0, 409, "re-creating listed {name}: {}", again.1);
            Some(desc)
        }
        None => {
            assert_eq!(status, 404, "{name} is not listed; describe: {desc}");
            assert!(
                !dir.exists(),
                "{name} is not listed but {} is left: {:?}",
                dir.display(),
                std::fs::read_dir(&dir).map(|d| d.count())
            );
            None
        }
    }
}

/// A topic that does not exist can be created and serves records (no
/// partition of an earlier attempt is in the way).
#[track_caller]
fn create_serves(b: &Broker, name: &str, partitions: u32) {
    let got = b.post("/v1/topics", json!({"name": name, "partitions": partitions}));
    assert_eq!(got.0, 201, "re-creating absent {name}: {}", got.1);
    let mut ends = vec![0, partitions - 1];
    ends.dedup();
    for p in ends {
        let offsets = produce(b, name, json!({"records": [{"value": "v", "partition": p}]}));
        assert_eq!(offsets, vec![(p, 0)], "{name}/{p} starts empty");
        let (status, body) = b.get(&format!("/v1/topics/{name}/partitions/{p}/records?offset=0"));
        assert_eq!(status, 200, "fetch {name}/{p}: {body}");
        assert_eq!(body["records"][0]["value"], "v", "{name}/{p}: {body}");
    }
    consistent(b, name, partitions as u64).expect("created");
}

#[track_caller]
fn delete_whole(b: &Broker, name: &str, partitions: u64) {
    let (status, body) = b.delete(&format!("/v1/topics/{name}"));
    assert_eq!(status, 200, "delete {name}: {body}");
    assert!(consistent(b, name, partitions).is_none(), "{name} deleted");
}

#[test]
fn cut_topic_operations_complete_and_the_state_stays_consistent() {
    common::raise_open_files_limit(16_384);
    let mut b = Broker::start_with(&["--shards", "2"]);
    let mut round = 0;
    // What the restart must find: name -> (partitions, config).
    let mut kept: BTreeMap<String, (u64, Value)> = BTreeMap::new();

    // Creates.
    for (i, &(cut, partitions)) in CREATES.iter().enumerate() {
        let name = format!("create-{i}");
        let body = json!({"name": name, "partitions": partitions}).to_string();
        let meta = topic_dir(&b, &name).join("meta.json");
        cut_request(&b, "POST", "/v1/topics", body.as_bytes(), cut, || meta.exists());
        round += 1;
        settle(&b, round);
        match consistent(&b, &name, partitions as u64) {
            Some(desc) => {
                assert!(
                    !matches!(cut, Cut::AfterHeaders),
                    "{name}: created without its body"
                );
                if partitions > 64 {
                    delete_whole(&b, &name, partitions as u64);
                } else {
                    kept.insert(name, (partitions as u64, desc["config"].clone()));
                }
            }
            // Without its body, or the close reached the broker first.
            None => {
                assert!(
                    !matches!(cut, Cut::AtCommit),
                    "{name}: a create under way did not finish"
                );
                create_serves(&b, &name, partitions);
                delete_whole(&b, &name, partitions as u64);
            }
        }
    }

    // Deletes.
    for (i, &(cut, partitions)) in DELETES.iter().enumerate() {
        let name = format!("delete-{i}");
        create_topic(&b, &name, partitions);
        let meta = topic_dir(&b, &name).join("meta.json");
        cut_request(&b, "DELETE", &format!("/v1/topics/{name}"), b"", cut, || {
            !meta.exists()
        });
        round += 1;
        settle(&b, round);
        match consistent(&b, &name, partitions as u64) {
            // The close reached the broker before it ran the request.
            Some(_) => assert!(
                !matches!(cut, Cut::AtCommit),
                "{name}: a delete under way did not finish"
            ),
            None => create_serves(&b, &name, partitions),
        }
        if partitions > 64 {
            delete_whole(&b, &name, partitions as u64);
        } else {
            let desc = consistent(&b, &name, partitions as u64).expect("re-created");
            kept.insert(name, (partitions as u64, desc["config"].clone()));
        }
    }

    // Config patches.
    for (i, &(cut, partitions)) in PATCHES.iter().enumerate() {
        let name = format!("patch-{i}");
        create_topic(&b, &name, partitions);
        let retention_ms = 3_600_000 + i as u64;
        let body = json!({"retention_ms": retention_ms}).to_string();
        let dir = topic_dir(&b, &name);
        let changed = || meta_json(&dir).is_some_and(|m| m["config"]["retention_ms"] == retention_ms);
        cut_request(
            &b,
            "PATCH",
            &format!("/v1/topics/{name}/config"),
            body.as_bytes(),
            cut,
            changed,
        );
        round += 1;
        settle(&b, round);
        let desc = consistent(&b, &name, partitions as u64).expect("a patch never deletes");
        let got = &desc["config"]["retention_ms"];
        match cut {
            AfterHeaders => assert_ne!(*got, json!(retention_ms), "{name}: patched without its body"),
            AtCommit => assert_eq!(
                *got,
                json!(retention_ms),
                "{name}: a patch under way did not finish"
            ),
            // Either, whichever reached the broker first: the request or the close.
            AfterBody | Reset => {}
        }
        kept.insert(name, (partitions as u64, desc["config"].clone()));
    }

    // Nothing else is on disk, and a restart finds the same topics.
    let names: Vec<String> = kept.keys().cloned().collect();
    assert_eq!(
        topic_dirs(&b),
        names,
        "data/topics holds exactly the topics listed"
    );
    let listed_before: BTreeMap<String, u64> = kept.iter().map(|(n, (p, _))| (n.clone(), *p)).collect();
    assert_eq!(listed(&b), listed_before);
    assert!(b.sigterm_and_wait().success(), "{}", b.stderr_text());
    b.restart();
    assert_eq!(listed(&b), listed_before, "the restart finds the same topics");
    for (name, (partitions, config)) in &kept {
        let desc = consistent(&b, name, *partitions).expect("kept");
        assert_eq!(&desc["config"], config, "{name}'s config after the restart");
    }
    assert_eq!(topic_dirs(&b), names, "no directory appeared at the restart");
}
