//! Replicated topics end to end on three `es-broker` processes: topics of
//! replication factor 1, 2 and 3 created through any node (a follower of
//! the controller included) and known on every node; records produced to
//! a partition's leader and read back, identical offsets and bytes, from
//! every replica; a produce to a node that does not lead is `not_leader`
//! with the leader's addresses, one spanning partitions led by different
//! nodes refused whole; a node without a replica redirects reads too;
//! refusals (`topic_exists`, `replication_factor_too_large`); a delete
//! seen by every node, its replicas' files gone.

mod cluster;
mod common;

use serde_json::json;

use common::{wait_for, Broker};

fn values(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag}-{i}")).collect()
}

#[test]
fn replicated_topics_end_to_end() {
    let nodes = cluster::start(3);
    let all: Vec<&Broker> = nodes.iter().collect();
    let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
    let ctl = cluster::controller_leader(&all).unwrap();
    let follower = &nodes[(ctl as usize) % 3]; // not the controller leader
    let leader_node = &nodes[ctl as usize - 1];

    // Creates through any node; the answer carries the factor assigned.
    for (name, rf, via) in [("r3", 3, follower), ("r2", 2, leader_node), ("r1", 1, follower)] {
        let (status, body) = cluster::create(via, name, 1, Some(rf));
        assert_eq!(status, 201, "create {name}: {body}");
        assert_eq!(body["replication_factor"], rf, "{body}");
    }
    let (status, body) = cluster::create(leader_node, "dflt", 1, None);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["replication_factor"], 3, "min(3, nodes) by default: {body}");
    let (status, body) = cluster::create(follower, "r3", 1, Some(3));
    assert_eq!(body["error"]["code"], "topic_exists", "{status} {body}");
    let (status, body) = cluster::create(follower, "big", 1, Some(4));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "replication_factor_too_large", "{body}");

    // Every node knows every topic at once (a node that has not applied it
    // yet catches up before it would answer topic_not_found).
    for b in &nodes {
        for name in ["r3", "r2", "r1", "dflt"] {
            let (status, body) = b.get(&format!("/v1/topics/{name}"));
            assert_eq!(status, 200, "{name} on {}: {body}", b.addr());
            assert_eq!(
                body["partitions"][0]["replicas"].as_array().unwrap().len(),
                body["replication_factor"].as_u64().unwrap() as usize,
                "{body}"
            );
        }
    }

    for (name, rf) in [("r3", 3usize), ("r2", 2), ("r1", 1)] {
        let leader = cluster::wait_leader(&running, name, 0);
        let replicas = cluster::replicas(&nodes[leader as usize - 1], name, 0);
        assert_eq!(replicas.len(), rf, "{name}: {replicas:?}");
        assert!(replicas.contains(&leader));
        let lb = &nodes[leader as usize - 1];
        let sent = values(name, 25);
        let (status, body) = cluster::produce(lb, name, 0, &sent[..10]).unwrap();
        assert_eq!(status, 200, "{name}: {body}");
        let (status, body) = cluster::produce(lb, name, 0, &sent[10..]).unwrap();
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["offsets"][0]["offset"], 10, "{body}");
        let expected: Vec<(u64, String)> = sent
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| (i as u64, v))
            .collect();

        for (i, b) in nodes.iter().enumerate() {
            let id = (i + 1) as u64;
            if id != leader {
                // Produce to a node that does not lead: where to go instead.
                let (status, body) = cluster::produce(b, name, 0, &values("x", 1)).unwrap();
                assert_eq!(status, 421, "{name} at node {id}: {body}");
                assert_eq!(body["error"]["code"], "not_leader", "{body}");
                if replicas.contains(&id) {
                    assert_eq!(body["error"]["leader"]["node_id"], leader, "{body}");
                    assert_eq!(
                        body["error"]["leader"]["http_addr"],
                        lb.addr().to_string(),
                        "{body}"
                    );
                    assert_eq!(body["error"]["leader"]["binary_addr"], lb.binary_addr(), "{body}");
                }
            }
            if replicas.contains(&id) {
                // Every replica serves the same records at the same offsets.
                wait_for(&format!("node {id} to serve {name}'s records"), || {
                    cluster::records(b, name, 0).as_ref() == Some(&expected)
                });
            } else {
                let (status, body) = b.get(&format!("/v1/topics/{name}/partitions/0/records?offset=0"));
                assert_eq!(status, 421, "{name} read at node {id} without a replica: {body}");
                assert_eq!(body["error"]["code"], "not_leader", "{body}");
            }
        }
        // Nothing else was written by the refused produces.
        let d = cluster::partition_of(lb, name, 0).unwrap();
        assert_eq!(d["high_watermark"], 25, "{d}");
        assert_eq!(d["leader_term"].as_u64().map(|t| t >= 1), Some(true), "{d}");
        assert_eq!(d["replica_status"].as_array().unwrap().len(), rf, "{d}");
    }

    // A long-poll on a follower wakes when a record commits.
    let leader = cluster::wait_leader(&running, "r3", 0);
    let f = (leader as usize) % 3;
    let fb = nodes[f].client();
    let poll =
        std::thread::spawn(move || fb.get("/v1/topics/r3/partitions/0/records?offset=25&wait_ms=30000"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, body) = cluster::produce(&nodes[leader as usize - 1], "r3", 0, &values("late", 1)).unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, body) = poll.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"][0]["value"], "late-0", "{body}");

    // Partitions led by different nodes in one request: refused whole.
    let (status, body) = cluster::create(follower, "m", 3, Some(1));
    assert_eq!(status, 201, "{body}");
    let leaders: Vec<u64> = (0..3).map(|p| cluster::wait_leader(&running, "m", p)).collect();
    let at = &nodes[leaders[0] as usize - 1];
    let records: Vec<_> = (0..3)
        .map(|p| json!({"value": format!("v{p}"), "partition": p}))
        .collect();
    let (status, body) = at.post("/v1/topics/m/records", json!({ "records": records }));
    assert_eq!(status, 421, "{body}");
    assert_eq!(body["error"]["code"], "not_leader", "{body}");
    for p in 0..3u32 {
        assert_eq!(
            body["error"]["leaders"][p.to_string()]["node_id"],
            leaders[p as usize],
            "{body}"
        );
    }
    for p in 0..3u32 {
        let lb = &nodes[leaders[p as usize] as usize - 1];
        assert_eq!(
            cluster::records(lb, "m", p),
            Some(vec![]),
            "nothing written to m/{p}"
        );
    }

    // A delete through one node reaches every node; replicas' files go.
    let r2 = cluster::replicas(&nodes[0], "r2", 0);
    let (status, body) = follower.delete("/v1/topics/r2");
    assert_eq!(status, 200, "{body}");
    for (i, b) in nodes.iter().enumerate() {
        wait_for("r2 to be gone on every node", || {
            b.get("/v1/topics/r2").0 == 404
                && !b.data_dir().join("topics/r2").exists()
                && !b.data_dir().join("raft/r2").exists()
        });
        let _ = (i, &r2);
    }
    // The name can be used again, a new topic with no records.
    let (status, body) = cluster::create(leader_node, "r2", 1, Some(2));
    assert_eq!(status, 201, "{body}");
    let leader = cluster::wait_leader(&running, "r2", 0);
    assert_eq!(
        cluster::records(&nodes[leader as usize - 1], "r2", 0),
        Some(vec![])
    );
}
