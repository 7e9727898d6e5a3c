//! The raft listener of a cluster node (`--raft-addr`), driven by hand as a
//! peer would: every shard accepts, the connection is served by the shard
//! its preamble names (handed over when another shard accepted it), a
//! frame for a group the node does not have is answered `unknown_group`,
//! and what is not a peer of this cluster is refused and counted.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{free_port, wait_for, Broker};
use es_raft::openraft::raft::VoteRequest;
use es_raft::transport::frame::{self, RaftKind};
use es_raft::transport::{cluster_hash, codec, Preamble};

/// The hash every node of the roster {1, 2} puts in its preamble.
fn roster_hash() -> u64 {
    cluster_hash("es-cluster:1,2")
}

fn node_one(shards: usize, raft: u16) -> Broker {
    let peers = format!("1=127.0.0.1:{raft},2=127.0.0.1:{}", free_port());
    let raft_addr = format!("127.0.0.1:{raft}");
    Broker::start_with(&[
        "--shards",
        &shards.to_string(),
        "--node-id",
        "1",
        "--peers",
        &peers,
        "--raft-addr",
        &raft_addr,
        "--raft-insecure",
        "--spin-before-park-us",
        "0",
        "--disk-threads",
        "2",
    ])
}

fn connect(raft: u16, p: Preamble) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", raft)).expect("connect to --raft-addr");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(&p.encode()).expect("preamble");
    s
}

/// Sends a Vote for `group` and reads the answer's kind and payload.
fn vote(s: &mut TcpStream, group: u64, request_id: u64) -> (RaftKind, Vec<u8>) {
    let rpc = VoteRequest::new(es_raft::Vote::new(1, 2), None);
    let mut payload = Vec::new();
    codec::encode_vote(&mut payload, group, &rpc);
    s.write_all(&frame::encode(RaftKind::Vote, request_id, &payload))
        .expect("send a Vote");
    let mut head = [0u8; 16];
    s.read_exact(&mut head).expect("an answer's header");
    let h = frame::check(&head).expect("a raft frame");
    assert_eq!(h.request_id, request_id);
    let mut body = vec![0u8; h.payload_len];
    s.read_exact(&mut body).expect("an answer's payload");
    (h.kind, body)
}

/// Whether the broker closed `s` (a refused connection is closed unanswered).
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

#[test]
fn each_connection_is_served_by_the_shard_its_preamble_names() {
    let raft = free_port();
    let b = node_one(2, raft);
    let conns = 8;
    for i in 0..conns {
        let mut s = connect(
            raft,
            Preamble {
                source_node: 2,
                source_shard: 1,
                dest_shard: 1,
                cluster_hash: roster_hash(),
            },
        );
        let (kind, body) = vote(&mut s, 42, i);
        assert_eq!(kind, RaftKind::Error, "no group 42 on this node");
        let e = codec::decode_error(body.into()).expect("an Error frame");
        assert_eq!(e.code, "unknown_group", "{e:?}");
        assert!(e.message.contains("42"), "{e:?}");
    }
    // Whichever shard the kernel gave each connection to, shard 1 served it.
    wait_for("shard 1 to count the connections", || {
        b.metric("es_raft_connections_accepted_total{shard=\"1\"}") == Some(conns as f64)
    });
    assert_eq!(
        b.metric("es_raft_connections_accepted_total{shard=\"0\"}"),
        Some(0.0)
    );
    assert_eq!(
        b.metric_sum("es_raft_connections_refused_total"),
        None,
        "none refused"
    );
    // The cluster's families are docs/api.md's `es_raft_` rows (a
    // standalone broker exports none: metrics.rs skips them).
    let doc = include_str!("../../docs/api.md");
    let documented: std::collections::BTreeSet<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `es_raft_"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let text = b.metrics_text();
    let exported: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE es_raft_"))
        .filter_map(|l| l.split(' ').next())
        .collect();
    // The refusals' family has a series per reason, none before the first;
    // leader and term have a series per partition, and there is none here.
    let missing: Vec<&str> = documented.difference(&exported).copied().collect();
    assert_eq!(
        missing,
        ["connections_refused_total", "leader", "term"],
        "es_raft_ families not exported"
    );
    assert!(
        exported.is_subset(&documented),
        "es_raft_ families not in docs/api.md: {:?}",
        exported.difference(&documented).collect::<Vec<_>>()
    );
}

#[test]
fn strangers_other_clusters_and_missing_shards_are_refused() {
    let raft = free_port();
    let b = node_one(1, raft);
    let peer = Preamble {
        source_node: 2,
        source_shard: 0,
        dest_shard: 0,
        cluster_hash: roster_hash(),
    };
    // An HTTP client on the wrong port.
    let mut s = TcpStream::connect(("127.0.0.1", raft)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(b"GET /v1/topics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(closed(&mut s));
    let cases = [
        (
            Preamble {
                cluster_hash: cluster_hash("es-cluster:1,2,3"),
                ..peer
            },
            "cluster",
        ),
        (
            Preamble {
                dest_shard: 3,
                ..peer
            },
            "wrong_shard",
        ),
        (
            Preamble {
                source_node: 9,
                ..peer
            },
            "preamble",
        ),
    ];
    for (p, _) in &cases {
        let mut s = connect(raft, *p);
        assert!(closed(&mut s), "{p:?} is refused");
    }
    for reason in ["preamble", "cluster", "wrong_shard"] {
        let want = if reason == "preamble" { 2.0 } else { 1.0 };
        wait_for(&format!("{want} refusals for {reason}"), || {
            b.metric(&format!(
                "es_raft_connections_refused_total{{shard=\"0\",reason=\"{reason}\"}}"
            )) == Some(want)
        });
    }
    // A peer of this cluster is still served.
    let mut s = connect(raft, peer);
    assert_eq!(vote(&mut s, 7, 1).0, RaftKind::Error);
    assert!(b.stderr_text().contains("--shards must be equal on every node"));
}
