//! A link slower than the heartbeat: every byte between the three nodes
//! is held back longer than `heartbeat_ms` each way, so an append's round
//! trip is several heartbeats. openraft 0.9 alone gives an AppendEntries
//! the heartbeat interval and sends it again when that passes: nothing
//! would commit. With the runtime's RPC timeout floor
//! (`--raft-rpc-timeout-ms`, `runtime.rs`) produces are acknowledged and
//! every replica holds them.

mod common;
mod net;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use es_raft::transport::{cluster_hash, TransportConfig};
use es_raft::{GroupConfig, GroupId, NodeId, PartitionRaft, ProduceError};
use es_storage::batch::{encode_v2, RaftStamp};
use es_storage::{BatchBuf, LogConfig, Offset, ProducerStamp, Record};
use net::*;

const IDS: [NodeId; 3] = [1, 2, 3];
const GROUP: GroupId = 41;
const HEARTBEAT_MS: u64 = 50;
/// Each way: a round trip is four heartbeats.
const LINK_DELAY: Duration = Duration::from_millis(2 * HEARTBEAT_MS);

thread_local! {
    static PARTS: RefCell<BTreeMap<GroupId, PartitionRaft>> = RefCell::default();
}

fn part() -> PartitionRaft {
    PARTS.with(|p| p.borrow()[&GROUP].clone())
}

/// Elections wait well past a delayed heartbeat (a loaded 2-core box).
fn group_config() -> GroupConfig {
    GroupConfig {
        heartbeat_ms: HEARTBEAT_MS,
        election_timeout_ms: 1500,
        produce_timeout_ms: 10_000,
        ..GroupConfig::default()
    }
}

fn batch(tag: &str) -> BatchBuf {
    let recs = vec![Record {
        key: Some(b"k".to_vec()),
        value: tag.as_bytes().to_vec(),
        timestamp_ms: 7,
    }];
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

fn open_replica(node: &Node, dir: PathBuf) {
    node.call(move |ctx| async move {
        let p = ctx
            .open_replica(GROUP, &dir, &IDS, LogConfig::default(), &group_config())
            .await;
        PARTS.with(|m| m.borrow_mut().insert(GROUP, p));
    })
}

fn view(node: &Node) -> (bool, Option<NodeId>, u64) {
    node.call(|_| async move {
        let p = part();
        (p.is_leader(), p.leader(), p.high_watermark())
    })
}

#[test]
fn appends_over_a_link_slower_than_the_heartbeat_commit() {
    let root = tempfile::tempdir().unwrap();
    let listen: BTreeMap<NodeId, SocketAddr> = IDS.iter().map(|&id| (id, free_addr())).collect();
    let mut links = Vec::new();
    let mut nodes = BTreeMap::new();
    for from in IDS {
        let mut peers = BTreeMap::new();
        for to in IDS {
            if to == from {
                peers.insert(to, listen[&to]);
                continue;
            }
            let link = LinkProxy::start(listen[&to]);
            link.set_delay(LINK_DELAY);
            peers.insert(to, link.addr);
            links.push(link);
        }
        let node = Node::start(
            TransportConfig::new(from, peers, cluster_hash("slow-append-test")),
            listen[&from],
        );
        open_replica(&node, root.path().join(format!("node{from}")));
        nodes.insert(from, node);
    }

    let mut acked = 0u64;
    let started = Instant::now();
    while acked < 10 {
        assert!(
            started.elapsed() < HANG_GUARD,
            "{acked} of 10 produces acknowledged"
        );
        let tag = format!("slow-{acked}");
        let mut done = false;
        for node in nodes.values() {
            let b = batch(&tag);
            match node.call(move |_| async move { part().produce(b).await }) {
                Ok(base) => {
                    assert_eq!(base, acked, "dense offsets");
                    done = true;
                    break;
                }
                Err(ProduceError::NotLeader { .. } | ProduceError::LeaderNotAvailable(_)) => {}
                // Nothing committed within the produce timeout: what this
                // test is about. Its fate is unknown, so the offsets
                // checked above no longer say anything.
                Err(e) => panic!("produce {tag} on node {}: {e}", node.id),
            }
        }
        if done {
            acked += 1;
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for node in nodes.values() {
        wait_until(&format!("node {}'s high watermark at {acked}", node.id), || {
            view(node).2 == acked
        });
    }
    for (_, node) in nodes {
        node.call(|_| async move {
            let p = PARTS.with(|m| m.borrow_mut().remove(&GROUP)).unwrap();
            p.shutdown().await;
            p.log().close().await.expect("close the log");
        });
        node.stop();
    }
}
