//! The controller group (raft0) on three nodes, each on its own glommio
//! executor thread, over real loopback TCP (plaintext, as with
//! `--raft-insecure`): a leader elected and the cluster uuid set; a topic
//! created through a follower (forwarded over 0x48) applied identically on
//! every node; refusals; a read barrier on a node that is behind; restarts
//! from the nodes' directories (the log re-applied, and a snapshot); the
//! leader killed and the survivors going on; two of three down and no
//! command acknowledged; producer ids and group commits replicated
//! (`InitProducer`, `CommitOffsets`, `DeleteGroup`).

mod common;
mod net;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use es_raft::controller::{
    ClusterState, Controller, ControllerCommand, ControllerConfig, ControllerError, Refusal,
};
use es_raft::transport::frame::RaftKind;
use es_raft::transport::{cluster_hash, TransportConfig};
use es_raft::NodeId;
use net::*;
use serde_json::{json, Value};

const IDS: [NodeId; 3] = [1, 2, 3];

thread_local! {
    /// The controller of the node whose thread this is.
    static CTL: RefCell<Option<Controller>> = const { RefCell::new(None) };
}

/// This node's controller (on its thread).
fn ctl() -> Controller {
    CTL.with(|c| c.borrow().clone().expect("the controller is open"))
}

fn config(id: NodeId, peers: &BTreeMap<NodeId, SocketAddr>) -> TransportConfig {
    TransportConfig::new(id, peers.clone(), cluster_hash("controller-test"))
}

/// Timeouts as the spec's cluster tests use (heartbeat 100 ms, elections
/// from 1 s: generous for a loaded 2-core box, so that no election happens
/// without a fault); a short proposal bound so that a command without a
/// quorum is answered soon.
fn ctl_config(snapshot_every: u64, keep_entries: u64) -> ControllerConfig {
    ControllerConfig {
        keep_entries,
        heartbeat_ms: 100,
        election_timeout_ms: 1000,
        propose_timeout: Duration::from_secs(3),
        read_barrier_timeout: Duration::from_secs(5),
        snapshot_every,
        proposed_uuid: Some("uuid-of-the-test".into()),
        ..ControllerConfig::default()
    }
}

struct Cluster {
    root: tempfile::TempDir,
    addrs: BTreeMap<NodeId, SocketAddr>,
    nodes: BTreeMap<NodeId, Node>,
    snapshot_every: u64,
    keep_entries: u64,
}

impl Cluster {
    fn new(snapshot_every: u64) -> Cluster {
        Cluster::purging(snapshot_every, 1_000_000)
    }

    /// A cluster whose controllers purge their logs `keep_entries` behind
    /// each snapshot.
    fn purging(snapshot_every: u64, keep_entries: u64) -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let addrs = IDS.iter().map(|&id| (id, free_addr())).collect();
        let mut c = Cluster {
            root,
            addrs,
            nodes: BTreeMap::new(),
            snapshot_every,
            keep_entries,
        };
        for id in IDS {
            c.start(id);
        }
        c
    }

    fn dir(&self, id: NodeId) -> PathBuf {
        self.root
            .path()
            .join(format!("node{id}"))
            .join("raft")
            .join("__controller")
    }

    /// Starts node `id` and opens its controller from its directory.
    fn start(&mut self, id: NodeId) {
        let node = Node::start(config(id, &self.addrs), self.addrs[&id]);
        let dir = self.dir(id);
        let cfg = ctl_config(self.snapshot_every, self.keep_entries);
        node.call(move |ctx| async move {
            let voters: BTreeSet<NodeId> = IDS.into();
            let c = Controller::open(ctx.id, &dir, voters, &ctx.net, &ctx.registry, cfg)
                .await
                .expect("the controller opens");
            ctx.server.set_control_handler(c.control_handler());
            CTL.with(|x| *x.borrow_mut() = Some(c));
        });
        self.nodes.insert(id, node);
    }

    /// Stops node `id`: its controller shut down, its transport closed.
    fn stop(&mut self, id: NodeId) {
        let node = self.nodes.remove(&id).expect("the node runs");
        node.call(|_| async move {
            let c = CTL.with(|x| x.borrow_mut().take()).expect("open");
            c.shutdown().await;
        });
        node.stop();
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    fn running(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    fn propose(&self, id: NodeId, cmd: ControllerCommand) -> Result<Result<Value, Refusal>, ControllerError> {
        self.node(id)
            .call(move |_| async move { ctl().propose(cmd).await })
    }

    fn state(&self, id: NodeId) -> ClusterState {
        self.node(id).call(|_| async move { (*ctl().state()).clone() })
    }

    fn applied_index(&self, id: NodeId) -> u64 {
        self.node(id).call(|_| async move { ctl().applied_index() })
    }

    /// What node `id` sees: (it leads, the leader it knows).
    fn view(&self, id: NodeId) -> (bool, Option<NodeId>) {
        self.node(id).call(|_| async move {
            let c = ctl();
            (c.is_leader(), c.leader())
        })
    }

    /// Waits until one running node leads and every running node knows it.
    fn wait_leader(&self) -> NodeId {
        let mut leader = None;
        wait_until("a controller leader all running nodes know", || {
            let views: Vec<(NodeId, (bool, Option<NodeId>))> =
                self.running().into_iter().map(|id| (id, self.view(id))).collect();
            let leaders: Vec<NodeId> = views.iter().filter(|(_, v)| v.0).map(|(id, _)| *id).collect();
            match leaders[..] {
                [l] if views.iter().all(|(_, v)| v.1 == Some(l)) => {
                    leader = Some(l);
                    true
                }
                _ => false,
            }
        });
        leader.unwrap()
    }

    /// Waits until every running node applied up to `index`.
    fn wait_applied(&self, index: u64) {
        for id in self.running() {
            wait_until(&format!("node {id} applied {index}"), || {
                self.applied_index(id) >= index
            });
        }
    }

    /// Waits until every running node holds the same state; that state.
    fn wait_same_state(&self) -> ClusterState {
        let mut last = None;
        wait_until("the same state on every running node", || {
            let states: Vec<ClusterState> = self.running().into_iter().map(|id| self.state(id)).collect();
            let same = states.windows(2).all(|w| w[0] == w[1]);
            last = states.into_iter().next();
            same
        });
        last.unwrap()
    }

    fn stop_all(mut self) {
        for id in self.running() {
            self.stop(id);
        }
    }
}

fn create(name: &str, partitions: u32, rf: Option<u32>) -> ControllerCommand {
    ControllerCommand::CreateTopic {
        name: name.into(),
        meta: json!({"name": name, "partitions": partitions, "retention_ms": 1000}),
        partitions,
        replication_factor: rf,
    }
}

fn follower_of(leader: NodeId) -> NodeId {
    IDS.into_iter().find(|&i| i != leader).unwrap()
}

#[test]
fn a_command_sent_to_a_follower_is_forwarded_and_applied_alike_everywhere() {
    let mut c = Cluster::new(1000);
    let leader = c.wait_leader();
    wait_until("the cluster uuid", || {
        c.state(leader).cluster_uuid.as_deref() == Some("uuid-of-the-test")
    });
    let f = follower_of(leader);
    let forwarded_before = c
        .node(leader)
        .call(|ctx| async move { ctx.stats.received_of(RaftKind::ControllerPropose as u8) });

    // Created through a follower: forwarded to the leader, applied everywhere.
    let r = c.propose(f, create("orders", 3, None)).expect("proposed");
    let record = r.expect("created");
    assert_eq!(record["name"], json!("orders"));
    let forwarded = c
        .node(leader)
        .call(|ctx| async move { ctx.stats.received_of(RaftKind::ControllerPropose as u8) });
    assert!(
        forwarded > forwarded_before,
        "the follower's command reached the leader as a ControllerPropose frame"
    );
    let index = record["created_index"].as_u64().unwrap();
    c.wait_applied(index);
    let state = c.wait_same_state();
    let t = &state.topics["orders"];
    assert_eq!(
        serde_json::to_value(t).unwrap(),
        record,
        "the result is the applied record"
    );
    let groups: Vec<u64> = t.partitions.iter().map(|p| p.group).collect();
    assert_eq!(groups, [1, 2, 3], "new groups from 1 (0 is the controller)");
    let preferred: BTreeSet<NodeId> = t.partitions.iter().map(|p| p.replicas[0]).collect();
    assert_eq!(preferred.len(), 3, "preferred leaders spread over the nodes");
    assert!(
        t.partitions.iter().all(|p| p.replicas.len() == 3),
        "rf defaults to 3"
    );
    assert_eq!(state.cluster_uuid.as_deref(), Some("uuid-of-the-test"));

    // Refusals, through the other follower and the leader: the same answer.
    let other = IDS.into_iter().find(|&i| i != leader && i != f).unwrap();
    let exists = c.propose(other, create("orders", 1, None)).expect("answered");
    assert_eq!(exists.unwrap_err().code, "topic_exists");
    let too_large = c.propose(leader, create("big", 1, Some(4))).expect("answered");
    assert_eq!(too_large.unwrap_err().code, "replication_factor_too_large");
    let gone = c
        .propose(f, ControllerCommand::DeleteTopic { name: "nope".into() })
        .expect("answered");
    assert_eq!(gone.unwrap_err().code, "topic_not_found");
    let rf2 = c
        .propose(other, create("two", 2, Some(2)))
        .expect("proposed")
        .expect("created");
    assert_eq!(rf2["partitions"][0]["group"], json!(4));
    c.wait_applied(rf2["created_index"].as_u64().unwrap());
    let state = c.wait_same_state();
    assert_eq!(state.next_group_id, 6);
    assert_eq!(state.topics.len(), 2, "refused commands changed nothing");

    // A node that is behind: stopped while a topic is created, restarted,
    // and asked at once. The read barrier makes it catch up first.
    let behind = f;
    c.stop(behind);
    let r = c
        .propose(leader, create("while-away", 1, Some(1)))
        .expect("proposed with two of three")
        .expect("created");
    let index = r["created_index"].as_u64().unwrap();
    c.start(behind);
    let (before, after, applied) = c.node(behind).call(move |_| async move {
        let c = ctl();
        let before = c.state().topics.contains_key("while-away");
        c.read_barrier().await.expect("read barrier");
        (
            before,
            c.state().topics.contains_key("while-away"),
            c.applied_index(),
        )
    });
    assert!(!before, "the restarted node did not have the topic yet");
    assert!(after, "after the read barrier it has it");
    assert!(applied >= index);
    c.stop_all();
}

#[test]
fn a_restarted_node_recovers_its_state_from_its_log_and_snapshot() {
    // A snapshot every 4 entries: most of the state comes from one.
    let mut c = Cluster::new(4);
    let leader = c.wait_leader();
    let mut last = 0;
    for i in 0..9 {
        let via = IDS[i % 3];
        let r = c
            .propose(via, create(&format!("t{i}"), 2, None))
            .unwrap()
            .unwrap();
        last = r["created_index"].as_u64().unwrap();
    }
    c.propose(leader, ControllerCommand::DeleteTopic { name: "t3".into() })
        .unwrap()
        .unwrap();
    let r = c
        .propose(
            follower_of(leader),
            ControllerCommand::PatchTopic {
                name: "t4".into(),
                meta: json!({"retention_ms": 5}),
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(r["meta"], json!({"retention_ms": 5}));
    last = last.max(c.applied_index(leader));
    c.wait_applied(last);
    let before = c.wait_same_state();
    assert_eq!(before.topics.len(), 8);
    for id in IDS {
        let snap = c.dir(id).join("snapshot");
        wait_until(&format!("node {id}'s snapshot"), || snap.exists());
    }

    // Every node down; one restarted alone recovers what it had applied
    // from its own directory (snapshot + log up to its committed mark),
    // without a leader.
    for id in IDS {
        c.stop(id);
    }
    assert!(snapshot_index(&c.dir(1)) > 0, "a snapshot was taken");
    c.start(1);
    // (No other node runs: nothing can be committed or sent to it.)
    wait_until("node 1 alone back to its state", || c.state(1) == before);

    // The others back: a new command goes on from the same state.
    c.start(2);
    c.start(3);
    c.wait_leader();
    let r = c.propose(3, create("after", 1, None)).unwrap().unwrap();
    assert_eq!(r["partitions"][0]["group"], json!(before.next_group_id));
    c.wait_applied(r["created_index"].as_u64().unwrap());
    let after = c.wait_same_state();
    assert_eq!(after.topics.len(), 9);
    c.stop_all();
}

/// The last applied index in a controller snapshot file (JSON + CRC).
fn snapshot_index(dir: &Path) -> u64 {
    let b = std::fs::read(dir.join("snapshot")).unwrap();
    let v: Value = serde_json::from_slice(&b[..b.len() - 4]).unwrap();
    v["last_applied"][1].as_u64().unwrap()
}

#[test]
fn the_survivors_go_on_and_with_two_of_three_down_nothing_is_acknowledged() {
    let mut c = Cluster::new(1000);
    let leader = c.wait_leader();
    c.propose(leader, create("a", 1, None)).unwrap().unwrap();

    // The leader killed: the two others elect one and take commands.
    c.stop(leader);
    let new_leader = c.wait_leader();
    assert_ne!(new_leader, leader);
    let survivor = c.running().into_iter().find(|&i| i != new_leader).unwrap();
    let r = c.propose(survivor, create("b", 1, None)).unwrap().unwrap();
    assert_eq!(r["name"], json!("b"));

    // Two of three down, the one left a leader that lost its quorum:
    // whatever is asked of it, nothing is acknowledged.
    c.stop(survivor);
    let alone = new_leader;
    for cmd in [
        create("c", 1, None),
        ControllerCommand::DeleteTopic { name: "a".into() },
    ] {
        match c.propose(alone, cmd) {
            Err(ControllerError::Unavailable(_))
            | Err(ControllerError::OutcomeUnknown(_))
            | Err(ControllerError::NotLeader { .. }) => {}
            other => panic!("without a quorum a command got {other:?}"),
        }
    }
    let barrier = c.node(alone).call(|_| async move { ctl().read_barrier().await });
    assert!(barrier.is_err(), "no read barrier without a quorum: {barrier:?}");
    let state = c.state(alone);
    assert!(!state.topics.contains_key("c") && state.topics.contains_key("a"));
    c.stop_all();
}

#[test]
fn bad_control_frames_are_refused_and_no_handler_answers_unsupported() {
    let c = Cluster::new(1000);
    let leader = c.wait_leader();
    let f = follower_of(leader);
    let results = c.node(f).call(move |ctx| async move {
        let net = &ctx.net;
        let garbage = net
            .control_call(leader, RaftKind::ControllerPropose, b"\xff")
            .await;
        let not_json = {
            let mut p = Vec::new();
            es_raft::transport::codec::encode_propose(&mut p, b"not a command");
            let body = net
                .control_call(leader, RaftKind::ControllerPropose, &p)
                .await
                .expect("answered");
            es_raft::transport::codec::decode_propose_reply(body).expect("a reply")
        };
        let broker_kind = net.control_call(leader, RaftKind::LeaderReport, b"").await;
        (format!("{garbage:?}"), not_json, format!("{broker_kind:?}"))
    });
    assert!(results.0.contains("malformed"), "{}", results.0);
    match results.1 {
        es_raft::transport::codec::ProposeReply::Applied(b) => {
            let o = es_raft::controller::command::decode_outcome(&b).unwrap();
            assert_eq!(o.unwrap_err().code, "invalid_request");
        }
        other => panic!("{other:?}"),
    }
    assert!(results.2.contains("unsupported"), "{}", results.2);
    c.stop_all();
}

fn init(existing: Option<i64>) -> ControllerCommand {
    ControllerCommand::InitProducer {
        existing,
        owner: None,
        admin: false,
    }
}

fn commit(group: &str, offsets: &[(&str, u32, u64)]) -> ControllerCommand {
    ControllerCommand::CommitOffsets {
        group: group.into(),
        offsets: offsets
            .iter()
            .map(|(t, p, o)| ((t.to_string(), *p), *o))
            .collect(),
    }
}

/// Producer ids and group commits (phase 2b): issued and committed
/// through a follower (forwarded), the same on every node, refused alike
/// from any node, kept across a restart of every node (log re-applied
/// over a snapshot) and across the leader's kill.
#[test]
fn producer_ids_and_group_commits_are_replicated_and_survive_restart_and_leader_kill() {
    // A snapshot every 5 entries: the restart reads some of it from one.
    let mut c = Cluster::new(5);
    let leader = c.wait_leader();
    let follower = follower_of(leader);
    c.propose(leader, create("t", 3, None)).unwrap().unwrap();

    // Ids in order from any node; an epoch bump through a follower.
    for (i, via) in IDS.into_iter().enumerate() {
        let r = c.propose(via, init(None)).unwrap().unwrap();
        assert_eq!(r, json!({"producer_id": i, "epoch": 0}));
    }
    let r = c.propose(follower, init(Some(1))).unwrap().unwrap();
    assert_eq!(r, json!({"producer_id": 1, "epoch": 1}));
    let refused = c.propose(follower, init(Some(7))).unwrap().unwrap_err();
    assert_eq!(refused.code, "unknown_producer_id");

    // Commits through a follower; refusals from any node change nothing.
    let r = c
        .propose(follower, commit("g", &[("t", 0, 5), ("t", 2, 9)]))
        .unwrap()
        .unwrap();
    assert_eq!(r["offsets"].as_array().unwrap().len(), 2);
    c.propose(leader, commit("h", &[("t", 1, 1)])).unwrap().unwrap();
    for id in IDS {
        assert_eq!(
            c.propose(id, commit("g", &[("t", 3, 1)]))
                .unwrap()
                .unwrap_err()
                .code,
            "partition_not_found"
        );
        assert_eq!(
            c.propose(id, commit("g", &[("nope", 0, 1)]))
                .unwrap()
                .unwrap_err()
                .code,
            "topic_not_found"
        );
    }
    let r = c
        .propose(follower, ControllerCommand::DeleteGroup { group: "h".into() })
        .unwrap()
        .unwrap();
    assert_eq!(r["group"], json!("h"));
    assert_eq!(
        c.propose(leader, ControllerCommand::DeleteGroup { group: "h".into() })
            .unwrap()
            .unwrap_err()
            .code,
        "group_not_found"
    );
    c.wait_applied(c.applied_index(leader));
    let before = c.wait_same_state();
    assert_eq!(before.producers.next_id, 3);
    assert_eq!(before.producers.epoch_of(1), 1);
    assert_eq!(before.producers.check(1, 0).unwrap_err().code, "producer_fenced");
    let g = before.groups.get("g").expect("group g everywhere");
    assert_eq!(g["t"][&0], 5);
    assert_eq!(g["t"][&2], 9);
    assert!(before.groups.get("h").is_none());
    // The typed calls the broker uses, on every node.
    for id in IDS {
        let (fenced, current, unknown, committed) = c.node(id).call(|_| async move {
            let c = ctl();
            (
                c.check_producer(1, 0).await.unwrap().map_err(|r| r.code),
                c.check_producer(1, 1).await.unwrap().map_err(|r| r.code),
                c.check_producer(9, 0).await.unwrap().map_err(|r| r.code),
                c.committed("g"),
            )
        });
        assert_eq!(fenced, Err("producer_fenced".into()));
        assert_eq!(current, Ok(()));
        assert_eq!(unknown, Err("unknown_producer_id".into()));
        assert_eq!(committed.as_ref(), before.groups.get("g"));
    }

    // Every node down and back: the same state, from snapshot and log.
    for id in IDS {
        c.stop(id);
    }
    for id in IDS {
        c.start(id);
    }
    let leader = c.wait_leader();
    assert_eq!(c.wait_same_state(), before);

    // The leader killed: the survivors go on from the same state.
    c.stop(leader);
    let new_leader = c.wait_leader();
    let survivor = c.running().into_iter().find(|&i| i != new_leader).unwrap();
    let r = c.propose(survivor, init(None)).unwrap().unwrap();
    assert_eq!(r, json!({"producer_id": 3, "epoch": 0}), "no id issued twice");
    let issued = c
        .node(survivor)
        .call(|_| async move { ctl().init_producer(Some(1), None, false).await })
        .unwrap()
        .unwrap();
    assert_eq!(
        (issued.producer_id, issued.epoch),
        (1, 2),
        "no epoch issued twice"
    );
    let r = c
        .node(survivor)
        .call(|_| async move { ctl().commit_offsets("g", vec![(("t".into(), 0), 6)]).await })
        .unwrap()
        .unwrap();
    assert_eq!(
        r["offsets"],
        json!([
            {"topic": "t", "partition": 0, "offset": 6},
            {"topic": "t", "partition": 2, "offset": 9},
        ]),
        "the commits before the kill are kept"
    );
    c.start(leader);
    c.wait_applied(c.applied_index(new_leader));
    let after = c.wait_same_state();
    assert_eq!(after.groups.get("g").unwrap()["t"][&0], 6);
    assert_eq!(after.producers.next_id, 4);
    c.stop_all();
}

/// Controller snapshots (the spec's §5.5, docs/design/raft-snapshots.md):
/// the controllers snapshot every 5 entries and purge their logs 2 behind;
/// a node away while many topics are created and deleted comes back past
/// the leader's purge point, gets the state's image streamed in chunks and
/// installs it: its state is the others', and the group goes on with it.
#[test]
fn a_node_away_past_the_purge_point_catches_up_by_a_controller_snapshot() {
    let mut c = Cluster::purging(5, 2);
    let leader = c.wait_leader();
    wait_until("the cluster uuid", || c.state(leader).cluster_uuid.is_some());
    let away = follower_of(leader);
    c.wait_applied(c.applied_index(leader));
    let away_index = c.applied_index(away);
    c.stop(away);
    for i in 0..40 {
        let name = format!("t{i}");
        c.propose(leader, create(&name, 2, Some(2)))
            .expect("proposed")
            .expect("created");
        if i % 3 == 0 {
            c.propose(leader, ControllerCommand::DeleteTopic { name })
                .expect("proposed")
                .expect("deleted");
        }
    }
    let purged = |c: &Cluster, id: NodeId| {
        c.node(id)
            .call(|_| async move { ctl().metrics().borrow().purged.map_or(0, |p| p.index) })
    };
    wait_until("the leader's log purged past the node away", || {
        purged(&c, leader) > away_index + 10
    });
    let before = c.state(leader);

    c.start(away);
    let leader = c.wait_leader();
    let want = c.state(leader);
    assert!(want.topics.len() >= before.topics.len());
    wait_until("the node away to hold the others' state", || {
        c.state(away) == want
    });
    let stats = c.node(away).call(|_| async move {
        let s = ctl().snapshot_stats();
        (s.snapshots_installed.get(), s.snapshot_bytes_received.get())
    });
    assert!(
        stats.0 >= 1 && stats.1 > 0,
        "the node away installed a streamed snapshot: {stats:?}"
    );
    assert!(want.topics.contains_key("t1") && !want.topics.contains_key("t0"));

    // The group goes on with it, and it survives a restart.
    let r = c.propose(away, create("after", 1, Some(3))).expect("proposed");
    let index = r.expect("created")["created_index"].as_u64().unwrap();
    c.wait_applied(index);
    c.stop(away);
    c.start(away);
    c.wait_applied(index);
    let state = c.wait_same_state();
    assert!(state.topics.contains_key("after"));
    c.stop_all();
}
