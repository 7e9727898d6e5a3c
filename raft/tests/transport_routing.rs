//! The transport's routing on one executor: node 1's client side talking to
//! node 2's server over loopback TCP. Heartbeats of many groups to one peer
//! go in one Heartbeats frame, each answered on its own (an unknown or
//! opening group's error does not fail the others); Error frames and a
//! peer that is down become openraft's `Unreachable`; an AppendEntries over
//! `--raft-append-bytes-max` is `PayloadTooLarge`; a connection that is
//! not a raft peer of this cluster is refused and counted.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::{run, HANG_GUARD};
use es_raft::mem_store::{MemLog, MemSm};
use es_raft::openraft::error::RPCError;
use es_raft::openraft::network::RPCOption;
use es_raft::openraft::raft::{AppendEntriesRequest, VoteRequest};
use es_raft::openraft::{EmptyNode, Raft, RaftNetwork, RaftNetworkFactory};
use es_raft::transport::frame::RaftKind;
use es_raft::transport::preamble::Preamble;
use es_raft::transport::{
    cluster_hash, GroupLink, GroupRegistry, InflightBudget, RaftServer, ShardNetwork, TransportConfig,
    TransportStats,
};
use es_raft::{log_id, EntryBatch, EsEntry, EsPayload, GroupId, NodeId, Vote};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

const HASH: &str = "routing-test";

struct Pair {
    client: ShardNetwork,
    server: RaftServer,
    registry: GroupRegistry,
    addrs: BTreeMap<NodeId, SocketAddr>,
}

/// Node 1's client side and node 2's server, on this executor.
fn pair(append_bytes_max: usize) -> Pair {
    let addrs: BTreeMap<NodeId, SocketAddr> = [(1, free_addr()), (2, free_addr())].into();
    let mut c1 = TransportConfig::new(1, addrs.clone(), cluster_hash(HASH));
    c1.append_bytes_max = append_bytes_max;
    let c2 = TransportConfig::new(2, addrs.clone(), cluster_hash(HASH));
    let client = ShardNetwork::new(
        &c1,
        0,
        Rc::new(TransportStats::default()),
        InflightBudget::new(c1.inflight_shard_bytes),
    );
    let registry = GroupRegistry::default();
    let server = RaftServer::new(
        c2.clone(),
        0,
        registry.clone(),
        Rc::new(TransportStats::default()),
        InflightBudget::new(c2.inflight_shard_bytes),
    );
    server.start(TcpListener::bind(addrs[&2]).unwrap());
    Pair {
        client,
        server,
        registry,
        addrs,
    }
}

async fn start_group(
    registry: &GroupRegistry,
    id: NodeId,
    group: GroupId,
    net: &ShardNetwork,
) -> Raft<es_raft::EsRaft> {
    let raft = Raft::new(
        id,
        common::config(),
        net.group(group),
        MemLog::default(),
        MemSm::default(),
    )
    .await
    .unwrap();
    registry.insert(group, raft.clone());
    raft
}

async fn link(net: &ShardNetwork, group: GroupId, target: NodeId) -> GroupLink {
    net.group(group).new_client(target, &EmptyNode {}).await
}

fn heartbeat() -> AppendEntriesRequest<es_raft::EsRaft> {
    AppendEntriesRequest {
        vote: Vote::new_committed(1, 1),
        prev_log_id: None,
        entries: Vec::new(),
        leader_commit: None,
    }
}

fn option() -> RPCOption {
    RPCOption::new(Duration::from_secs(5))
}

async fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG_GUARD, "gave up waiting for {what}");
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn heartbeats_to_a_peer_share_one_frame_and_are_answered_one_by_one() {
    run(async {
        let p = pair(4 << 20);
        let groups: Vec<GroupId> = (1..=20).collect();
        let mut rafts = Vec::new();
        for &g in &groups {
            rafts.push(start_group(&p.registry, 2, g, &p.client).await);
        }
        p.registry.opening(50);
        let mut links = Vec::new();
        for g in groups.iter().copied().chain([50, 99]) {
            links.push(link(&p.client, g, 2).await);
        }
        // Sent together: all are queued before the first flush.
        let answers =
            futures::future::join_all(links.iter_mut().map(|l| l.append_entries(heartbeat(), option())))
                .await;
        for (g, a) in groups.iter().zip(&answers) {
            assert!(a.is_ok(), "group {g}: {a:?}");
        }
        let opening = answers[20].as_ref().unwrap_err();
        assert!(
            matches!(opening, RPCError::Unreachable(_)) && opening.to_string().contains("not_ready"),
            "{opening}"
        );
        let unknown = answers[21].as_ref().unwrap_err();
        assert!(
            matches!(unknown, RPCError::Unreachable(_)) && unknown.to_string().contains("unknown_group"),
            "{unknown}"
        );

        let s = p.client.stats();
        assert_eq!(
            s.sent_of(RaftKind::Heartbeats as u8),
            1,
            "22 heartbeats, one frame"
        );
        assert_eq!(s.heartbeats_sent.get(), 22);
        assert_eq!(s.sent_of(RaftKind::AppendEntries as u8), 0);
        assert_eq!(p.server.stats().received_of(RaftKind::Heartbeats as u8), 1);
        assert_eq!(s.connects.get(), 1, "one connection for every group");

        // The receiving groups saw the leader's vote.
        for r in &rafts {
            assert_eq!(r.metrics().borrow().vote, Vote::new_committed(1, 1));
        }
        for r in rafts {
            r.shutdown().await.unwrap();
        }
        p.server.close();
        p.client.close();
    });
}

fn data_entry(index: u64, bytes: usize) -> EsEntry {
    let mut b = vec![0u8; bytes.max(56)];
    let n = b.len() as u32;
    b[8..12].copy_from_slice(&n.to_le_bytes());
    EsEntry {
        log_id: log_id(1, index),
        payload: EsPayload::Batches(vec![EntryBatch::Shared(b.into())]),
    }
}

#[test]
fn votes_appends_and_errors_map_to_what_openraft_expects() {
    run(async {
        let p = pair(10_000);
        let raft = start_group(&p.registry, 2, 7, &p.client).await;
        let mut l7 = link(&p.client, 7, 2).await;
        let v = l7
            .vote(VoteRequest::new(Vote::new(3, 1), None), option())
            .await
            .expect("the vote is answered");
        assert!(v.vote_granted, "{v:?}");

        // Several entries over the byte limit: openraft is told how many fit.
        let big = AppendEntriesRequest {
            vote: Vote::new_committed(3, 1),
            prev_log_id: None,
            entries: (0..3).map(|i| data_entry(i, 4000)).collect(),
            leader_commit: None,
        };
        match l7.append_entries(big, option()).await {
            Err(RPCError::PayloadTooLarge(e)) => assert_eq!(e.entries_hint(), 2, "{e}"),
            other => panic!("PayloadTooLarge expected, got {other:?}"),
        }
        // One entry always goes, whatever its size; the follower answers.
        let one = AppendEntriesRequest {
            vote: Vote::new_committed(3, 1),
            prev_log_id: None,
            entries: vec![data_entry(0, 20_000)],
            leader_commit: None,
        };
        l7.append_entries(one, option()).await.expect("one entry goes");
        assert_eq!(p.client.stats().sent_of(RaftKind::AppendEntries as u8), 1);

        // A group the peer does not have, and a peer that is not up.
        let mut l8 = link(&p.client, 8, 2).await;
        let e = l8
            .vote(VoteRequest::new(Vote::new(3, 1), None), option())
            .await
            .unwrap_err();
        assert!(
            matches!(e, RPCError::Unreachable(_)) && e.to_string().contains("unknown_group"),
            "{e}"
        );
        p.server.close();
        let cfg = TransportConfig::new(1, [(3, free_addr())].into(), cluster_hash(HASH));
        let down = ShardNetwork::new(
            &cfg,
            0,
            Rc::new(TransportStats::default()),
            InflightBudget::new(1 << 20),
        );
        let mut l3 = link(&down, 7, 3).await;
        for _ in 0..2 {
            let e = l3
                .vote(VoteRequest::new(Vote::new(3, 1), None), option())
                .await
                .unwrap_err();
            assert!(matches!(e, RPCError::Unreachable(_)), "{e}");
        }
        assert!(down.stats().connect_failures.get() >= 1);
        let mut l9 = link(&down, 7, 9).await;
        let e = l9
            .vote(VoteRequest::new(Vote::new(3, 1), None), option())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not a known peer"), "{e}");
        raft.shutdown().await.unwrap();
        p.client.close();
    });
}

#[test]
fn connections_that_are_not_this_clusters_peers_are_refused() {
    run(async {
        let p = pair(4 << 20);
        let _raft = start_group(&p.registry, 2, 7, &p.client).await;
        let stats = p.server.stats().clone();
        let to = p.addrs[&2];
        let preamble = |node, hash| {
            Preamble {
                source_node: node,
                source_shard: 0,
                dest_shard: 0,
                cluster_hash: hash,
            }
            .encode()
        };
        let cases: [(&str, [u8; 32]); 4] = [
            (
                "preamble",
                *b"GET / HTTP/1.1\r\nHost: x\r\n\r\n.....".first_chunk().unwrap(),
            ),
            ("cluster", preamble(1, cluster_hash("another cluster"))),
            ("preamble", preamble(9, cluster_hash(HASH))),
            ("wrong_shard", {
                let mut p = Preamble::decode(&preamble(1, cluster_hash(HASH))).unwrap();
                p.dest_shard = 3;
                p.encode()
            }),
        ];
        for (i, (reason, bytes)) in cases.iter().enumerate() {
            let before = stats.refused(reason);
            let mut s = TcpStream::connect(to).await.unwrap();
            s.write_all(bytes).await.unwrap();
            let mut buf = [0u8; 16];
            // The server closes the connection without a word.
            assert_eq!(s.read(&mut buf).await.unwrap_or(0), 0, "case {i}");
            wait_for(reason, || stats.refused(reason) > before).await;
        }
        // A raft peer whose first frame is garbage: the connection closes,
        // nothing else happens.
        let mut s = TcpStream::connect(to).await.unwrap();
        s.write_all(&preamble(1, cluster_hash(HASH))).await.unwrap();
        s.write_all(&[0xff; 16]).await.unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(s.read(&mut buf).await.unwrap_or(0), 0);
        assert_eq!(stats.accepted.get(), 1);
        p.server.close();
        p.client.close();
    });
}

#[test]
fn a_connection_handed_over_after_its_preamble_is_served() {
    run(async {
        // Node 2 accepts on its own listener, reads the preamble (as the
        // accepting shard does) and hands the connection to `serve` (as
        // the owning shard does).
        let addrs: BTreeMap<NodeId, SocketAddr> = [(1, free_addr()), (2, free_addr())].into();
        let c1 = TransportConfig::new(1, addrs.clone(), cluster_hash(HASH));
        let c2 = TransportConfig::new(2, addrs.clone(), cluster_hash(HASH));
        let client = ShardNetwork::new(
            &c1,
            0,
            Rc::new(TransportStats::default()),
            InflightBudget::new(1 << 20),
        );
        let registry = GroupRegistry::default();
        let server = RaftServer::new(
            c2,
            0,
            registry.clone(),
            Rc::new(TransportStats::default()),
            InflightBudget::new(1 << 20),
        );
        let raft = start_group(&registry, 2, 7, &client).await;
        let listener = TcpListener::bind(addrs[&2]).unwrap();
        let s2 = server.clone();
        let accepted = glommio::spawn_local(async move {
            let stream = listener.accept().await.unwrap();
            let (stream, preamble) = s2.read_preamble(stream).await.unwrap();
            assert_eq!((preamble.source_node, preamble.dest_shard), (1, 0));
            s2.serve(stream, preamble);
        });
        let mut l = link(&client, 7, 2).await;
        let v = l
            .vote(VoteRequest::new(Vote::new(2, 1), None), option())
            .await
            .unwrap();
        assert!(v.vote_granted);
        accepted.await;
        assert_eq!(server.stats().accepted.get(), 1);
        raft.shutdown().await.unwrap();
        server.close();
        client.close();
    });
}
