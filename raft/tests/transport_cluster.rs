//! Three nodes, each on its own glommio executor thread, whose groups talk
//! over real loopback TCP through the raft transport (plaintext, as with
//! `--raft-insecure`): election, replication of entries carrying record
//! batches into real partition logs (byte-identical on every replica), two
//! groups sharing one connection per peer, heartbeats travelling only in
//! coalesced Heartbeats frames, a follower restarted from its directories
//! catching up, and connections cut under the nodes reconnecting.

mod common;
mod net;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;

use common::log_files;
use es_raft::transport::frame::RaftKind;
use es_raft::transport::{cluster_hash, TransportConfig, TransportStats};
use es_raft::{Applied, GroupId, NodeId, Proposal};
use es_storage::batch::{encode_v2, RaftStamp};
use es_storage::{BatchBuf, Offset, ProducerStamp, Record};
use net::*;

const IDS: [NodeId; 3] = [1, 2, 3];
/// A group over partition logs, and one over the memory store.
const LOG_GROUP: GroupId = 11;
const MEM_GROUP: GroupId = 12;

fn batch(tag: &str, n: usize) -> BatchBuf {
    let recs: Vec<Record> = (0..n)
        .map(|i| Record {
            key: Some(format!("k{i}").into_bytes()),
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

fn config(id: NodeId, peers: &BTreeMap<NodeId, SocketAddr>) -> TransportConfig {
    TransportConfig::new(id, peers.clone(), cluster_hash("transport-test"))
}

/// Writes `count` entries of two batches each to `group` on `leader`;
/// the last applied log index.
fn write(leader: &Node, group: GroupId, tag: &str, count: usize) -> u64 {
    let tag = tag.to_string();
    leader.call(move |ctx| async move {
        let raft = ctx.raft(group);
        for i in 0..count {
            let r = raft
                .client_write(Proposal::Batches(vec![
                    batch(&format!("{tag}{i}a"), 3),
                    batch(&format!("{tag}{i}b"), 2),
                ]))
                .await
                .expect("client_write");
            assert!(
                matches!(r.data, Applied::Offsets(ref o) if o.len() == 2) || matches!(r.data, Applied::None)
            );
        }
        raft.metrics().borrow().last_applied.unwrap().index
    })
}

fn committed_offset(node: &Node) -> u64 {
    node.call(|ctx| async move { ctx.logs.borrow()[&LOG_GROUP].1.committed_offset() })
}

fn start_groups(node: &Node, dir: PathBuf) {
    node.call(move |ctx| async move {
        ctx.start_log(LOG_GROUP, &dir).await;
        ctx.start_mem(MEM_GROUP).await;
    });
}

fn initialize(node: &Node) {
    node.call(|ctx| async move {
        let members: BTreeSet<NodeId> = IDS.into();
        for g in [LOG_GROUP, MEM_GROUP] {
            ctx.raft(g).initialize(members.clone()).await.expect("initialize");
        }
    });
}

fn by_id(nodes: &[Option<Node>], id: NodeId) -> &Node {
    nodes[(id - 1) as usize].as_ref().unwrap()
}

#[test]
fn three_nodes_over_tcp_replicate_and_a_restarted_follower_catches_up() {
    let root = tempfile::tempdir().unwrap();
    let addrs: BTreeMap<NodeId, SocketAddr> = IDS.iter().map(|&id| (id, free_addr())).collect();
    let dir = |id: NodeId| root.path().join(format!("node{id}"));
    let mut nodes: Vec<Option<Node>> = IDS
        .iter()
        .map(|&id| Some(Node::start(config(id, &addrs), addrs[&id])))
        .collect();
    for &id in &IDS {
        start_groups(by_id(&nodes, id), dir(id));
    }
    initialize(by_id(&nodes, 1));
    let all: Vec<&Node> = nodes.iter().map(|n| n.as_ref().unwrap()).collect();
    let leader = wait_leader(&all, LOG_GROUP);
    let mem_leader = wait_leader(&all, MEM_GROUP);
    let last = write(by_id(&nodes, leader), LOG_GROUP, "w", 20);
    let mem_last = write(by_id(&nodes, mem_leader), MEM_GROUP, "m", 10);
    wait_applied(&all, LOG_GROUP, last);
    wait_applied(&all, MEM_GROUP, mem_last);
    let hw = committed_offset(by_id(&nodes, leader));
    assert_eq!(hw, 20 * 5, "every record of every entry");
    for n in &all {
        assert_eq!(committed_offset(n), hw, "node {}'s high watermark", n.id);
    }

    // Two groups, one connection per peer; heartbeats only in 0x42 frames.
    let l = by_id(&nodes, leader);
    wait_until("the leader's heartbeats", || {
        l.call(|ctx| async move { ctx.stats.heartbeats_sent.get() }) > 0
    });
    let (connects, hb_frames, hbs, appends) = l.call(|ctx| async move {
        let s = &ctx.stats;
        (
            s.connects.get(),
            s.sent_of(RaftKind::Heartbeats as u8),
            s.heartbeats_sent.get(),
            s.sent_of(RaftKind::AppendEntries as u8),
        )
    });
    assert_eq!(connects, 2, "one connection to each peer, shared by both groups");
    for n in &all {
        let empty = n.call(|ctx| async move { ctx.stats.empty_appends_received.get() });
        assert_eq!(
            empty, 0,
            "no heartbeat travels to node {} as an AppendEntries of its own",
            n.id
        );
    }
    assert!(
        appends > 0 && hb_frames > 0,
        "entries in 0x40, heartbeats in 0x42"
    );
    assert!(hbs >= hb_frames, "each Heartbeats frame carries one or more");
    drop(all);

    // A follower stops (its groups shut down, its logs close); the leader
    // writes on; the follower restarts from its directories and catches up.
    let follower = IDS.into_iter().find(|&i| i != leader).unwrap();
    nodes[(follower - 1) as usize].take().unwrap().stop();
    let last = write(by_id(&nodes, leader), LOG_GROUP, "x", 15);
    let node = Node::start(config(follower, &addrs), addrs[&follower]);
    // Only the group whose log is on disk comes back: a memory log
    // restarted empty would be a replica that lost what it acknowledged.
    let d = dir(follower);
    node.call(move |ctx| async move { ctx.start_log(LOG_GROUP, &d).await });
    nodes[(follower - 1) as usize] = Some(node);
    let all: Vec<&Node> = nodes.iter().map(|n| n.as_ref().unwrap()).collect();
    wait_applied(&all, LOG_GROUP, last);
    let hw = committed_offset(by_id(&nodes, leader));
    assert_eq!(hw, 35 * 5);
    for n in &all {
        assert_eq!(committed_offset(n), hw, "node {} caught up", n.id);
    }
    let (connects, lost) = by_id(&nodes, leader)
        .call(|ctx| async move { (ctx.stats.connects.get(), ctx.stats.connections_lost.get()) });
    assert!(lost >= 1, "the leader saw its connection to the follower go");
    assert!(connects >= 3, "and opened a new one to the restarted follower");
    drop(all);
    for n in nodes.into_iter().flatten() {
        n.stop();
    }
    let first = log_files(&dir(1));
    assert!(first.len() > 1, "the log rolled");
    for id in [2, 3] {
        assert_eq!(
            log_files(&dir(id)),
            first,
            "node {id}'s segment files are byte-identical"
        );
    }
}

#[test]
fn connections_cut_under_the_nodes_reconnect() {
    let real: BTreeMap<NodeId, SocketAddr> = IDS.iter().map(|&id| (id, free_addr())).collect();
    // Every node reaches every other through a proxy.
    let proxies: BTreeMap<NodeId, Proxy> = IDS.iter().map(|&id| (id, Proxy::start(real[&id]))).collect();
    let via: BTreeMap<NodeId, SocketAddr> = proxies.iter().map(|(&id, p)| (id, p.addr)).collect();
    let nodes: Vec<Node> = IDS
        .iter()
        .map(|&id| Node::start(config(id, &via), real[&id]))
        .collect();
    for n in &nodes {
        n.call(|ctx| async move { ctx.start_mem(MEM_GROUP).await });
    }
    nodes[0].call(|ctx| async move {
        ctx.raft(MEM_GROUP)
            .initialize(BTreeSet::from(IDS))
            .await
            .expect("initialize");
    });
    let all: Vec<&Node> = nodes.iter().collect();
    let leader = wait_leader(&all, MEM_GROUP);
    let l = &nodes[(leader - 1) as usize];
    let last = write(l, MEM_GROUP, "a", 5);
    wait_applied(&all, MEM_GROUP, last);
    let total = |what: fn(&TransportStats) -> u64| -> u64 {
        nodes
            .iter()
            .map(|n| n.call(move |ctx| async move { what(&ctx.stats) }))
            .sum()
    };
    let before = total(|s| s.connects.get());

    let cut: usize = proxies.values().map(Proxy::cut).sum();
    assert!(
        cut >= 4,
        "the leader's connections to both followers were open: {cut} sockets"
    );
    wait_until("the nodes notice their lost connections", || {
        total(|s| s.connections_lost.get()) >= 2
    });
    // Whoever leads now (the cut may have cost the leader its term)
    // reaches both followers again.
    let leader = wait_leader(&all, MEM_GROUP);
    let last = write(&nodes[(leader - 1) as usize], MEM_GROUP, "b", 5);
    wait_applied(&all, MEM_GROUP, last);
    let after = total(|s| s.connects.get());
    assert!(
        after >= before + 2,
        "connections were opened again ({before} -> {after})"
    );
    let states: Vec<_> = nodes
        .iter()
        .map(|n| n.call(|ctx| async move { ctx.mems.borrow()[&MEM_GROUP].1.state().applied }))
        .collect();
    assert!(
        states.iter().all(|s| *s == states[0]),
        "every replica applied the same entries"
    );
    for n in nodes {
        n.stop();
    }
}
