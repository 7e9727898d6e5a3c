//! What an operator sees of a 3-node cluster (es-broker processes on
//! loopback): `/ready` waits for a controller leader; `GET /v1/cluster`
//! and the binary DescribeCluster give the same document (nodes up or
//! unreachable with when they last answered, the controller's leader,
//! term and committed index); `es_raft_peer_connected` and the
//! controller gauges follow; a node is ready again once the replicas of
//! a new topic are open on it; every node records the agreed cluster id in
//! `cluster.json`; and a node whose data dir belongs to another cluster is
//! refused by the others (`reason="cluster"`, logged) and does not join.

mod cluster_common;
mod common;

use cluster_common::*;
use common::{wait_for, Broker};
use es_protocol::client::{Client, Options};
use es_protocol::Kind;
use serde_json::{json, Value};

fn insecure() -> Vec<String> {
    vec!["--raft-insecure".to_string()]
}

fn describe_binary(b: &Broker) -> Value {
    let c = Client::connect(
        &b.binary_addr(),
        Options {
            client_id: "cluster-ops".into(),
            ..Options::default()
        },
    )
    .expect("connect and handshake");
    c.admin(Kind::DescribeCluster, json!({}))
        .expect("DescribeCluster")
}

#[test]
fn the_cluster_view_readiness_and_a_node_of_another_cluster() {
    let (ports, peers) = raft_ports(3);
    let n1 = start_node(1, &ports, &peers, &insecure());
    // Alone, node 1 recovered but has no controller leader: not ready.
    let (status, body) = n1.get("/ready");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "no_controller_leader", "{body}");
    assert_eq!(body["recovered"], true, "{body}");
    let alone = view(&n1).expect("the view answers without a leader");
    assert!(alone["controller"]["leader"].is_null(), "{alone}");
    assert!(alone["cluster_id"].is_null(), "no id before a leader: {alone}");
    for peer in [2, 3] {
        let n = node_of(&alone, peer);
        assert_eq!(n["state"], "unreachable", "{alone}");
        assert!(n["last_seen_ms_ago"].is_null(), "{alone}");
    }
    assert!(recorded_id(&n1).is_null());

    let n2 = start_node(2, &ports, &peers, &insecure());
    let mut n3 = start_node(3, &ports, &peers, &insecure());
    let mut cluster = (0, String::new());
    wait_for("three nodes to agree on a leader and an id, all up", || {
        agreed(&[&n1, &n2, &n3], &[(1, &n1), (2, &n2), (3, &n3)])
            .map(|a| cluster = a)
            .is_some()
    });
    let (leader, id) = cluster;
    for b in [&n1, &n2, &n3] {
        wait_for("the node to be ready", || b.get("/ready").0 == 200);
        wait_for("the id in cluster.json", || recorded_id(b) == id.as_str());
    }

    // A topic whose replicas every node opens: each node is ready again
    // once its replicas are open (the reconciler counts them down).
    let (status, body) = n1.post(
        "/v1/topics",
        json!({"name": "t", "partitions": 2, "replication_factor": 3}),
    );
    assert_eq!(status, 201, "{body}");
    for b in [&n1, &n2, &n3] {
        wait_for("the node to open its replicas and be ready", || {
            b.get("/ready").0 == 200 && view(b).is_some_and(|v| v["partitions"]["total"] == 2)
        });
    }

    // The document, over HTTP and the binary protocol alike.
    let v = view(&n1).unwrap();
    assert_eq!(v["node_id"], 1);
    assert_eq!(v["partitions"]["total"], 2, "{v}");
    assert!(v["controller"]["term"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["controller"]["committed"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(node_of(&v, 1)["last_seen_ms_ago"], 0, "this node: {v}");
    assert!(node_of(&v, 2)["last_seen_ms_ago"].is_u64(), "{v}");
    let b = describe_binary(&n2);
    assert_eq!(b["node_id"], 2, "{b}");
    assert_eq!(b["cluster_id"], id.as_str(), "{b}");
    assert_eq!(b["controller"]["leader"], leader, "{b}");
    assert_eq!(b["nodes"].as_array().unwrap().len(), 3, "{b}");
    assert_eq!(node_of(&b, 3)["state"], "up", "{b}");

    // The metrics.
    for peer in ["2", "3"] {
        let s = format!("es_raft_peer_connected{{node=\"{peer}\"}}");
        wait_for("node 1 to count its peers connected", || {
            n1.metric(&s) == Some(1.0)
        });
    }
    assert_eq!(n1.metric("es_raft_controller_leader"), Some(leader as f64));
    assert!(n1.metric("es_raft_controller_term").unwrap() >= 1.0);
    assert!(n1.metric("es_raft_controller_elections_total").unwrap() >= 1.0);
    assert!(n1.metric("es_raft_controller_applied_index").unwrap() >= 1.0);

    // Node 3 goes: unreachable, last seen some time ago; the others stay
    // ready (two of three hold the controller's majority).
    n3.kill9();
    wait_for("node 1 to see node 3 unreachable", || {
        view(&n1).is_some_and(|v| node_of(&v, 3)["state"] == "unreachable")
    });
    let v = view(&n1).unwrap();
    assert!(node_of(&v, 3)["last_seen_ms_ago"].is_u64(), "{v}");
    assert_eq!(node_of(&v, 3)["registered"], true, "{v}");
    assert_eq!(n1.metric("es_raft_peer_connected{node=\"3\"}"), Some(0.0));
    wait_for("nodes 1 and 2 ready without node 3", || {
        n1.get("/ready").0 == 200 && n2.get("/ready").0 == 200
    });

    // A node 3 whose data dir belongs to another cluster, on node 3's
    // address: refused both ways, it never has a leader, keeps its id.
    let stranger_args = node_args(3, &ports, &peers, &insecure());
    let stranger_args: Vec<&str> = stranger_args.iter().map(String::as_str).collect();
    let before = refused(&n1, "cluster") + refused(&n2, "cluster");
    let stranger = Broker::start_prepared(1, &stranger_args, |data| {
        std::fs::create_dir_all(data).unwrap(); // test setup: another cluster's data dir
        std::fs::write(
            data.join("cluster.json"),
            r#"{"cluster_id":"another-cluster","node_id":3,"nodes":[1,2,3]}"#,
        )
        .unwrap();
    });
    wait_for("nodes 1 and 2 to refuse the node of another cluster", || {
        refused(&n1, "cluster") + refused(&n2, "cluster") > before
    });
    wait_for("the stranger to refuse them too", || {
        refused(&stranger, "cluster") >= 1.0
    });
    let said: String = [&n1, &n2].iter().map(|b| b.stderr_text()).collect();
    assert!(
        said.contains("belongs to another cluster") && said.contains("its cluster id"),
        "{said}"
    );
    let (status, body) = stranger.get("/ready");
    assert_eq!(
        (status, body["status"].as_str()),
        (503, Some("no_controller_leader")),
        "{body}"
    );
    let s = view(&stranger).unwrap();
    assert!(s["controller"]["leader"].is_null(), "{s}");
    assert_eq!(recorded_id(&stranger), "another-cluster");
    let v = view(&n1).unwrap();
    assert_eq!(v["cluster_id"], id.as_str());
    assert_eq!(node_of(&v, 3)["state"], "unreachable", "{v}");
    drop(stranger);

    // The real node 3 comes back from its disk and is up again.
    n3.restart();
    wait_for("node 3 to rejoin", || {
        agreed(&[&n1, &n2, &n3], &[(1, &n1), (2, &n2), (3, &n3)]).is_some_and(|(_, i)| i == id)
    });
}
