//! How `es-chaos run --nodes 3` starts its brokers: each with the cluster
//! flags of the shared raft spec §4.7, its own raft listener, and peers
//! that are the proxy's listeners (so every peer link passes through it).
//! Against a broker without cluster mode it must stop at once with a
//! message that says so, not run a fake cluster; node counts and nemeses
//! that need a cluster are refused up front.
//!
//! The broker here is a stand-in script that writes down its arguments and
//! answers the cluster flags as clap does when it does not know them (the
//! real es-broker did, before cluster mode).

use std::collections::{BTreeMap, BTreeSet};
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

/// A broker that writes its arguments, one a line, to `args-<node id>`
/// beside it, then refuses `--raft-addr` the way clap does (otherwise it
/// would run; it never gets that far in these tests). Node 1 refuses only
/// once nodes 2 and 3 have written theirs (or after 10 s): es-chaos stops
/// the others when the first fails, and must have started them all
/// before it waits for the first.
fn old_broker(dir: &Path) -> PathBuf {
    let path = dir.join("es-broker");
    let script = format!(
        r#"#!/bin/sh
id=x; prev=
for a in "$@"; do [ "$prev" = --node-id ] && id=$a; prev=$a; done
for a in "$@"; do echo "$a"; done > "{dir}/args-$id.tmp"
mv "{dir}/args-$id.tmp" "{dir}/args-$id"
if [ "$id" = 1 ]; then
  n=0
  while [ $n -lt 200 ] && ! {{ [ -f "{dir}/args-2" ] && [ -f "{dir}/args-3" ]; }}; do
    sleep 0.05; n=$((n + 1))
  done
fi
for a in "$@"; do
  if [ "$a" = --raft-addr ]; then
    echo "error: unexpected argument '--raft-addr' found" >&2
    exit 2
  fi
done
sleep 600
"#,
        dir = dir.display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn three_nodes_start_behind_the_proxy_and_a_broker_without_cluster_mode_stops_the_run() {
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

    // All three were started (a cluster node is ready only with a
    // majority up), each with its flags.
    let args: BTreeMap<u32, Vec<String>> = (1..=3)
        .map(|id| {
            let text = std::fs::read_to_string(dir.path().join(format!("args-{id}")))
                .unwrap_or_else(|e| panic!("node {id} was not started: {e}"));
            (id, text.lines().map(str::to_string).collect())
        })
        .collect();
    let flag = |id: u32, name: &str| -> Option<String> {
        let a = &args[&id];
        let i = a.iter().position(|x| x == name)?;
        a.get(i + 1).cloned()
    };
    let mut raft = BTreeSet::new();
    let peers = flag(1, "--peers").expect("--peers");
    let peer_addrs: BTreeMap<u32, String> = peers
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("id=addr");
            (k.parse().unwrap(), v.to_string())
        })
        .collect();
    assert_eq!(
        peer_addrs.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3],
        "{peers}"
    );
    for id in 1..=3u32 {
        assert_eq!(flag(id, "--node-id"), Some(id.to_string()));
        assert_eq!(
            flag(id, "--peers").as_ref(),
            Some(&peers),
            "every node has the same peers"
        );
        let own = flag(id, "--raft-addr").expect("--raft-addr");
        assert!(own.starts_with("127.0.0.1:"));
        // Peers reach a node through the proxy, not at its listener.
        assert_ne!(peer_addrs[&id], own, "node {id}'s peers bypass the proxy");
        raft.insert(own);
        assert_eq!(flag(id, "--advertised-http-addr"), flag(id, "--http-addr"));
        assert_eq!(flag(id, "--advertised-binary-addr"), flag(id, "--binary-addr"));
        for (name, value) in [
            ("--shards", "1"),
            ("--spin-before-park-us", "0"),
            ("--disk-threads", "2"),
            ("--raft-heartbeat-ms", "100"),
            ("--raft-election-timeout-ms", "800"),
        ] {
            assert_eq!(flag(id, name).as_deref(), Some(value), "node {id} {name}");
        }
        assert!(args[&id].iter().any(|a| a == "--raft-insecure"));
    }
    assert_eq!(raft.len(), 3, "each node its own raft listener");
    let proxies: BTreeSet<&String> = peer_addrs.values().collect();
    assert_eq!(proxies.len(), 3, "one proxy listener per node");
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
