//! Three replicas of one partition group for the snapshot tests, each on
//! its own glommio executor thread, talking over real loopback TCP, each
//! over a real partition log with small segments; a replica can be
//! stopped and started again from its files.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use es_raft::openraft::EmptyNode;
use es_raft::openraft::RaftMetrics;
use es_raft::transport::{cluster_hash, TransportConfig};
use es_raft::{GroupConfig, GroupId, LogId, NodeId, PartitionRaft, ProduceError};
use es_storage::batch::{encode_v2, RaftStamp};
use es_storage::{BatchBuf, LogConfig, Offset, ProducerStamp, Record};

use crate::net::*;

pub const IDS: [NodeId; 3] = [1, 2, 3];
pub const GROUP: GroupId = 23;

thread_local! {
    static PARTS: RefCell<BTreeMap<GroupId, PartitionRaft>> = RefCell::default();
}

pub fn part() -> PartitionRaft {
    PARTS.with(|p| p.borrow()[&GROUP].clone())
}

pub fn group_config() -> GroupConfig {
    GroupConfig {
        heartbeat_ms: 50,
        election_timeout_ms: 400,
        produce_timeout_ms: 30_000,
        ..GroupConfig::default()
    }
}

pub fn log_config() -> LogConfig {
    LogConfig {
        // Small segments: the test's log rolls many times.
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

/// A batch of `n` records of 100-byte keys valued `<tag>-<i>`.
pub fn batch(tag: &str, n: usize) -> BatchBuf {
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

pub struct Cluster {
    pub root: tempfile::TempDir,
    pub listen: BTreeMap<NodeId, SocketAddr>,
    pub nodes: BTreeMap<NodeId, Node>,
}

impl Cluster {
    pub fn new() -> Cluster {
        let mut c = Cluster {
            root: tempfile::tempdir().unwrap(),
            listen: IDS.iter().map(|&id| (id, free_addr())).collect(),
            nodes: BTreeMap::new(),
        };
        for id in IDS {
            c.start(id);
        }
        c
    }

    pub fn dir(&self, id: NodeId) -> PathBuf {
        self.root.path().join(format!("node{id}"))
    }

    pub fn start(&mut self, id: NodeId) {
        let config = TransportConfig::new(id, self.listen.clone(), cluster_hash("snapshot-test"));
        let node = Node::start(config, self.listen[&id]);
        let dir = self.dir(id);
        node.call(move |ctx| async move {
            let p = ctx
                .open_replica(GROUP, &dir, &IDS, log_config(), &group_config())
                .await;
            PARTS.with(|m| m.borrow_mut().insert(GROUP, p));
        });
        self.nodes.insert(id, node);
    }

    pub fn stop(&mut self, id: NodeId) {
        let node = self.nodes.remove(&id).expect("running");
        node.call(|_| async move {
            let p = PARTS.with(|m| m.borrow_mut().remove(&GROUP));
            if let Some(p) = p {
                p.shutdown().await;
                p.log().close().await.expect("close the log");
            }
        });
        node.stop();
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    pub fn leader(&self) -> NodeId {
        let mut found = None;
        wait_until("a leader all nodes agree on", || {
            let views: Vec<(NodeId, bool, Option<NodeId>)> = self
                .nodes
                .values()
                .map(|n| {
                    let (l, k) = n.call(|_| async move { (part().is_leader(), part().leader()) });
                    (n.id, l, k)
                })
                .collect();
            let leaders: Vec<NodeId> = views.iter().filter(|v| v.1).map(|v| v.0).collect();
            found = match leaders.as_slice() {
                [l] if views.iter().all(|v| v.2 == Some(*l)) => Some(*l),
                _ => None,
            };
            found.is_some()
        });
        found.unwrap()
    }

    pub fn stop_all(mut self) {
        for id in IDS {
            if self.nodes.contains_key(&id) {
                self.stop(id);
            }
        }
    }
}

pub fn produce_acked(node: &Node, tag: String, n: usize) -> u64 {
    let started = Instant::now();
    loop {
        let t = tag.clone();
        match node.call(move |_| async move { part().produce(batch(&t, n)).await }) {
            Ok(base) => return base,
            Err(ProduceError::LeaderNotAvailable(_)) => {
                assert!(started.elapsed() < HANG_GUARD, "never acknowledged");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("produce on node {}: {e}", node.id),
        }
    }
}

pub fn metrics(node: &Node) -> RaftMetrics<NodeId, EmptyNode> {
    node.call(|_| async move { part().metrics().borrow().clone() })
}

pub fn retain_below(node: &Node, cut: u64) -> Option<LogId> {
    node.call(move |_| async move { part().retain_below(cut).await })
        .unwrap_or_else(|e| panic!("retain below {cut} on node {}: {e}", node.id))
}

pub fn cleanup_limit(node: &Node) -> u64 {
    node.call(|_| async move { part().log().cleanup_limit().0 })
}
