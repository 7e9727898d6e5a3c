//! Three es-broker processes on loopback form a cluster: the controller
//! group elects a leader, agrees on a cluster id, and every node registers
//! its client addresses in it (`GET /v1/cluster` on each node says the
//! same); the leader killed with -9, the two others elect another, and
//! the killed node rejoins from its disk.

mod common;

use serde_json::Value;

use common::{free_port, wait_for, Broker};

fn start_cluster() -> Vec<Broker> {
    let raft: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers = raft
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}=127.0.0.1:{p}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    (0..3)
        .map(|i| {
            Broker::start_with(&[
                "--shards",
                "1",
                "--spin-before-park-us",
                "0",
                "--disk-threads",
                "2",
                "--node-id",
                &(i + 1).to_string(),
                "--peers",
                &peers,
                "--raft-addr",
                &format!("127.0.0.1:{}", raft[i]),
                "--raft-insecure",
                "--raft-heartbeat-ms",
                "100",
                "--raft-election-timeout-ms",
                "800",
            ])
        })
        .collect()
}

fn view(b: &Broker) -> Option<Value> {
    match b.try_get("/v1/cluster") {
        Ok((200, v)) => Some(v),
        _ => None,
    }
}

/// The leader every node in `nodes` names, once they all name the same
/// one, know the same cluster id, and list every node registered with the
/// address its process serves HTTP on.
fn agreed(nodes: &[&Broker], all: &[&Broker]) -> Option<u64> {
    let views: Vec<Value> = nodes.iter().map(|b| view(b)).collect::<Option<_>>()?;
    let leader = views[0]["controller"]["leader"].as_u64()?;
    let id = views[0]["cluster_id"].as_str()?.to_string();
    for v in &views {
        if v["controller"]["leader"].as_u64() != Some(leader) || v["cluster_id"].as_str() != Some(&id) {
            return None;
        }
        let listed = v["nodes"].as_array()?;
        if listed.len() != all.len() {
            return None;
        }
        for (i, b) in all.iter().enumerate() {
            let n = &listed[i];
            if n["node_id"] != (i + 1) as u64
                || n["registered"] != true
                || n["http_addr"] != b.addr().to_string()
                || n["binary_addr"] != b.binary_addr()
            {
                return None;
            }
        }
    }
    Some(leader)
}

#[test]
fn three_nodes_agree_on_a_controller_and_survive_its_loss() {
    let mut nodes = start_cluster();
    let all: Vec<&Broker> = nodes.iter().collect();
    let mut leader = 0;
    wait_for("the three nodes to agree on a controller leader", || {
        agreed(&all, &all).map(|l| leader = l).is_some()
    });
    let first = view(&nodes[0]).unwrap();
    assert_eq!(first["node_id"], 1);
    assert_eq!(first["partitions"]["total"], 0);
    let term = first["controller"]["term"].as_u64().unwrap();
    assert!(term >= 1, "{first}");
    // The leader dies; the two others elect one of themselves.
    let gone = leader as usize - 1;
    nodes[gone].kill9();
    {
        let all: Vec<&Broker> = nodes.iter().collect();
        let rest: Vec<&Broker> = nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != gone)
            .map(|(_, b)| b)
            .collect();
        let mut next = 0;
        wait_for("the two others to elect another leader", || {
            agreed(&rest, &all).is_some_and(|l| {
                next = l;
                l != leader
            })
        });
        let v = view(rest[0]).unwrap();
        assert!(v["controller"]["term"].as_u64().unwrap() > term, "{v}");
    }
    // It comes back from its disk and follows.
    nodes[gone].restart();
    let all: Vec<&Broker> = nodes.iter().collect();
    wait_for("the restarted node to agree with the others", || {
        agreed(&all, &all).is_some()
    });
    let cluster = std::fs::read_to_string(nodes[gone].data_dir().join("cluster.json")).unwrap();
    assert!(
        cluster.contains(&format!("\"node_id\":{}", gone + 1)),
        "{cluster}"
    );
}

#[test]
fn a_standalone_broker_has_no_cluster() {
    let b = Broker::start(1);
    let (status, body) = b.get("/v1/cluster");
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found", "{body}");
}
