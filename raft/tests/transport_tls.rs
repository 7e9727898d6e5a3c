//! Mutual TLS between raft peers: a 3-node cluster whose certificates
//! (read from PEM files, as `--peer-cert/--peer-key/--peer-ca` give them)
//! name `es-node-<id>` replicates; and the refusals, each counted by the
//! server and failing the client's RPC as `Unreachable`, with no panic: no
//! client certificate, a certificate from another CA, node 3 presenting a
//! certificate for `es-node-2`, a plaintext peer, and a server that is not
//! the node the client dialled.

mod common;
mod net;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_raft::mem_store::{MemLog, MemSm};
use es_raft::openraft::error::RPCError;
use es_raft::openraft::network::RPCOption;
use es_raft::openraft::raft::VoteRequest;
use es_raft::openraft::{EmptyNode, Raft, RaftNetwork, RaftNetworkFactory};
use es_raft::transport::{
    cluster_hash, GroupRegistry, InflightBudget, PeerTls, RaftServer, ShardNetwork, TransportConfig,
    TransportStats,
};
use es_raft::{Applied, NodeId, Proposal, Vote};
use es_storage::batch::encode;
use es_storage::{BatchBuf, Offset, ProducerStamp, Record};
use glommio::net::TcpListener;
use net::*;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

const IDS: [NodeId; 3] = [1, 2, 3];
const GROUP: u64 = 5;
const HASH: &str = "tls-test";

fn tls(leaf: &Leaf, ca: &Ca) -> Arc<PeerTls> {
    Arc::new(
        PeerTls::new(
            vec![CertificateDer::from(leaf.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der.clone())),
            vec![CertificateDer::from(ca.der())],
        )
        .unwrap(),
    )
}

#[test]
fn a_cluster_with_certificates_replicates() {
    let ca = Ca::new("es peers");
    let files = tempfile::tempdir().unwrap();
    let addrs: BTreeMap<NodeId, SocketAddr> = IDS.iter().map(|&id| (id, free_addr())).collect();
    let nodes: Vec<Node> = IDS
        .iter()
        .map(|&id| {
            let leaf = ca.leaf(&format!("es-node-{id}"));
            let (cert, key, ca_path) = write_pem(files.path(), &format!("node{id}"), &leaf, &ca);
            let mut config = TransportConfig::new(id, addrs.clone(), cluster_hash(HASH));
            config.tls = Some(Arc::new(PeerTls::from_pem_files(&cert, &key, &ca_path).unwrap()));
            Node::start(config, addrs[&id])
        })
        .collect();
    for n in &nodes {
        n.call(|ctx| async move { ctx.start_mem(GROUP).await });
    }
    nodes[0].call(|ctx| async move {
        ctx.raft(GROUP)
            .initialize(BTreeSet::from(IDS))
            .await
            .expect("initialize");
    });
    let all: Vec<&Node> = nodes.iter().collect();
    let leader = wait_leader(&all, GROUP);
    let l = &nodes[(leader - 1) as usize];
    let last = l.call(|ctx| async move {
        let raft = ctx.raft(GROUP);
        for i in 0..10 {
            let mut b = Vec::new();
            let rec = Record {
                key: None,
                value: format!("v{i}").into_bytes(),
                timestamp_ms: 1,
            };
            encode(Offset(0), &[rec], ProducerStamp::NONE, &mut b);
            let r = raft
                .client_write(Proposal::Batches(vec![BatchBuf::from(b)]))
                .await
                .unwrap();
            assert_eq!(r.data, Applied::Offsets(vec![i]));
        }
        raft.metrics().borrow().last_applied.unwrap().index
    });
    wait_applied(&all, GROUP, last);
    for n in &nodes {
        let (refused, accepted) = n.call(|ctx| async move {
            (
                ctx.stats.refused.borrow().values().sum::<u64>(),
                ctx.stats.accepted.get(),
            )
        });
        assert_eq!(refused, 0, "node {} refused a peer", n.id);
        if n.id != leader {
            assert!(accepted >= 1, "node {} was reached over TLS", n.id);
        }
    }
    assert_eq!(l.call(|ctx| async move { ctx.stats.connects.get() }), 2);
    for n in nodes {
        n.stop();
    }
}

/// Node 1's server with the right certificate, on this executor.
struct Server {
    server: RaftServer,
    stats: Rc<TransportStats>,
    addrs: BTreeMap<NodeId, SocketAddr>,
    raft: Raft<es_raft::EsRaft>,
}

async fn server(ca: &Ca) -> Server {
    let addrs: BTreeMap<NodeId, SocketAddr> = IDS.iter().map(|&id| (id, free_addr())).collect();
    let mut config = TransportConfig::new(1, addrs.clone(), cluster_hash(HASH));
    config.tls = Some(tls(&ca.leaf("es-node-1"), ca));
    let stats = Rc::new(TransportStats::default());
    let registry = GroupRegistry::default();
    let budget = InflightBudget::new(1 << 20);
    let net = ShardNetwork::new(&config, 0, stats.clone(), budget.clone());
    let raft = Raft::new(
        1,
        common::config(),
        net.group(GROUP),
        MemLog::default(),
        MemSm::default(),
    )
    .await
    .unwrap();
    registry.insert(GROUP, raft.clone());
    let server = RaftServer::new(config, 0, registry, stats.clone(), budget);
    server.start(TcpListener::bind(addrs[&1]).unwrap());
    Server {
        server,
        stats,
        addrs,
        raft,
    }
}

/// Node `id`'s vote to node 1 over `tls` (`None`: plaintext); its stats.
async fn vote_from(
    id: NodeId,
    addrs: &BTreeMap<NodeId, SocketAddr>,
    tls: Option<Arc<PeerTls>>,
) -> (Result<(), String>, Rc<TransportStats>) {
    let mut config = TransportConfig::new(id, addrs.clone(), cluster_hash(HASH));
    config.tls = tls;
    let stats = Rc::new(TransportStats::default());
    let net = ShardNetwork::new(&config, 0, stats.clone(), InflightBudget::new(1 << 20));
    let mut link = net.group(GROUP).new_client(1, &EmptyNode {}).await;
    let r = link
        .vote(
            VoteRequest::new(Vote::new(1, id), None),
            RPCOption::new(Duration::from_secs(5)),
        )
        .await;
    net.close();
    let r = match r {
        Ok(_) => Ok(()),
        Err(RPCError::Unreachable(e)) => Err(e.to_string()),
        Err(other) => panic!("Unreachable expected, got {other:?}"),
    };
    (r, stats)
}

async fn wait_refused(stats: &TransportStats, reason: &str, n: u64) {
    let start = Instant::now();
    while stats.refused(reason) < n {
        assert!(
            start.elapsed() < HANG_GUARD,
            "no refusal for {reason}: {:?}",
            stats.refused
        );
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
}

/// A PeerTls whose client side is `client`; its server side is never used.
fn client_only(client: rustls::ClientConfig) -> Arc<PeerTls> {
    Arc::new(PeerTls::from_configs(unused_server(), Arc::new(client)))
}

fn unused_server() -> Arc<rustls::ServerConfig> {
    let ca = Ca::new("unused");
    let leaf = ca.leaf("es-node-9");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.cert_der)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der)),
        )
        .unwrap();
    Arc::new(server)
}

#[test]
fn refusals_are_counted_and_fail_the_rpc() {
    common::run(async {
        let ca = Ca::new("es peers");
        let s = server(&ca).await;

        // The right certificate: the vote is answered.
        let (r, stats) = vote_from(2, &s.addrs, Some(tls(&ca.leaf("es-node-2"), &ca))).await;
        assert_eq!(r, Ok(()));
        assert_eq!(stats.connects.get(), 1);
        assert_eq!(s.stats.accepted.get(), 1);

        // No client certificate.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(ca.der())).unwrap();
        let anonymous = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let (r, _) = vote_from(2, &s.addrs, Some(client_only(anonymous))).await;
        assert!(r.is_err(), "{r:?}");
        wait_refused(&s.stats, "tls", 1).await;

        // A certificate from another CA (the client trusts the right one).
        let other = Ca::new("someone else");
        let stranger = tls(&other.leaf("es-node-2"), &ca);
        let (r, _) = vote_from(2, &s.addrs, Some(stranger)).await;
        assert!(r.is_err(), "{r:?}");
        wait_refused(&s.stats, "tls", 2).await;

        // Node 3 presenting node 2's certificate.
        let (r, _) = vote_from(3, &s.addrs, Some(tls(&ca.leaf("es-node-2"), &ca))).await;
        assert!(r.is_err(), "{r:?}");
        wait_refused(&s.stats, "peer_name", 1).await;

        // A plaintext peer (`--raft-insecure` on one side only).
        let (r, _) = vote_from(2, &s.addrs, None).await;
        assert!(r.is_err(), "{r:?}");
        wait_refused(&s.stats, "tls", 3).await;

        // The client dials node 2 at node 1's address: node 1's
        // certificate does not name es-node-2, the client refuses it.
        let mut wrong = s.addrs.clone();
        wrong.insert(2, s.addrs[&1]);
        let mut config = TransportConfig::new(3, wrong, cluster_hash(HASH));
        config.tls = Some(tls(&ca.leaf("es-node-3"), &ca));
        let stats = Rc::new(TransportStats::default());
        let net = ShardNetwork::new(&config, 0, stats.clone(), InflightBudget::new(1 << 20));
        let mut link = net.group(GROUP).new_client(2, &EmptyNode {}).await;
        let e = link
            .vote(
                VoteRequest::new(Vote::new(1, 3), None),
                RPCOption::new(Duration::from_secs(5)),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, RPCError::Unreachable(_)), "{e}");
        assert!(e.to_string().contains("TLS"), "{e}");
        assert_eq!(stats.connect_failures.get(), 1);
        net.close();

        assert_eq!(s.stats.accepted.get(), 1, "only the right peer was served");
        s.raft.shutdown().await.unwrap();
        s.server.close();
    });
}
