//! `kill -9` of a restore at several points leaves the target absent or
//! complete, never half-restored, and a rerun succeeds (removing the dead
//! run's staging dir). The restore reads the archive from a pipe, fed up
//! to a chosen byte before the kill, so each run stops at a known place in
//! the stream; the last runs are fed whole and killed wherever they are.
//! Also: restore and verify on arbitrary and mutated bytes never panic.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use proptest::prelude::*;

fn restore_cmd(target: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_es-tools"));
    c.args(["restore", "-i", "-", "--data-dir", target.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// Absent, or exactly what a full restore gives.
fn absent_or_complete(target: &Path, complete: &Path) {
    if !target.exists() {
        return;
    }
    let o = tools(&["check", "--data-dir", target.to_str().unwrap(), "--json"]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    for f in [
        "topics/t/0/00000000000000000016.log",
        "topics/t/0/00000000000000000016.index",
        "groups/g.json",
    ] {
        assert_eq!(
            std::fs::read(target.join(f)).unwrap(),
            std::fs::read(complete.join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn kill_9_during_restore_leaves_nothing_half_done() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    small_dir(&data);
    let archive = tmp.path().join("a.tar");
    dump_to(&data, &archive, &[], 0);
    let bytes = std::fs::read(&archive).unwrap();
    let complete = tmp.path().join("complete");
    let o = tools(&[
        "restore",
        "-i",
        archive.to_str().unwrap(),
        "--data-dir",
        complete.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0);

    let points: Vec<Option<usize>> = (1..=16)
        .map(|i| Some(bytes.len() * i / 17))
        .chain([None; 4])
        .collect();
    for (run, point) in points.into_iter().enumerate() {
        let target = tmp.path().join(format!("new{run}"));
        let mut child = restore_cmd(&target).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let fed = point.unwrap_or(bytes.len());
        let _ = stdin.write_all(&bytes[..fed]);
        if point.is_none() {
            drop(stdin);
            std::thread::yield_now();
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        absent_or_complete(&target, &complete);
        let o = tools(&[
            "restore",
            "-i",
            archive.to_str().unwrap(),
            "--data-dir",
            target.to_str().unwrap(),
        ]);
        if target.exists() && code(&o) == 2 {
            assert!(stderr(&o).contains("not empty"), "run {run}: {}", stderr(&o));
        } else {
            assert_eq!(code(&o), 0, "run {run}: {}{}", stdout(&o), stderr(&o));
        }
        absent_or_complete(&target, &complete);
        assert!(target.exists());
        let left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".restoring-"))
            .collect();
        assert!(left.is_empty(), "run {run}: staging dirs left: {left:?}");
    }
}

#[test]
fn a_cold_dir_left_between_the_two_renames_is_cleared_by_the_next_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    small_dir(&data);
    let archive = tmp.path().join("a.tar");
    dump_to(&data, &archive, &[], 0);
    let (new, cold) = (tmp.path().join("new"), tmp.path().join("cold"));
    // What a restore killed after renaming its cold dir and before its data dir leaves.
    std::fs::create_dir_all(cold.join("t/0")).unwrap();
    std::fs::write(cold.join(".es-tools-restoring"), b"").unwrap();
    let args = |_: ()| {
        vec![
            "restore".to_string(),
            "-i".into(),
            archive.display().to_string(),
            "--data-dir".into(),
            new.display().to_string(),
            "--cold-dir".into(),
            cold.display().to_string(),
        ]
    };
    let a = args(());
    let o = tools(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(new.join("topics/t/0").is_dir());
    assert!(!cold.join(".es-tools-restoring").exists() && !cold.join("t").exists());
    // Without the marker, a cold dir that is not empty is refused.
    std::fs::remove_dir_all(&new).unwrap();
    std::fs::write(cold.join("x"), b"").unwrap();
    let o = tools(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("is not empty"), "{}", stderr(&o));
    assert!(!new.exists());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn verify_and_restore_never_panic_on_mutated_archives(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
        garbage in proptest::collection::vec(any::<u8>(), 0..2048),
        which in 0u8..3,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        small_dir(&data);
        let archive = tmp.path().join("a.tar");
        dump_to(&data, &archive, &[], 0);
        let mut bytes = std::fs::read(&archive).unwrap();
        match which {
            0 => for (i, b) in &flips { let at = i.index(bytes.len()); bytes[at] ^= b | 1; },
            1 => { let n = cut.index(bytes.len()); bytes.truncate(n); }
            _ => bytes = garbage.clone(),
        }
        let bad = tmp.path().join("bad.tar");
        std::fs::write(&bad, &bytes).unwrap();
        for deep in [false, true] {
            let mut args = vec!["verify", "-i", bad.to_str().unwrap()];
            if deep { args.push("--deep"); }
            let c = code(&tools(&args));
            prop_assert!(c == 0 || c == 1, "verify exit {c}");
        }
        let target = tmp.path().join("new");
        let o = tools(&["restore", "-i", bad.to_str().unwrap(), "--data-dir", target.to_str().unwrap()]);
        let c = code(&o);
        prop_assert!(c == 0 || c == 1 || c == 2, "restore exit {c}: {}", stderr(&o));
        prop_assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
        prop_assert_eq!(target.exists(), c == 0);
    }
}
