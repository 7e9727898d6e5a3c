//! `PartitionRaft` and its Proposer on three nodes, each on its own
//! glommio executor thread, talking over real loopback TCP through the
//! raft transport, each replica over a real partition log: produce on the
//! leader (dense offsets, the same records and bytes on every replica, the
//! same high watermark), refusals on a follower, concurrent produces
//! coalesced into few entries, an isolated leader losing no acknowledged
//! produce, nothing acknowledged with two of three nodes down, and a
//! replica restarted from its directories.
//!
//! Files: this one holds the three-node harness; `produce.rs` the produce
//! path (offsets, coalescing, refusals, a full queue), `failures.rs` what
//! losing nodes or restarting them does.

#[path = "../common/mod.rs"]
mod common;
mod failures;
#[path = "../net/mod.rs"]
mod net;
mod produce;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::log_files;
use es_raft::transport::{cluster_hash, TransportConfig};
use es_raft::{BatchRules, GroupConfig, GroupId, NodeId, PartitionRaft, ProduceError, ReplicaObserver};
use es_storage::batch::{encode, encode_v2, RaftStamp};
use es_storage::{BatchBuf, LogConfig, Offset, ProducerStamp, Record};
use futures::future::join_all;
use net::*;

const IDS: [NodeId; 3] = [1, 2, 3];
const GROUP: GroupId = 21;

thread_local! {
    /// The replicas open on this node's thread.
    static PARTS: RefCell<BTreeMap<GroupId, PartitionRaft>> = RefCell::default();
    /// Answers of the background producer of `isolated_leader…`.
    static STREAM: RefCell<Vec<(String, Result<u64, ProduceError>)>> = RefCell::default();
    static STREAM_STOP: Cell<bool> = const { Cell::new(false) };
}

fn part() -> PartitionRaft {
    PARTS.with(|p| p.borrow()[&GROUP].clone())
}

/// Timeouts for a loaded 2-core machine (as the other raft tests), and a
/// short produce timeout where a test waits for one to pass.
fn group_config(produce_timeout_ms: u64) -> GroupConfig {
    GroupConfig {
        heartbeat_ms: 50,
        election_timeout_ms: 400,
        produce_timeout_ms,
        ..GroupConfig::default()
    }
}

/// A batch of `n` records valued `<tag>-<i>`: version 2 (with no stamp,
/// as a protocol v2 client sends) or version 1.
fn batch(tag: &str, n: usize, v2: bool) -> BatchBuf {
    let recs: Vec<Record> = (0..n)
        .map(|i| Record {
            // Keys of 100 bytes: the test's logs roll.
            key: Some(format!("k{i}-{}", "x".repeat(96)).into_bytes()),
            value: format!("{tag}-{i}").into_bytes(),
            timestamp_ms: 7,
        })
        .collect();
    let mut out = Vec::new();
    if v2 {
        encode_v2(
            Offset(0),
            &recs,
            ProducerStamp::NONE,
            RaftStamp::default(),
            &mut out,
        );
    } else {
        encode(Offset(0), &recs, ProducerStamp::NONE, &mut out);
    }
    BatchBuf::from(out)
}

fn dir_of(root: &Path, id: NodeId) -> PathBuf {
    root.join(format!("node{id}"))
}

/// Opens the partition log under `dir/log` and the replica over it.
fn open_replica(node: &Node, dir: PathBuf, cfg: GroupConfig, log_config: LogConfig) {
    node.call(move |ctx| async move {
        let p = ctx.open_replica(GROUP, &dir, &IDS, log_config, &cfg).await;
        PARTS.with(|m| m.borrow_mut().insert(GROUP, p));
    })
}

/// Shuts the replica down and closes its log (as the broker does).
fn close_replica(node: &Node) {
    node.call(|_| async move {
        let p = PARTS.with(|m| m.borrow_mut().remove(&GROUP));
        if let Some(p) = p {
            p.shutdown().await;
            p.log().close().await.expect("close the log");
        }
    })
}

fn produce(node: &Node, b: BatchBuf) -> Result<u64, ProduceError> {
    node.call(move |_| async move { part().produce(b).await })
}

/// Produces `make()` on a node that leads until it is acknowledged: a
/// leader may refuse for a while (`LeaderNotAvailable`: a slow disk on a
/// loaded machine can delay its quorum's answers), which writes nothing.
fn produce_acked(node: &Node, make: impl Fn() -> BatchBuf) -> u64 {
    let started = Instant::now();
    loop {
        match produce(node, make()) {
            Ok(base) => return base,
            Err(ProduceError::LeaderNotAvailable(_)) => {
                assert!(started.elapsed() < HANG_GUARD, "never acknowledged");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("produce on node {}: {e}", node.id),
        }
    }
}

/// (is leader, leader known, high watermark) of a node's replica.
fn view(node: &Node) -> (bool, Option<NodeId>, u64) {
    node.call(|_| async move {
        let p = part();
        (p.is_leader(), p.leader(), p.high_watermark())
    })
}

/// Waits until one of `nodes` leads and all of them say so.
fn wait_leader_of(nodes: &[&Node]) -> NodeId {
    let mut found = None;
    wait_until("a leader all nodes agree on", || {
        let views: Vec<_> = nodes.iter().map(|n| (n.id, view(n))).collect();
        let leaders: Vec<NodeId> = views.iter().filter(|(_, v)| v.0).map(|(id, _)| *id).collect();
        found = match leaders.as_slice() {
            [l] if views.iter().all(|(_, v)| v.1 == Some(*l)) => Some(*l),
            _ => None,
        };
        found.is_some()
    });
    found.unwrap()
}

fn wait_hw(nodes: &[&Node], hw: u64) {
    for n in nodes {
        wait_until(&format!("node {}'s high watermark at {hw}", n.id), || {
            view(n).2 == hw
        });
    }
}

/// Every record below the high watermark of a node's log: (offset, value).
fn records(node: &Node) -> Vec<(u64, String)> {
    node.call(|_| async move { committed_records(&part()).await })
}

/// Three nodes, each with its replica of `GROUP` open; directly linked,
/// or each link (source, destination) through a [`LinkProxy`].
struct Cluster {
    root: tempfile::TempDir,
    cfg: GroupConfig,
    log_config: LogConfig,
    listen: BTreeMap<NodeId, SocketAddr>,
    /// The address each node dials for each peer.
    peers: BTreeMap<NodeId, BTreeMap<NodeId, SocketAddr>>,
    links: BTreeMap<(NodeId, NodeId), LinkProxy>,
    nodes: BTreeMap<NodeId, Node>,
}

impl Cluster {
    fn new(cfg: GroupConfig, proxied: bool) -> Cluster {
        let log_config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        Cluster::with_log(cfg, log_config, proxied)
    }

    fn with_log(cfg: GroupConfig, log_config: LogConfig, proxied: bool) -> Cluster {
        let listen: BTreeMap<NodeId, SocketAddr> = IDS.iter().map(|&id| (id, free_addr())).collect();
        let mut links = BTreeMap::new();
        let mut peers = BTreeMap::new();
        for &from in &IDS {
            let mut map = BTreeMap::new();
            for &to in &IDS {
                let addr = if proxied && from != to {
                    let link = LinkProxy::start(listen[&to]);
                    let a = link.addr;
                    links.insert((from, to), link);
                    a
                } else {
                    listen[&to]
                };
                map.insert(to, addr);
            }
            peers.insert(from, map);
        }
        let mut c = Cluster {
            root: tempfile::tempdir().unwrap(),
            cfg,
            log_config,
            listen,
            peers,
            links,
            nodes: BTreeMap::new(),
        };
        for id in IDS {
            c.start(id);
        }
        c
    }

    /// Starts node `id` (again) with its replica opened from its directories.
    fn start(&mut self, id: NodeId) {
        let config = TransportConfig::new(id, self.peers[&id].clone(), cluster_hash("group-test"));
        let node = Node::start(config, self.listen[&id]);
        open_replica(&node, self.dir(id), self.cfg.clone(), self.log_config.clone());
        self.nodes.insert(id, node);
    }

    /// Stops node `id`: its replica shut down, its log closed.
    fn stop(&mut self, id: NodeId) {
        let node = self.nodes.remove(&id).expect("running");
        close_replica(&node);
        node.stop();
    }

    fn dir(&self, id: NodeId) -> PathBuf {
        dir_of(self.root.path(), id)
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    fn running(&self) -> Vec<&Node> {
        self.nodes.values().collect()
    }

    fn leader(&self) -> NodeId {
        wait_leader_of(&self.running())
    }

    /// Takes every link to and from `id` down.
    fn isolate(&self, id: NodeId) {
        for ((from, to), link) in &self.links {
            if *from == id || *to == id {
                link.block();
            }
        }
    }

    fn heal(&self) {
        for link in self.links.values() {
            link.unblock();
        }
    }

    fn stop_all(mut self) -> tempfile::TempDir {
        for id in IDS {
            if self.nodes.contains_key(&id) {
                self.stop(id);
            }
        }
        self.root
    }
}
