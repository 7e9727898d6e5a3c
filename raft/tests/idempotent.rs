//! Idempotent produce under Raft (the spec's §3.4): a partition group on
//! three nodes, each on its own glommio executor thread, over real
//! loopback TCP, each replica over a real partition log. A retry of a
//! batch written is answered with the first write's offset and written
//! nothing, also when it shares a coalesced entry with new batches or
//! arrives while the first write is in flight; gaps and fenced epochs are
//! refused; a retry sent to the new leader after the old one was killed
//! (its first attempt's outcome unknown) is written once on every
//! replica; a restart keeps the window.

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
use futures::future::join_all;
use net::*;

const IDS: [NodeId; 3] = [1, 2, 3];
const GROUP: GroupId = 33;

thread_local! {
    static PART: RefCell<Option<PartitionRaft>> = const { RefCell::new(None) };
}

fn part() -> PartitionRaft {
    PART.with(|p| p.borrow().clone().expect("the replica is open"))
}

/// A batch of `n` records valued `<tag>-<i>`, stamped by producer `pid`
/// at `epoch` from `seq` (`pid` < 0: no stamp).
fn batch(tag: &str, n: usize, pid: i64, epoch: i16, seq: i32) -> BatchBuf {
    let recs: Vec<Record> = (0..n)
        .map(|i| Record {
            key: Some(format!("k{i}").into_bytes()),
            value: format!("{tag}-{i}").into_bytes(),
            timestamp_ms: 7,
        })
        .collect();
    let stamp = if pid < 0 {
        ProducerStamp::NONE
    } else {
        ProducerStamp {
            producer_id: pid,
            epoch,
            base_sequence: seq,
        }
    };
    let mut out = Vec::new();
    encode_v2(Offset(0), &recs, stamp, RaftStamp::default(), &mut out);
    BatchBuf::from(out)
}

struct Cluster {
    root: tempfile::TempDir,
    addrs: BTreeMap<NodeId, SocketAddr>,
    nodes: BTreeMap<NodeId, Node>,
}

impl Cluster {
    fn new() -> Cluster {
        let mut c = Cluster {
            root: tempfile::tempdir().unwrap(),
            addrs: IDS.iter().map(|&id| (id, free_addr())).collect(),
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

    /// Starts node `id` with its replica opened from its directories.
    fn start(&mut self, id: NodeId) {
        let config = TransportConfig::new(id, self.addrs.clone(), cluster_hash("idempotent-test"));
        let node = Node::start(config, self.addrs[&id]);
        let dir = self.dir(id);
        node.call(move |ctx| async move {
            let log_config = LogConfig {
                segment_bytes: 4096,
                ..LogConfig::default()
            };
            // Timeouts for a loaded 2-core machine, as the other raft tests.
            let cfg = GroupConfig {
                heartbeat_ms: 50,
                election_timeout_ms: 400,
                produce_timeout_ms: 5_000,
                ..GroupConfig::default()
            };
            let p = ctx.open_replica(GROUP, &dir, &IDS, log_config, &cfg).await;
            PART.with(|x| *x.borrow_mut() = Some(p));
        });
        self.nodes.insert(id, node);
    }

    /// Stops node `id`: its replica shut down, its log closed.
    fn stop(&mut self, id: NodeId) {
        let node = self.nodes.remove(&id).expect("running");
        node.call(|_| async move {
            let p = PART.with(|x| x.borrow_mut().take()).expect("open");
            p.shutdown().await;
            p.log().close().await.expect("close the log");
        });
        node.stop();
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    fn running(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    /// (leads, leader known, high watermark) of node `id`'s replica.
    fn view(&self, id: NodeId) -> (bool, Option<NodeId>, u64) {
        self.node(id).call(|_| async move {
            let p = part();
            (p.is_leader(), p.leader(), p.high_watermark())
        })
    }

    fn leader(&self) -> NodeId {
        let mut found = None;
        wait_until("a leader every running node knows", || {
            let views: Vec<_> = self.running().into_iter().map(|id| (id, self.view(id))).collect();
            let leaders: Vec<NodeId> = views.iter().filter(|(_, v)| v.0).map(|(id, _)| *id).collect();
            found = match leaders[..] {
                [l] if views.iter().all(|(_, v)| v.1 == Some(l)) => Some(l),
                _ => None,
            };
            found.is_some()
        });
        found.unwrap()
    }

    fn produce(&self, id: NodeId, b: BatchBuf) -> Result<u64, ProduceError> {
        self.node(id)
            .call(move |_| async move { part().produce(b).await })
    }

    /// Produces `b` on the leader until answered other than "not now"
    /// (`LeaderNotAvailable`, `NotLeader`: nothing written); the answer.
    fn produce_settled(&self, b: impl Fn() -> BatchBuf) -> Result<u64, ProduceError> {
        let started = Instant::now();
        loop {
            let leader = self.leader();
            match self.produce(leader, b()) {
                Err(ProduceError::LeaderNotAvailable(_)) | Err(ProduceError::NotLeader { .. }) => {
                    assert!(started.elapsed() < HANG_GUARD, "never answered");
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    /// Waits until every running replica's high watermark is the leader's.
    fn wait_same_hw(&self) -> u64 {
        let hw = self.view(self.leader()).2;
        for id in self.running() {
            wait_until(&format!("node {id}'s high watermark at {hw}"), || {
                self.view(id).2 == hw
            });
        }
        hw
    }

    /// Every record below node `id`'s high watermark: (offset, value).
    fn records(&self, id: NodeId) -> Vec<(u64, String)> {
        self.node(id)
            .call(|_| async move { committed_records(&part()).await })
    }

    /// Waits until every running replica holds the same records; them.
    fn same_records(&self) -> Vec<(u64, String)> {
        self.wait_same_hw();
        let mine = self.records(self.leader());
        for id in self.running() {
            assert_eq!(self.records(id), mine, "node {id}'s records");
        }
        mine
    }

    fn stop_all(mut self) {
        for id in self.running() {
            self.stop(id);
        }
    }
}

/// How many times each value is in `records`.
fn copies(records: &[(u64, String)]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (_, v) in records {
        *m.entry(v.clone()).or_default() += 1;
    }
    m
}

fn refused(r: Result<u64, ProduceError>) -> String {
    match r {
        Err(ProduceError::Refused(r)) => r.code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_retry_is_written_once_and_gaps_and_fenced_epochs_are_refused() {
    let c = Cluster::new();
    let leader = c.leader();
    let first = c.produce_settled(|| batch("a", 2, 7, 0, 0)).unwrap();
    let hw = c.wait_same_hw();
    // The retry: the first write's offset, nothing written.
    assert_eq!(c.produce(leader, batch("a", 2, 7, 0, 0)), Ok(first));
    assert_eq!(c.view(leader).2, hw, "nothing appended");
    // A follower answers as for any produce.
    let follower = IDS.into_iter().find(|&i| i != leader).unwrap();
    assert_eq!(
        c.produce(follower, batch("a", 2, 7, 0, 0)),
        Err(ProduceError::NotLeader { leader: Some(leader) })
    );
    // A gap, a sequence inside a written batch, a retry with another count.
    assert_eq!(
        refused(c.produce(leader, batch("x", 1, 7, 0, 5))),
        "out_of_order_sequence"
    );
    assert_eq!(
        refused(c.produce(leader, batch("x", 1, 7, 0, 1))),
        "invalid_request"
    );
    assert_eq!(
        refused(c.produce(leader, batch("x", 3, 7, 0, 0))),
        "invalid_request"
    );
    assert_eq!(
        refused(c.produce(leader, batch("x", 1, 9, 0, 3))),
        "out_of_order_sequence"
    );
    // The next sequence goes on; a new epoch fences the old one.
    let b = c.produce(leader, batch("b", 1, 7, 0, 2)).unwrap();
    assert_eq!(b, first + 2);
    c.produce(leader, batch("c", 1, 7, 1, 0)).unwrap();
    assert_eq!(
        refused(c.produce(leader, batch("x", 1, 7, 0, 3))),
        "producer_fenced"
    );
    assert_eq!(
        refused(c.produce(leader, batch("b", 1, 7, 0, 2))),
        "producer_fenced",
        "a retry by a fenced epoch too"
    );
    let f = c.produce(leader, batch("f", 1, 12, 0, 0)).unwrap();

    // One round with new batches, a retry of a written one and, twice, a
    // batch whose first write is still in flight: every produce answered,
    // each batch written once (the retries take no place in the entry).
    let answers = c.node(leader).call(|_| async move {
        let p = part();
        let subs = vec![
            p.produce(batch("d", 1, 7, 1, 1)),
            p.produce(batch("f", 1, 12, 0, 0)),
            p.produce(batch("e", 2, 8, 0, 0)),
            p.produce(batch("d", 1, 7, 1, 1)),
            p.produce(batch("plain", 1, -1, 0, 0)),
            p.produce(batch("e", 2, 8, 0, 0)),
        ];
        join_all(subs).await
    });
    let ok: Vec<u64> = answers
        .iter()
        .map(|a| a.clone().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(ok[0], ok[3], "the retry in flight gets the first write's offset");
    assert_eq!(ok[2], ok[5]);
    assert_eq!(ok[1], f, "a retry of a written batch in a round of new ones");
    let stats = c
        .node(leader)
        .call(|_| async move { part().stats().duplicates.get() });
    assert!(stats >= 4, "duplicates counted: {stats}");

    let records = c.same_records();
    let n = copies(&records);
    for v in ["a-0", "a-1", "b-0", "c-0", "d-0", "e-0", "e-1", "f-0", "plain-0"] {
        assert_eq!(n.get(v), Some(&1), "{v} once in {records:?}");
    }
    assert!(
        !n.keys().any(|v| v.starts_with("x-")),
        "nothing refused was written"
    );
    c.stop_all();
}

#[test]
fn a_retry_across_a_leader_kill_is_written_once_on_every_replica() {
    let mut c = Cluster::new();
    let old = c.leader();
    let mut acked = BTreeMap::new();
    for s in 0..5 {
        let base = c.produce_settled(|| batch(&format!("s{s}"), 1, 3, 0, s)).unwrap();
        acked.insert(s, base);
    }
    // Sequence 5 proposed on the leader, which is killed before anyone
    // sees the answer: its outcome is unknown.
    c.node(old).call(|_| async move {
        glommio::spawn_local(async move {
            let _ = part().produce(batch("s5", 1, 3, 0, 5)).await;
        })
        .detach();
        glommio::timer::sleep(Duration::from_millis(2)).await;
    });
    c.stop(old);
    let new = c.leader();
    assert_ne!(new, old);
    // The client retries everything not answered, and (as after a lost
    // answer) one that was: the new leader has the window.
    let s5 = c.produce_settled(|| batch("s5", 1, 3, 0, 5)).unwrap();
    assert_eq!(c.produce_settled(|| batch("s5", 1, 3, 0, 5)), Ok(s5));
    assert_eq!(
        c.produce_settled(|| batch("s4", 1, 3, 0, 4)),
        Ok(acked[&4]),
        "a batch the old leader acknowledged is not written again"
    );
    let s6 = c.produce_settled(|| batch("s6", 1, 3, 0, 6)).unwrap();
    assert_eq!(s6, s5 + 1);

    c.start(old);
    let records = c.same_records();
    let n = copies(&records);
    for s in 0..=6 {
        assert_eq!(n.get(&format!("s{s}-0")), Some(&1), "s{s} once in {records:?}");
    }
    c.stop_all();
}

#[test]
fn a_restart_keeps_the_window() {
    let mut c = Cluster::new();
    let mut acked = Vec::new();
    for s in 0..4 {
        acked.push(
            c.produce_settled(|| batch(&format!("s{s}"), 2, 11, 0, s * 2))
                .unwrap(),
        );
    }
    let before = c.same_records();
    for id in IDS {
        c.stop(id);
    }
    for id in IDS {
        c.start(id);
    }
    assert_eq!(c.produce_settled(|| batch("s3", 2, 11, 0, 6)), Ok(acked[3]));
    assert_eq!(c.produce_settled(|| batch("s1", 2, 11, 0, 2)), Ok(acked[1]));
    assert_eq!(
        refused(c.produce_settled(|| batch("x", 1, 11, 0, 9))),
        "out_of_order_sequence"
    );
    let next = c.produce_settled(|| batch("s4", 1, 11, 0, 8)).unwrap();
    assert_eq!(next, before.len() as u64);
    let after = c.same_records();
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[..before.len()], before[..]);
    c.stop_all();
}

/// A snapshot covers the window: after `retain_below` snapshots every
/// replica past the producer's batches, a restart re-applies nothing
/// below the snapshot, so the window must come back from it (a retry of
/// a batch below the snapshot would otherwise be written again).
#[test]
fn a_restart_after_a_snapshot_keeps_the_window() {
    let mut c = Cluster::new();
    let mut acked = Vec::new();
    for s in 0..3 {
        acked.push(
            c.produce_settled(|| batch(&format!("s{s}"), 2, 12, 0, s * 2))
                .unwrap(),
        );
    }
    // A batch without a producer after them: the snapshot covers every
    // stamped batch, and the cut ends at the last of them.
    c.produce_settled(|| batch("plain", 1, -1, -1, -1)).unwrap();
    let hw = c.wait_same_hw();
    let before = c.same_records();
    for id in IDS {
        let cut = hw;
        c.node(id)
            .call(move |_| async move { part().retain_below(cut).await })
            .unwrap_or_else(|e| panic!("retain below {cut} on node {id}: {e}"));
    }
    for id in IDS {
        c.stop(id);
    }
    for id in IDS {
        c.start(id);
    }
    assert_eq!(c.produce_settled(|| batch("s2", 2, 12, 0, 4)), Ok(acked[2]));
    assert_eq!(c.produce_settled(|| batch("s0", 2, 12, 0, 0)), Ok(acked[0]));
    assert_eq!(
        refused(c.produce_settled(|| batch("x", 1, 12, 0, 9))),
        "out_of_order_sequence"
    );
    let after = c.same_records();
    assert_eq!(
        after[..],
        before[..],
        "a retry below the snapshot was written again"
    );
    c.stop_all();
}

thread_local! {
    /// The answer of the retry a node sent as soon as it led.
    static EAGER: RefCell<BTreeMap<i32, Result<u64, ProduceError>>> = const { RefCell::new(BTreeMap::new()) };
}

/// The retry that matters most: sent to a new leader the moment it is
/// elected, for a batch the old leader proposed just before it was
/// killed. The new leader may hold that batch in its log, not applied
/// yet (committed by the old leader, or to be committed with its own
/// term's first entry): checked before it applies, the retry would be
/// written again. It waits for that entry, and is answered with the first
/// write's offset when the batch survived. Several rounds, the kill at
/// varying moments after the proposal.
#[test]
fn a_retry_sent_to_a_leader_the_moment_it_is_elected_is_written_once() {
    let mut c = Cluster::new();
    c.produce_settled(|| batch("s0", 1, 5, 0, 0)).unwrap();
    let mut answers = BTreeMap::new();
    for round in 1..=6i32 {
        let old = c.leader();
        let others: Vec<NodeId> = IDS.into_iter().filter(|&i| i != old).collect();
        let tag = format!("s{round}");
        for &id in &others {
            let tag = tag.clone();
            c.node(id).call(move |_| async move {
                glommio::spawn_local(async move {
                    let p = part();
                    let mut rx = p.metrics();
                    while !p.is_leader() {
                        if rx.changed().await.is_err() {
                            return;
                        }
                    }
                    let answer = p.produce(batch(&tag, 1, 5, 0, round)).await;
                    EAGER.with(|e| e.borrow_mut().insert(round, answer));
                })
                .detach();
            });
        }
        // Proposed, and the leader killed a moment later.
        let tag2 = tag.clone();
        let wait_us = 500 * (round as u64 % 4);
        c.node(old).call(move |_| async move {
            glommio::spawn_local(async move {
                let _ = part().produce(batch(&tag2, 1, 5, 0, round)).await;
            })
            .detach();
            glommio::timer::sleep(Duration::from_micros(wait_us)).await;
        });
        c.stop(old);
        let new = c.leader();
        let started = Instant::now();
        let eager = loop {
            assert!(started.elapsed() < HANG_GUARD, "the new leader never retried");
            let got = c
                .node(new)
                .call(move |_| async move { EAGER.with(|e| e.borrow_mut().remove(&round)) });
            if let Some(a) = got {
                break a;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        // Whatever the eager retry got, the client retries until answered.
        let settled = c.produce_settled(|| batch(&tag, 1, 5, 0, round)).unwrap();
        if let Ok(base) = eager {
            assert_eq!(base, settled, "{tag}: both retries name the same write");
        }
        answers.insert(tag, settled);
        // (The other node's watcher stays: it retries this round's batch
        // whenever that node leads, a duplicate too.)
        c.start(old);
    }
    let records = c.same_records();
    let n = copies(&records);
    for (tag, base) in &answers {
        let v = format!("{tag}-0");
        assert_eq!(n.get(&v), Some(&1), "{v} once in {records:?}");
        assert!(records.contains(&(*base, v)));
    }
    c.stop_all();
}
