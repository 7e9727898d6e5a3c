//! A cluster node's start: its flags checked against each other (exit 2,
//! naming the flag), and its data dir kept to one mode and one node
//! (`cluster.json`, exit 1): docs/cluster.md.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{free_port, Broker};

/// Runs es-broker with `args` on `data` until it exits.
fn run_to_exit<S: AsRef<std::ffi::OsStr>>(data: &Path, args: &[S]) -> (Output, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_es-broker"));
    cmd.args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .args(["--data-dir", data.to_str().expect("utf-8 path")])
        .args(["--http-addr", "127.0.0.1:0", "--binary-addr", "127.0.0.1:0"])
        .args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("ES_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect("es-broker runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

fn cluster_args(node: &str, raft: u16) -> Vec<String> {
    let peers = format!("1=127.0.0.1:{raft},2=127.0.0.1:{raft},3=127.0.0.1:{raft}");
    [
        "--node-id",
        node,
        "--peers",
        &peers,
        "--raft-addr",
        &format!("127.0.0.1:{raft}"),
        "--raft-insecure",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn cluster_flags_that_do_not_fit_together_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let peers = "1=127.0.0.1:7001,2=127.0.0.1:7002";
    for (args, says) in [
        (
            vec![
                "--node-id",
                "1",
                "--peers",
                peers,
                "--raft-addr",
                "127.0.0.1:7001",
            ],
            "--peer-cert, --peer-key and --peer-ca, or --raft-insecure",
        ),
        (
            vec![
                "--node-id",
                "3",
                "--peers",
                peers,
                "--raft-addr",
                "127.0.0.1:7001",
                "--raft-insecure",
            ],
            "--peers must list this node (--node-id 3)",
        ),
        (
            vec!["--node-id", "1", "--peers", peers, "--raft-insecure"],
            "--raft-addr is needed",
        ),
        (vec!["--raft-insecure"], "--peers is not given"),
    ] {
        let (out, err) = run_to_exit(&data, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(!data.join("cluster.json").exists(), "nothing written");
}

#[test]
fn a_data_dir_keeps_its_mode_and_its_node() {
    // Written standalone: a cluster node refuses it.
    let mut alone = Broker::start(1);
    assert_eq!(alone.sigterm_and_wait().code(), Some(0));
    let raft = free_port();
    let (out, err) = run_to_exit(&alone.data_dir(), &cluster_args("1", raft));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("written by a standalone broker"), "{err}");

    // Written by node 2: node 3 and a standalone broker refuse it.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut node2 = cluster_args("2", raft);
    node2.extend(["--shards", "1", "--spin-before-park-us", "0"].map(String::from));
    let mut child = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .args(["--data-dir", data.to_str().unwrap()])
        .args(["--http-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--binary-addr", &format!("127.0.0.1:{}", free_port())])
        .args(&node2)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for("node 2 to write cluster.json", || {
        data.join("cluster.json").exists()
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("cluster.json")).unwrap()).unwrap();
    assert_eq!(file["node_id"], 2, "{file}");
    assert_eq!(file["nodes"], serde_json::json!([1, 2, 3]), "{file}");

    let (out, err) = run_to_exit(&data, &cluster_args("3", raft));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("belongs to node 2, not --node-id 3"), "{err}");
    let (out, err) = run_to_exit::<&str>(&data, &[]);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("belongs to node 2 of a cluster"), "{err}");
}
