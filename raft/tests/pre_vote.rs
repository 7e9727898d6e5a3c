//! Pre-vote on three nodes, each on its own glommio executor thread, each
//! link (source, destination) through a proxy that can take it down, the
//! replicas `PartitionRaft`s over real partition logs: a follower cut off
//! (both ways, or from the leader one way) for many election timeouts
//! neither raises its term nor, once back, deposes the leader; a leader
//! cut off or stopped is replaced.

mod common;
mod net;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use es_raft::transport::{cluster_hash, TransportConfig};
use es_raft::{GroupConfig, GroupId, NodeId, PartitionRaft, ProduceError};
use es_storage::batch::{encode_v2, RaftStamp};
use es_storage::{BatchBuf, LogConfig, Offset, ProducerStamp, Record};
use net::*;

const IDS: [NodeId; 3] = [1, 2, 3];
const GROUP: GroupId = 31;

thread_local! {
    /// The replica open on this node's thread.
    static PART: RefCell<Option<PartitionRaft>> = const { RefCell::new(None) };
}

fn part() -> PartitionRaft {
    PART.with(|p| p.borrow().clone().expect("the replica is open"))
}

/// Timeouts for a loaded 2-core machine, as the other raft tests.
fn group_config() -> GroupConfig {
    GroupConfig {
        heartbeat_ms: 50,
        election_timeout_ms: 400,
        produce_timeout_ms: 3_000,
        ..GroupConfig::default()
    }
}

fn batch(tag: &str) -> BatchBuf {
    let recs = vec![Record {
        key: None,
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

/// What the tests look at on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct View {
    leads: bool,
    leader: Option<NodeId>,
    term: u64,
    hw: u64,
    /// Pre-vote rounds this node started, and elections they started.
    rounds: u64,
    elections: u64,
}

fn view(node: &Node) -> View {
    node.call(|ctx| async move {
        let p = part();
        let s = ctx.registry.elections().stats().clone();
        View {
            leads: p.is_leader(),
            leader: p.leader(),
            term: p.term(),
            hw: p.high_watermark(),
            rounds: s.rounds.get(),
            elections: s.elections.get(),
        }
    })
}

/// Produces on `node` until acknowledged (a new leader may refuse for a
/// while with `leader_not_available`); its high watermark after.
fn produce_acked(node: &Node, tag: &str) -> u64 {
    let tag = tag.to_string();
    let mut tries = 0;
    loop {
        let t = tag.clone();
        match node.call(move |_| async move { part().produce(batch(&t)).await }) {
            Ok(base) => return base + 1,
            Err(ProduceError::LeaderNotAvailable(_)) => {
                tries += 1;
                assert!(tries < 6_000, "never acknowledged");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("produce on node {}: {e}", node.id),
        }
    }
}

struct Cluster {
    root: tempfile::TempDir,
    listen: BTreeMap<NodeId, SocketAddr>,
    peers: BTreeMap<NodeId, BTreeMap<NodeId, SocketAddr>>,
    links: BTreeMap<(NodeId, NodeId), LinkProxy>,
    nodes: BTreeMap<NodeId, Node>,
}

impl Cluster {
    fn new() -> Cluster {
        let listen: BTreeMap<NodeId, SocketAddr> = IDS.iter().map(|&id| (id, free_addr())).collect();
        let mut links = BTreeMap::new();
        let mut peers = BTreeMap::new();
        for &from in &IDS {
            let mut map = BTreeMap::new();
            for &to in &IDS {
                let addr = if from != to {
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

    fn dir(&self, id: NodeId) -> PathBuf {
        self.root.path().join(format!("node{id}"))
    }

    fn start(&mut self, id: NodeId) {
        let config = TransportConfig::new(id, self.peers[&id].clone(), cluster_hash("pre-vote-test"));
        let node = Node::start(config, self.listen[&id]);
        let dir = self.dir(id);
        node.call(move |ctx| async move {
            let log_config = LogConfig {
                segment_bytes: 4096,
                ..LogConfig::default()
            };
            let p = ctx
                .open_replica(GROUP, &dir, &IDS, log_config, &group_config())
                .await;
            PART.with(|s| *s.borrow_mut() = Some(p));
        });
        self.nodes.insert(id, node);
    }

    fn stop(&mut self, id: NodeId) {
        let node = self.nodes.remove(&id).expect("running");
        node.call(|_| async move {
            if let Some(p) = PART.with(|s| s.borrow_mut().take()) {
                p.shutdown().await;
                p.log().close().await.expect("close the log");
            }
        });
        node.stop();
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    /// Waits until one of the running nodes in `among` leads and all of
    /// them say so.
    fn leader_among(&self, among: &[NodeId]) -> NodeId {
        let mut found = None;
        wait_until("a leader all nodes agree on", || {
            let views: Vec<(NodeId, View)> = among.iter().map(|&id| (id, view(self.node(id)))).collect();
            let leaders: Vec<NodeId> = views.iter().filter(|(_, v)| v.leads).map(|(id, _)| *id).collect();
            found = match leaders.as_slice() {
                [l] if views.iter().all(|(_, v)| v.leader == Some(*l)) => Some(*l),
                _ => None,
            };
            found.is_some()
        });
        found.unwrap()
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

    fn stop_all(mut self) {
        for id in IDS {
            if self.nodes.contains_key(&id) {
                self.stop(id);
            }
        }
    }
}

/// Cuts a follower off from the leader with `cut_off` (given the leader
/// and the follower) for many election timeouts, then heals: the leader
/// and the term are the same throughout.
fn a_follower_away_and_back_leaves_the_leader_and_term_alone(cut_off: fn(&Cluster, NodeId, NodeId)) {
    let c = Cluster::new();
    let leader = c.leader_among(&IDS);
    let hw = produce_acked(c.node(leader), "before");
    let before = view(c.node(leader));
    assert!(before.leads);
    let cut = *IDS.iter().find(|&&id| id != leader).unwrap();
    let rounds_before = view(c.node(cut)).rounds;

    cut_off(&c, leader, cut);
    // Many election timeouts: the cut-off follower's clock expires again
    // and again (each expiry starts a round), and it never campaigns.
    // (Or until some term moved: the assertions below then say so.)
    wait_until("the cut-off follower's pre-vote rounds, or a new term", || {
        let moved = IDS.iter().any(|&id| view(c.node(id)).term != before.term);
        moved || view(c.node(cut)).rounds >= rounds_before + 8
    });
    let alone = view(c.node(cut));
    assert_eq!(alone.term, before.term, "a cut-off follower keeps its term");
    assert_eq!(alone.elections, 0, "no round won without a majority");
    let hw = hw.max(produce_acked(c.node(leader), "during"));

    c.heal();
    // Until the follower caught up with the leader's log, or some node's
    // term moved (the leader deposed).
    wait_until("the follower back in step, or a new term", || {
        let v = view(c.node(cut));
        let moved = IDS.iter().any(|&id| view(c.node(id)).term != before.term);
        moved || (v.leader == Some(leader) && v.hw >= hw)
    });
    let after = view(c.node(leader));
    assert!(after.leads, "the leader still leads");
    assert_eq!(after.term, before.term, "no election happened");
    for id in IDS {
        let v = view(c.node(id));
        assert_eq!((v.term, v.leader), (before.term, Some(leader)), "node {id}");
    }
    // The group still takes produces from the same leader.
    produce_acked(c.node(leader), "after");
    assert_eq!(view(c.node(leader)).term, before.term);
    c.stop_all();
}

#[test]
fn a_follower_cut_off_and_back_leaves_the_leader_and_term_alone() {
    a_follower_away_and_back_leaves_the_leader_and_term_alone(|c, _, cut| c.isolate(cut));
}

#[test]
fn a_follower_that_stops_hearing_the_leader_one_way_leaves_it_alone() {
    // The leader's connections to the follower go down; the follower's to
    // the leader (its pre-votes) and to the other follower stay up.
    a_follower_away_and_back_leaves_the_leader_and_term_alone(|c, leader, cut| {
        c.links[&(leader, cut)].block()
    });
}

#[test]
fn a_leader_cut_off_or_stopped_is_replaced() {
    let mut c = Cluster::new();
    let old = c.leader_among(&IDS);
    produce_acked(c.node(old), "first");
    let term = view(c.node(old)).term;

    c.isolate(old);
    let others: Vec<NodeId> = IDS.iter().copied().filter(|&id| id != old).collect();
    let new = c.leader_among(&others);
    assert_ne!(new, old);
    let v = view(c.node(new));
    assert!(v.term > term, "a new term");
    assert!(v.elections >= 1, "the new leader won a pre-vote round first");
    let hw = produce_acked(c.node(new), "second");

    c.heal();
    wait_until("the old leader follows the new one", || {
        let v = view(c.node(old));
        v.leader == Some(new) && v.hw >= hw
    });

    // And a leader stopped outright.
    let term = view(c.node(new)).term;
    c.stop(new);
    let rest: Vec<NodeId> = IDS.iter().copied().filter(|&id| id != new).collect();
    let third = c.leader_among(&rest);
    assert_ne!(third, new);
    assert!(view(c.node(third)).term > term);
    produce_acked(c.node(third), "third");
    c.stop_all();
}
