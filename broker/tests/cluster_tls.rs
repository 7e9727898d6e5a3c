//! Mutual TLS between es-broker processes (`--peer-cert/--peer-key/
//! --peer-ca`, certificates made here with rcgen naming `es-node-<id>`):
//! nodes 1 and 2 form a cluster over TLS and agree on its id; then each
//! peer that is not who it says is refused by them, counted
//! (`es_raft_connections_refused_total{reason}`) and logged, and never
//! joins, while the two keep their leader: a connection that offers no
//! client certificate, a node 3 whose certificate another CA signed, and
//! a node 3 presenting node 2's certificate. The real node 3, with its own
//! certificate, then joins. raft/tests/transport_tls.rs covers the same
//! refusals in process; this covers the flags and the broker's wiring.

mod cluster_common;
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use cluster_common::*;
use common::{wait_for, Broker};
use es_raft::transport::preamble::cluster_field;
use es_raft::transport::{cluster_hash, Preamble};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// Refusals of `reason` by nodes 1 and 2 together.
fn refusals(nodes: &[&Broker], reason: &str) -> f64 {
    nodes.iter().map(|b| refused(b, reason)).sum()
}

/// Opens a raft connection to `port` as node 3 would (its preamble), then
/// a TLS handshake that offers no client certificate.
fn connect_without_certificate(port: u16, pki: &Pki) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(common::hang_guard())).unwrap();
    let p = Preamble {
        source_node: 3,
        source_shard: 0,
        dest_shard: 0,
        cluster_hash: cluster_field(cluster_hash("es-cluster:1,2,3"), 0),
    };
    s.write_all(&p.encode()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(pki.ca_path()).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("es-node-1").unwrap()).unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut s);
    // The server refuses the handshake (TLS 1.3: after the client's
    // Finished, so the refusal shows on the first read).
    let _ = tls.write_all(&[0; 24]);
    let mut buf = [0u8; 16];
    let got = tls.read(&mut buf);
    assert!(
        !matches!(got, Ok(n) if n > 0),
        "a peer without a client certificate got an answer: {got:?}"
    );
}

#[test]
fn nodes_with_certificates_form_a_cluster_and_refuse_impostors() {
    let pki = Pki::new("es peer CA");
    let other = Pki::new("another CA");
    let (ports, peers) = raft_ports(3);
    let n1 = start_node(1, &ports, &peers, &pki.flags("es-node-1"));
    let n2 = start_node(2, &ports, &peers, &pki.flags("es-node-2"));
    let pair = [&n1, &n2];
    let mut cluster = (0, String::new());
    wait_for("nodes 1 and 2 to elect a controller over TLS", || {
        agreed(&pair, &[(1, &n1), (2, &n2)])
            .map(|a| cluster = a)
            .is_some()
    });
    let (_, id) = cluster.clone();
    for b in pair {
        assert_eq!(refusals(&[b], "tls") + refusals(&[b], "peer_name"), 0.0);
        assert!(!b.stderr_text().contains("raft connection refused"));
    }
    wait_for("cluster.json to record the cluster id", || {
        pair.iter().all(|b| recorded_id(b) == id.as_str())
    });

    // A connection that offers no client certificate.
    connect_without_certificate(ports[0], &pki);
    wait_for("node 1 to refuse a peer without a certificate", || {
        refused(&n1, "tls") >= 1.0
    });
    assert!(
        n1.stderr_text().contains("raft connection refused") && n1.stderr_text().contains("reason=\"tls\""),
        "{}",
        n1.stderr_text()
    );

    // Node 3 with a certificate of another CA: neither end trusts the other.
    let mut n3 = start_node(3, &ports, &peers, &other.flags("es-node-3"));
    let tls_before = refusals(&pair, "tls");
    wait_for("nodes 1 and 2 to refuse a certificate of another CA", || {
        refusals(&pair, "tls") > tls_before
    });
    let v3 = view(&n3).unwrap();
    assert!(v3["controller"]["leader"].is_null(), "node 3 found no peer: {v3}");
    assert_eq!(n3.get("/ready").0, 503);
    n3.kill9();

    // Node 3 presenting node 2's certificate (the right CA): refused, the
    // certificate does not name the node its preamble claims.
    let mut n3 = start_node(3, &ports, &peers, &pki.flags("es-node-2"));
    wait_for("nodes 1 and 2 to refuse node 3 speaking as es-node-2", || {
        refusals(&pair, "peer_name") >= 1.0
    });
    let said: String = pair.iter().map(|b| b.stderr_text()).collect();
    assert!(
        said.contains("reason=\"peer_name\"") && said.contains("does not name es-node-3"),
        "{said}"
    );
    let v3 = view(&n3).unwrap();
    assert!(v3["controller"]["leader"].is_null(), "{v3}");
    n3.kill9();

    // Through all of it, 1 and 2 kept a leader and node 3 never registered.
    let (leader, same_id) = agreed(&pair, &[(1, &n1), (2, &n2)]).expect("1 and 2 still agree");
    assert_eq!(same_id, id);
    assert!(leader == 1 || leader == 2);
    let v = view(&n1).unwrap();
    assert_eq!(node_of(&v, 3)["registered"], false, "{v}");
    assert_eq!(node_of(&v, 3)["state"], "unreachable", "{v}");

    // The real node 3 joins.
    let n3 = start_node(3, &ports, &peers, &pki.flags("es-node-3"));
    let all = [(1, &n1), (2, &n2), (3, &n3)];
    wait_for("node 3 to join with its own certificate", || {
        agreed(&[&n1, &n2, &n3], &all).is_some_and(|(_, i)| i == id)
    });
    wait_for("node 3 to record the cluster id", || {
        recorded_id(&n3) == id.as_str()
    });
    wait_for("node 3 to be ready", || n3.get("/ready").0 == 200);
}
