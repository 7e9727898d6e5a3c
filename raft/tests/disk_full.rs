//! A replica whose disk fills recovers without a restart: its appends
//! fail as on a full disk (`ENOSPC`, injected: `PartitionLog::arm_no_space`),
//! openraft stops its group, and once the disk takes writes again the
//! group starts again from the log and catches up with the leader (three
//! nodes, each on its own glommio executor thread, over the raft
//! transport and real partition logs). A follower, then a leader.

mod common;
mod net;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use es_raft::transport::{cluster_hash, TransportConfig};
use es_raft::{GroupConfig, GroupId, NodeId, PartitionRaft, ProduceError};
use es_storage::batch::{encode_v2, RaftStamp};
use es_storage::{BatchBuf, LogConfig, NoSpaceAt, Offset, ProducerStamp, Record};
use net::*;

const IDS: [NodeId; 3] = [1, 2, 3];
const GROUP: GroupId = 31;

thread_local! {
    static PARTS: RefCell<BTreeMap<GroupId, PartitionRaft>> = RefCell::default();
}

fn part() -> PartitionRaft {
    PARTS.with(|p| p.borrow()[&GROUP].clone())
}

/// Timeouts for a loaded 2-core machine (as the other raft tests).
fn group_config() -> GroupConfig {
    GroupConfig {
        heartbeat_ms: 50,
        election_timeout_ms: 400,
        produce_timeout_ms: 30_000,
        ..GroupConfig::default()
    }
}

/// A version 2 batch of `n` records valued `<tag>-<i>`, keys of 100 bytes
/// (the test's logs roll).
fn batch(tag: &str, n: usize) -> BatchBuf {
    let recs: Vec<Record> = (0..n)
        .map(|i| Record {
            key: Some(format!("k{i}-{}", "x".repeat(96)).into_bytes()),
            value: format!("{tag}-{i}").into_bytes(),
            timestamp_ms: 7,
        })
        .collect();
    let mut out = Vec::new();
    encode_v2(
        Offset(0),
        &recs,
        ProducerStamp::NONE,
        RaftStamp::default(),
        &mut out,
    );
    BatchBuf::from(out)
}

struct Cluster {
    root: tempfile::TempDir,
    nodes: BTreeMap<NodeId, Node>,
}

impl Cluster {
    fn new() -> Cluster {
        let listen: BTreeMap<NodeId, SocketAddr> = IDS.iter().map(|&id| (id, free_addr())).collect();
        let root = tempfile::tempdir().unwrap();
        let mut nodes = BTreeMap::new();
        for id in IDS {
            let config = TransportConfig::new(id, listen.clone(), cluster_hash("disk-full-test"));
            let node = Node::start(config, listen[&id]);
            open_replica(&node, root.path().join(format!("node{id}")));
            nodes.insert(id, node);
        }
        Cluster { root, nodes }
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    /// Waits until one node leads and all of them say so.
    fn leader(&self) -> NodeId {
        let mut found = None;
        wait_until("a leader all nodes agree on", || {
            let views: Vec<_> = self.nodes.values().map(|n| (n.id, view(n))).collect();
            let leaders: Vec<NodeId> = views.iter().filter(|(_, v)| v.0).map(|(id, _)| *id).collect();
            found = match leaders.as_slice() {
                [l] if views.iter().all(|(_, v)| v.1 == Some(*l)) => Some(*l),
                _ => None,
            };
            found.is_some()
        });
        found.unwrap()
    }

    fn stop_all(mut self) -> tempfile::TempDir {
        for id in IDS {
            let node = self.nodes.remove(&id).unwrap();
            node.call(|_| async move {
                let p = PARTS.with(|m| m.borrow_mut().remove(&GROUP)).unwrap();
                p.shutdown().await;
                p.log().close().await.expect("close the log");
            });
            node.stop();
        }
        self.root
    }
}

fn open_replica(node: &Node, dir: PathBuf) {
    node.call(move |ctx| async move {
        let log_config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let p = ctx
            .open_replica(GROUP, &dir, &IDS, log_config, &group_config())
            .await;
        PARTS.with(|m| m.borrow_mut().insert(GROUP, p));
    })
}

/// (is leader, leader known, high watermark) of a node's replica.
fn view(node: &Node) -> (bool, Option<NodeId>, u64) {
    node.call(|_| async move {
        let p = part();
        (p.is_leader(), p.leader(), p.high_watermark())
    })
}

/// Produces on whichever node leads until one acknowledges it: while a
/// leader changes, produces are refused (nothing written), or, from a
/// leader whose disk just filled, their outcome is unknown (then the
/// batch may be in the log once, or more often: the checks allow it).
fn produce_acked(c: &Cluster, tag: &str, n: usize) -> u64 {
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < HANG_GUARD, "{tag} never acknowledged");
        for node in c.nodes.values() {
            let b = batch(tag, n);
            match node.call(move |_| async move { part().produce(b).await }) {
                Ok(base) => return base,
                Err(
                    ProduceError::NotLeader { .. }
                    | ProduceError::LeaderNotAvailable(_)
                    | ProduceError::OutcomeUnknown(_),
                ) => {}
                Err(e) => panic!("produce {tag} on node {}: {e}", node.id),
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn arm_no_space(node: &Node, on: bool) {
    node.call(move |_| async move {
        part().log().arm_no_space(on.then_some(NoSpaceAt::SegmentWrite));
    })
}

fn storage_failure(node: &Node) -> Option<String> {
    node.call(|_| async move { part().storage_failure() })
}

/// Every record below the high watermark of a node's log: (offset, value).
fn records(node: &Node) -> Vec<(u64, String)> {
    node.call(|_| async move {
        let p = part();
        let hw = p.high_watermark();
        p.log()
            .read(Offset(0), usize::MAX, Offset(hw))
            .await
            .expect("read the log")
            .into_iter()
            .map(|r| (r.offset.0, String::from_utf8(r.value).unwrap()))
            .collect()
    })
}

fn log_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Produces `count` batches of 2 records tagged `<tag><i>`, each after the
/// one before is acknowledged; adds them to `expected`.
fn produce_run(c: &Cluster, tag: &str, count: usize, expected: &mut Vec<(u64, String)>) {
    for i in 0..count {
        let t = format!("{tag}{i}");
        let base = produce_acked(c, &t, 2);
        expected.extend((0..2).map(|k| (base + k, format!("{t}-{k}"))));
    }
}

/// Fills `victim`'s disk while the others take produces, waits until its
/// group stopped on the storage error, frees the disk, and checks that the
/// group started again (no restart of anything) and every replica holds
/// the same records, the same high watermark and byte-identical segments.
fn fill_and_free(c: Cluster, victim: NodeId, expected: &mut Vec<(u64, String)>) {
    arm_no_space(c.node(victim), true);
    produce_run(&c, "full", 10, expected);
    wait_until(&format!("node {victim}'s group stopped on the full disk"), || {
        storage_failure(c.node(victim)).is_some()
    });
    produce_run(&c, "while-stopped", 5, expected);
    let restarts_before = c
        .node(victim)
        .call(|_| async move { part().stats().storage_restarts.get() });
    assert_eq!(restarts_before, 0, "no restart while the disk is full");
    arm_no_space(c.node(victim), false);
    produce_run(&c, "after", 5, expected);
    // Every acknowledged record is below the high watermark; one whose
    // outcome was unknown may be too, so the replicas agree on a mark at
    // or above it.
    let acked = expected.last().map_or(0, |(o, _)| o + 1);
    let mut hw = 0;
    wait_until("every replica at the same high watermark, past every ack", || {
        let marks: BTreeSet<u64> = IDS.iter().map(|&id| view(c.node(id)).2).collect();
        hw = *marks.first().unwrap();
        marks.len() == 1 && hw >= acked
    });
    assert_eq!(storage_failure(c.node(victim)), None);
    let (failures, restarts) = c.node(victim).call(|_| async move {
        let s = part().stats().clone();
        (s.storage_failures.get(), s.storage_restarts.get())
    });
    assert!(
        failures >= 1 && restarts >= 1,
        "{failures} failures, {restarts} restarts"
    );
    let first = records(c.node(IDS[0]));
    assert_eq!(first.len() as u64, hw, "dense offsets below the high watermark");
    for (offset, value) in expected.iter() {
        assert_eq!(
            first.get(*offset as usize),
            Some(&(*offset, value.clone())),
            "acknowledged"
        );
    }
    for id in IDS {
        assert_eq!(records(c.node(id)), first, "node {id}'s records");
    }
    let root = c.stop_all();
    let first = log_files(&root.path().join("node1"));
    assert!(first.len() > 1, "the log rolled");
    for id in [2, 3] {
        assert_eq!(
            log_files(&root.path().join(format!("node{id}"))),
            first,
            "node {id}'s segment files are byte-identical"
        );
    }
}

#[test]
fn a_follower_whose_disk_filled_catches_up_once_it_has_room() {
    let c = Cluster::new();
    let leader = c.leader();
    let mut expected = Vec::new();
    produce_run(&c, "before", 5, &mut expected);
    let follower = IDS.into_iter().find(|&i| i != leader).unwrap();
    fill_and_free(c, follower, &mut expected);
}

#[test]
fn a_leader_whose_disk_filled_rejoins_once_it_has_room() {
    let c = Cluster::new();
    let leader = c.leader();
    let mut expected = Vec::new();
    produce_run(&c, "before", 5, &mut expected);
    fill_and_free(c, leader, &mut expected);
}
