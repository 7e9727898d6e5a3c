//! `kill -9` of a `restore --merge` at many points: every topic of the
//! archive is in the target either complete or not at all, the target's
//! own topic and groups are intact, and the same command run again
//! finishes the merge, giving exactly the dir an uninterrupted merge
//! gives (the dead run's staging dir removed). The merge reads the
//! archive from a pipe fed up to a chosen byte before the kill; the last
//! runs are fed whole and killed after a growing delay, in the commit.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use serde_json::json;

/// Three topics of three segments each, and a group's commits on them.
fn source(data: &Path) {
    for t in ["a", "b", "c"] {
        let dir = partition_dir(data, t, 0, 1);
        for s in 0..3u64 {
            let mut log = Vec::new();
            batches(&mut log, s * 8, 4, 2);
            std::fs::write(dir.join(seg_name(s * 8)), &log).unwrap();
        }
    }
    std::fs::create_dir_all(data.join("groups")).unwrap();
    let g = json!({"name": "g", "offsets": [{"topic": "a", "partition": 0, "offset": 5},
                  {"topic": "b", "partition": 0, "offset": 6}, {"topic": "c", "partition": 0, "offset": 7}]});
    std::fs::write(data.join("groups/g.json"), g.to_string()).unwrap();
}

/// A target with its own topic x and a commit of g on it.
fn target(data: &Path) {
    let dir = partition_dir(data, "x", 0, 1);
    let mut log = Vec::new();
    batches(&mut log, 0, 2, 2);
    std::fs::write(dir.join(seg_name(0)), &log).unwrap();
    std::fs::create_dir_all(data.join("groups")).unwrap();
    let g = json!({"name": "g", "offsets": [{"topic": "x", "partition": 0, "offset": 1}]});
    std::fs::write(data.join("groups/g.json"), g.to_string()).unwrap();
}

fn merge_cmd(target: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_es-tools"));
    c.args([
        "restore",
        "-i",
        "-",
        "--data-dir",
        target.to_str().unwrap(),
        "--merge",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    c
}

#[test]
fn kill_9_during_a_merge_leaves_each_topic_absent_or_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    source(&src);
    let archive = tmp.path().join("a.tar");
    dump_to(&src, &archive, &[], 0);
    let bytes = std::fs::read(&archive).unwrap();
    let reference = tmp.path().join("reference");
    target(&reference);
    let own = tree(&reference);
    tools_ok(&[
        "restore",
        "-i",
        archive.to_str().unwrap(),
        "--data-dir",
        reference.to_str().unwrap(),
        "--merge",
    ]);
    let complete = tree(&reference);

    let points: Vec<(Option<usize>, u64)> = (1..=12)
        .map(|i| (Some(bytes.len() * i / 13), 0))
        .chain((0..8).map(|i| (None, i * 3)))
        .collect();
    let mut interrupted = 0;
    for (run, (point, delay_ms)) in points.into_iter().enumerate() {
        let dir = tmp.path().join(format!("t{run}"));
        target(&dir);
        let mut child = merge_cmd(&dir).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(&bytes[..point.unwrap_or(bytes.len())]);
        if point.is_none() {
            drop(stdin);
            std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        }
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        interrupted += usize::from(!status.success());
        let now = tree(&dir);
        for (f, b) in &own {
            if f != "groups/g.json" {
                assert_eq!(now.get(f), Some(b), "run {run}: the target's own {f}");
            }
        }
        for t in ["a", "b", "c"] {
            let prefix = format!("topics/{t}/");
            let files: BTreeMap<_, _> = now.iter().filter(|(f, _)| f.starts_with(&prefix)).collect();
            let want: BTreeMap<_, _> = complete.iter().filter(|(f, _)| f.starts_with(&prefix)).collect();
            assert!(
                files.is_empty() || files == want,
                "run {run}: topic {t} half there: {:?}",
                files.keys()
            );
        }
        let o = tools(&[
            "restore",
            "-i",
            archive.to_str().unwrap(),
            "--data-dir",
            dir.to_str().unwrap(),
            "--merge",
        ]);
        assert_eq!(code(&o), 0, "run {run}: {}{}", stdout(&o), stderr(&o));
        assert!(
            tree(&dir) == complete,
            "run {run}: the rerun gives what one merge gives"
        );
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".es-tools-merge-"))
            .collect();
        assert!(left.is_empty(), "run {run}: staging dirs left: {left:?}");
    }
    assert!(interrupted > 0, "some runs were cut short");
}
