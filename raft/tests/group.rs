//! `PartitionRaft` and its Proposer on three nodes, each on its own
//! glommio executor thread, talking over real loopback TCP through the
//! raft transport, each replica over a real partition log: produce on the
//! leader (dense offsets, the same records and bytes on every replica, the
//! same high watermark), refusals on a follower, concurrent produces
//! coalesced into few entries, an isolated leader losing no acknowledged
//! produce, nothing acknowledged with two of three nodes down, and a
//! replica restarted from its directories.

mod common;
mod net;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use es_raft::transport::{cluster_hash, TransportConfig};
use es_raft::{BatchRules, GroupConfig, GroupId, NodeId, PartitionRaft, ProduceError, ReplicaObserver};
use es_storage::batch::{encode, encode_v2, RaftStamp};
use es_storage::{BatchBuf, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record};
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
        let (log, _) = PartitionLog::open(&dir.join("log"), log_config, FsyncBatcher::new())
            .await
            .expect("open the partition log");
        let members: BTreeSet<NodeId> = IDS.into();
        let p = PartitionRaft::open(
            ctx.id,
            GROUP,
            log,
            &dir.join("raft"),
            Some(members),
            &ctx.net,
            &ctx.registry,
            &cfg,
        )
        .await
        .expect("open the replica");
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

#[test]
fn produce_on_the_leader_gives_dense_offsets_and_identical_replicas() {
    let mut c = Cluster::new(group_config(30_000), false);
    let leader = c.leader();

    // A follower refuses with the leader it knows: never proposed.
    let follower = IDS.into_iter().find(|&i| i != leader).unwrap();
    assert_eq!(
        produce(c.node(follower), batch("f", 1, true)),
        Err(ProduceError::NotLeader { leader: Some(leader) })
    );

    // Version 1 and version 2 batches, one at a time: dense offsets.
    let mut expected = Vec::new();
    let mut next = 0;
    for i in 0..20 {
        let n = i % 3 + 1;
        let base = produce_acked(c.node(leader), || batch(&format!("a{i}"), n, i % 2 == 0));
        assert_eq!(base, next, "batch {i} starts where the one before ended");
        expected.extend((0..n).map(|k| (base + k as u64, format!("a{i}-{k}"))));
        next += n as u64;
    }
    // Refused before anything is proposed: a producer's sequence with a
    // gap (idempotent produce: tests/idempotent.rs), garbage.
    let mut stamped = Vec::new();
    let rec = Record {
        key: None,
        value: b"x".to_vec(),
        timestamp_ms: 1,
    };
    let stamp = ProducerStamp {
        producer_id: 4,
        epoch: 0,
        base_sequence: 3,
    };
    encode(Offset(0), &[rec], stamp, &mut stamped);
    assert!(matches!(
        produce(c.node(leader), BatchBuf::from(stamped)),
        Err(ProduceError::Refused(r)) if r.code == "out_of_order_sequence"
    ));
    assert!(matches!(
        produce(c.node(leader), BatchBuf::from(vec![7u8; 100])),
        Err(ProduceError::Invalid(_))
    ));

    wait_hw(&c.running(), next);
    for n in c.running() {
        assert_eq!(records(n), expected, "node {}'s records", n.id);
    }
    let (term, replicas, in_sync) = c.node(leader).call(|_| async move {
        let p = part();
        (p.term(), p.replicas(), p.in_sync())
    });
    assert!(term >= 1);
    assert_eq!(replicas, IDS.to_vec());
    assert!(in_sync.contains(&leader));

    // A follower shuts down (its log closed), the leader writes on, the
    // follower reopens from its directories and catches up.
    c.stop(follower);
    for i in 0..10 {
        let base = produce_acked(c.node(leader), || batch(&format!("b{i}"), 2, true));
        assert_eq!(base, next);
        expected.extend((0..2).map(|k| (base + k, format!("b{i}-{k}"))));
        next += 2;
    }
    c.start(follower);
    wait_hw(&c.running(), next);
    for n in c.running() {
        assert_eq!(records(n), expected, "node {}'s records after the restart", n.id);
    }
    wait_until("every replica in sync", || {
        c.node(leader).call(|_| async move { part().in_sync().len() }) == 3
    });
    let root = c.stop_all();
    let first = log_files(&dir_of(root.path(), 1));
    assert!(first.len() > 1, "the log rolled");
    for id in [2, 3] {
        assert_eq!(
            log_files(&dir_of(root.path(), id)),
            first,
            "node {id}'s segment files are byte-identical"
        );
    }
}

/// Counts what a replica's observer is told.
#[derive(Default)]
struct Seen {
    commits: Cell<usize>,
    entries: Cell<usize>,
    batches: Cell<usize>,
}

struct Watcher(Rc<Seen>);

impl ReplicaObserver for Watcher {
    fn committed(&self, latency: Duration) {
        assert!(latency > Duration::ZERO);
        self.0.commits.set(self.0.commits.get() + 1);
    }

    fn proposed(&self, batches: usize, bytes: usize) {
        assert!(bytes > 0);
        self.0.entries.set(self.0.entries.get() + 1);
        self.0.batches.set(self.0.batches.get() + batches);
    }
}

#[test]
fn concurrent_produces_are_coalesced_into_few_entries_in_order() {
    let c = Cluster::new(group_config(30_000), false);
    let leader = c.leader();
    const SUBMITTERS: usize = 4;
    const EACH: usize = 50;
    let (answers, entries, batches, seen) = c.node(leader).call(|_| async move {
        let p = part();
        let before = p.stats().entries_proposed.get();
        let seen = Rc::new(Seen::default());
        p.stats().set_observer(Some(Box::new(Watcher(seen.clone()))));
        // Submitter s's j-th produce is created (and first polled) after
        // its (j-1)-th: that is its submission order.
        let produces = (0..SUBMITTERS * EACH).map(|i| {
            let p = p.clone();
            let (s, j) = (i % SUBMITTERS, i / SUBMITTERS);
            async move { (s, j, p.produce(batch(&format!("s{s}-{j}"), 1, true)).await) }
        });
        let answers = join_all(produces).await;
        let stats = p.stats();
        stats.set_observer(None);
        assert!(stats.commit_latency_us_sum.get() > 0);
        assert_eq!(stats.produced.get(), (SUBMITTERS * EACH) as u64);
        (
            answers,
            stats.entries_proposed.get() - before,
            stats.batches_proposed.get(),
            (seen.commits.get(), seen.entries.get(), seen.batches.get()),
        )
    });
    assert_eq!(
        seen,
        (SUBMITTERS * EACH, entries as usize, SUBMITTERS * EACH),
        "the observer saw each commit and each proposal"
    );
    let mut offsets = Vec::new();
    let mut last = [None; SUBMITTERS];
    for (s, j, answer) in answers {
        let base = answer.unwrap_or_else(|e| panic!("submitter {s}'s produce {j}: {e}"));
        assert!(
            last[s].is_none_or(|l| l < base),
            "submitter {s}'s produce {j} got {base}, before its produce {}",
            j.max(1) - 1
        );
        last[s] = Some(base);
        offsets.push(base);
    }
    offsets.sort();
    assert_eq!(
        offsets,
        (0..(SUBMITTERS * EACH) as u64).collect::<Vec<_>>(),
        "dense, each offset once"
    );
    assert_eq!(batches, (SUBMITTERS * EACH) as u64);
    assert!(
        entries * 10 <= (SUBMITTERS * EACH) as u64,
        "{} produces took {entries} entries",
        SUBMITTERS * EACH
    );
    // The log agrees: its data batches carry few distinct raft indexes,
    // and each record is where its produce was told.
    let hw = (SUBMITTERS * EACH) as u64;
    wait_hw(&c.running(), hw);
    let indexes = c.node(leader).call(|_| async move {
        let placed = part().log().placed_batches().await.expect("read the log");
        placed
            .iter()
            .filter_map(|b| b.header.raft.filter(|r| !r.control).map(|r| r.index))
            .collect::<BTreeSet<u64>>()
            .len()
    });
    assert_eq!(indexes as u64, entries, "data entries in the log");
    for n in c.running() {
        let got = records(n);
        assert_eq!(got.len() as u64, hw);
    }
    c.stop_all();
}

#[test]
fn an_isolated_leader_loses_no_acknowledged_produce() {
    let c = Cluster::new(group_config(3_000), true);
    let old = c.leader();
    // Four streams of produces on the leader, one at a time each, until
    // told to stop; every answer noted with the value produced.
    c.node(old).call(|_| async move {
        for s in 0..4 {
            glommio::spawn_local(async move {
                let mut j = 0;
                while !STREAM_STOP.with(Cell::get) {
                    let tag = format!("s{s}-{j}");
                    let answer = part().produce(batch(&tag, 1, true)).await;
                    let failed = answer.is_err();
                    STREAM.with(|v| v.borrow_mut().push((format!("{tag}-0"), answer)));
                    if failed {
                        // A refusal is immediate: give the shard back.
                        glommio::timer::sleep(Duration::from_millis(20)).await;
                    }
                    j += 1;
                }
            })
            .detach();
        }
    });
    let acked = |n: &Node| {
        n.call(|_| async move { STREAM.with(|v| v.borrow().iter().filter(|(_, a)| a.is_ok()).count()) })
    };
    wait_until("acknowledged produces before the cut", || {
        acked(c.node(old)) >= 40
    });

    c.isolate(old);
    // The cut-off leader soon refuses produce outright: it has heard from
    // no quorum for longer than the election timeout.
    wait_until("the isolated leader refuses with leader_not_available", || {
        // (Not its other refusal, a produce queued for the whole timeout
        // behind entries that cannot commit.)
        matches!(
            produce(c.node(old), batch("late", 1, true)),
            Err(ProduceError::LeaderNotAvailable(why)) if why.contains("quorum")
        )
    });
    let others: Vec<&Node> = c.running().into_iter().filter(|n| n.id != old).collect();
    let new = wait_leader_of(&others);
    let mut after = Vec::new();
    for i in 0..10 {
        let tag = format!("n{i}");
        let base = produce_acked(c.node(new), || batch(&tag, 1, true));
        after.push((format!("{tag}-0"), Ok(base)));
    }
    let stream = c.node(old).call(|_| async move {
        STREAM_STOP.with(|s| s.set(true));
        // Each stream ends within a produce timeout.
        glommio::timer::sleep(Duration::from_millis(3_500)).await;
        STREAM.with(|v| v.take())
    });
    c.heal();
    wait_until("the old leader follows the new one", || {
        view(c.node(old)).1 == Some(new)
    });
    let hw = view(c.node(new)).2;
    wait_hw(&c.running(), hw);

    let (elections, became) = c.node(new).call(|_| async move {
        let s = part().stats().clone();
        (s.elections.get(), s.became_leader.get())
    });
    assert!(elections >= 1 && became == 1, "the new leader saw its election");

    let log: BTreeMap<u64, String> = records(c.node(new)).into_iter().collect();
    for n in c.running() {
        let theirs: BTreeMap<u64, String> = records(n).into_iter().collect();
        assert_eq!(theirs, log, "node {}'s records", n.id);
    }
    let mut oks = 0;
    for (value, answer) in stream.iter().chain(&after) {
        match answer {
            Ok(base) => {
                oks += 1;
                assert_eq!(
                    log.get(base),
                    Some(value),
                    "{value} was acknowledged at offset {base}"
                );
            }
            Err(ProduceError::OutcomeUnknown(_))
            | Err(ProduceError::NotLeader { .. })
            | Err(ProduceError::LeaderNotAvailable(_)) => {}
            Err(e) => panic!("{value}: {e}"),
        }
    }
    assert!(oks >= 50, "acknowledged before and after the cut: {oks}");
    c.stop_all();
}

#[test]
fn with_two_of_three_nodes_down_nothing_is_acknowledged() {
    let mut c = Cluster::new(group_config(2_000), false);
    let leader = c.leader();
    for i in 0..5 {
        produce_acked(c.node(leader), || batch(&format!("a{i}"), 1, true));
    }
    let down: Vec<NodeId> = IDS.into_iter().filter(|&i| i != leader).collect();
    for &id in &down {
        c.stop(id);
    }
    // The leader alone: each produce fails (after the produce timeout at
    // worst), answered as never proposed or of unknown outcome.
    let mut refused = false;
    let started = Instant::now();
    while !refused || started.elapsed() < Duration::from_secs(3) {
        match produce(c.node(leader), batch("alone", 1, true)) {
            Ok(base) => panic!("acknowledged at {base} with two of three nodes down"),
            Err(ProduceError::LeaderNotAvailable(why)) => refused |= why.contains("quorum"),
            Err(ProduceError::OutcomeUnknown(_)) => {}
            Err(e) => panic!("unexpected answer: {e}"),
        }
        assert!(started.elapsed() < HANG_GUARD, "hung");
    }
    let hw = view(c.node(leader)).2;
    assert_eq!(hw, 5, "the high watermark stayed where the quorum left it");
    // One node back: a quorum again, produces acknowledged.
    c.start(down[0]);
    wait_until("produce acknowledged again", || {
        produce(c.node(leader), batch("back", 1, true)).is_ok()
    });
    c.stop_all();
}

#[test]
fn a_batch_the_log_refuses_fails_alone_and_the_group_goes_on() {
    let log_config = LogConfig {
        segment_bytes: 4096,
        batch_bytes_max: 2048,
        ..LogConfig::default()
    };
    let c = Cluster::with_log(group_config(30_000), log_config, false);
    let leader = c.leader();
    let l = c.node(leader);
    assert_eq!(produce_acked(l, || batch("a", 2, true)), 0);
    // Over the log's batch_bytes_max, which produce was not told of: the
    // log refuses it when the entry is placed; the entry is written blank
    // and the produce answered as refused, nothing written.
    let big = || batch("big", 30, true);
    assert!(big().len() > 2048);
    match produce(l, big()) {
        Err(ProduceError::Invalid(why)) => assert!(why.contains("refused"), "{why}"),
        other => panic!("{other:?}"),
    }
    // The group goes on; the blank entry took no offset.
    assert_eq!(produce_acked(l, || batch("b", 1, true)), 2);
    // Told the topic's rules, produce refuses such a batch before it is
    // proposed.
    let proposed = l.call(|_| async move {
        let p = part();
        p.set_batch_rules(BatchRules {
            batch_bytes_max: 2048,
            compacted: false,
        });
        p.stats().entries_proposed.get()
    });
    match produce(l, big()) {
        Err(ProduceError::Invalid(why)) => assert!(why.contains("batch_bytes_max"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        l.call(|_| async move { part().stats().entries_proposed.get() }),
        proposed,
        "not proposed"
    );
    wait_hw(&c.running(), 3);
    let expected = vec![
        (0, "a-0".to_string()),
        (1, "a-1".to_string()),
        (2, "b-0".to_string()),
    ];
    for n in c.running() {
        assert_eq!(records(n), expected, "node {}'s records", n.id);
    }
    c.stop_all();
}

#[test]
fn a_full_queue_makes_produce_wait() {
    let one = batch("q", 1, true).len();
    let cfg = GroupConfig {
        proposals_in_flight: 1,
        queue_bytes_max: 3 * one,
        ..group_config(30_000)
    };
    let c = Cluster::new(cfg, false);
    let leader = c.leader();
    let (answers, most) = c.node(leader).call(move |_| async move {
        let p = part();
        let most = Rc::new(Cell::new(0));
        let done = Rc::new(Cell::new(false));
        let sampler = {
            let (p, most, done) = (p.clone(), most.clone(), done.clone());
            glommio::spawn_local(async move {
                while !done.get() {
                    most.set(most.get().max(p.proposer().queued_bytes()));
                    glommio::yield_if_needed().await;
                    glommio::timer::sleep(Duration::from_micros(200)).await;
                }
            })
        };
        let produces = (0..40).map(|i| {
            let p = p.clone();
            async move { p.produce(batch(&format!("p{i}"), 1, true)).await }
        });
        let answers = join_all(produces).await;
        done.set(true);
        sampler.await;
        (answers, most.get())
    });
    let mut offsets: Vec<u64> = answers
        .into_iter()
        .map(|a| a.expect("every produce waits, then goes"))
        .collect();
    offsets.sort();
    assert_eq!(offsets, (0..40).collect::<Vec<_>>());
    assert!(most > 0, "the queue was used");
    assert!(
        most <= 3 * one,
        "the queue held {most} bytes, over its bound of {}",
        3 * one
    );
    c.stop_all();
}

#[test]
fn a_cluster_restarted_whole_keeps_its_records_and_offsets() {
    let mut c = Cluster::new(group_config(30_000), false);
    let leader = c.leader();
    for i in 0..10 {
        produce_acked(c.node(leader), || batch(&format!("a{i}"), 3, true));
    }
    let before = records(c.node(leader));
    assert_eq!(before.len(), 30);
    for id in IDS {
        c.stop(id);
    }
    for id in IDS {
        c.start(id);
    }
    let leader = c.leader();
    assert_eq!(
        produce_acked(c.node(leader), || batch("b", 1, true)),
        30,
        "offsets go on where they stopped"
    );
    wait_hw(&c.running(), 31);
    for n in c.running() {
        let got = records(n);
        assert_eq!(got[..30], before[..], "node {}'s records", n.id);
        assert_eq!(got[30], (30, "b-0".to_string()));
    }
    c.stop_all();
}
