//! `es-chaos run --nodes 3` against a broker without cluster mode must
//! stop at once with a message that says so, not run a fake cluster; the
//! node counts and nemeses that need a cluster are refused up front.
//!
//! The broker here is a stand-in script that answers the cluster flags as
//! clap does when it does not know them (the real es-broker did, before
//! cluster mode).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn chaos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_es-chaos"))
        .args(args)
        .output()
        .expect("es-chaos runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A broker that refuses `--raft-addr` the way clap does, and otherwise
/// would run (it never gets that far in these tests).
fn old_broker(dir: &Path) -> PathBuf {
    let path = dir.join("es-broker");
    std::fs::write(
        &path,
        "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = --raft-addr ]; then\n    echo \"error: unexpected argument '--raft-addr' found\" >&2\n    exit 2\n  fi\ndone\nsleep 600\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_broker_without_cluster_mode_stops_a_cluster_run_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let broker = old_broker(dir.path());
    let out_dir = dir.path().join("run");
    let out = chaos(&[
        "run",
        "--broker",
        broker.to_str().unwrap(),
        "--nodes",
        "3",
        "--time",
        "5s",
        "--nemesis",
        "partition,leader-kill",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("refuses the cluster flags"), "{said}");
    assert!(said.contains("unexpected argument '--raft-addr'"), "{said}");
    // Nothing was checked: no verdict was written.
    assert!(!out_dir.join("results.json").exists());
}

#[test]
fn node_counts_and_nemeses_that_need_a_cluster_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = old_broker(dir.path());
    let b = broker.to_str().unwrap();
    let two = chaos(&["run", "--broker", b, "--nodes", "2", "--time", "5s"]);
    assert_eq!(two.status.code(), Some(2));
    assert!(text(&two).contains("--nodes 2"), "{}", text(&two));
    let one = chaos(&["run", "--broker", b, "--nodes", "1", "--nemesis", "kill,bridge"]);
    assert_eq!(one.status.code(), Some(2));
    assert!(text(&one).contains("needs a cluster"), "{}", text(&one));
}
