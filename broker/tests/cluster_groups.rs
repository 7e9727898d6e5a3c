//! Consumer groups on a 3-node cluster of real brokers: the coordinator of
//! every group is the controller leader's node; a group request sent to
//! another node is refused with 421 `not_coordinator` naming it; a commit
//! there is answered once the controller group applied it, so after the
//! coordinator is killed with -9 the new one (elected among the
//! survivors) holds it, the member rejoins (its id is unknown there) and
//! goes on from its commit; after a second failover, to a node that was
//! down for the first commit, every commit is still there; and a group is
//! listed, described and deleted at the coordinator. A Kafka consumer
//! (confluent-kafka) bootstrapped at a node that does not coordinate is
//! sent to the coordinator by FindCoordinator, and its commits land
//! there.

mod cluster;
mod common;
mod kafka_common;

use std::net::SocketAddr;

use common::{wait_for, Broker, Client};
use serde_json::{json, Value};

const TOPIC: &str = "orders";
const GROUP: &str = "billing";

/// The coordinator a `not_coordinator` answer names: its node id and a
/// client for its HTTP address.
fn named_coordinator(answer: &(u16, Value)) -> (u64, Client) {
    assert_eq!(answer.0, 421, "{}", answer.1);
    let e = &answer.1["error"];
    assert_eq!(e["code"], "not_coordinator", "{}", answer.1);
    let c = &e["coordinator"];
    let id = c["node_id"].as_u64().expect("error.coordinator.node_id");
    assert!(c["binary_addr"].as_str().is_some_and(|a| !a.is_empty()), "{c}");
    let addr: SocketAddr = c["http_addr"]
        .as_str()
        .expect("http_addr")
        .parse()
        .expect("an address");
    (id, Client::new(addr))
}

/// The controller leader the running `nodes` agree on, other than
/// `gone` (a node just killed, which they may name for a moment).
fn coordinator_of(nodes: &[&Broker], gone: Option<u64>) -> u64 {
    let mut leader = 0;
    wait_for("the running nodes to agree on a controller leader", || {
        cluster::controller_leader(nodes).is_some_and(|l| {
            leader = l;
            Some(l) != gone
        })
    });
    leader
}

fn commits(c: &Client) -> (u16, Value) {
    c.get(&format!("/v1/groups/{GROUP}/commits"))
}

fn offset_in(v: &Value) -> Option<u64> {
    v["offsets"]
        .as_array()?
        .iter()
        .find(|o| o["topic"] == TOPIC && o["partition"] == 0)?["offset"]
        .as_u64()
}

fn join(c: &Client) -> (String, u64) {
    let (status, m) = c.post(
        &format!("/v1/groups/{GROUP}/members"),
        json!({"topics": [TOPIC], "session_timeout_ms": 30000}),
    );
    assert_eq!(status, 201, "{m}");
    (
        m["member_id"].as_str().unwrap().to_string(),
        m["generation"].as_u64().unwrap(),
    )
}

fn commit(c: &Client, member: &(String, u64), offset: u64) -> (u16, Value) {
    c.post(
        &format!("/v1/groups/{GROUP}/commits"),
        json!({"member_id": member.0, "generation": member.1,
               "offsets": [{"topic": TOPIC, "partition": 0, "offset": offset}]}),
    )
}

#[test]
fn commits_go_to_the_controller_leader_and_survive_its_failover() {
    let mut nodes = cluster::start(3);
    let (status, body) = cluster::create(&nodes[0], TOPIC, 1, Some(3));
    assert_eq!(status, 201, "{body}");
    let all: Vec<&Broker> = nodes.iter().collect();
    let first = coordinator_of(&all, None);
    let follower = (first as usize) % 3; // index of another node

    // A commit sent to a follower: refused, naming the coordinator.
    let refused = nodes[follower].post(
        &format!("/v1/groups/{GROUP}/commits"),
        json!({"offsets": [{"topic": TOPIC, "partition": 0, "offset": 1}]}),
    );
    let (named, coordinator) = named_coordinator(&refused);
    assert_eq!(named, first, "the controller leader coordinates");
    assert_eq!(
        coordinator.url("/"),
        nodes[first as usize - 1].url("/"),
        "its registered HTTP address"
    );
    // Every group request, reads and the list included.
    named_coordinator(&commits(&nodes[follower]));
    named_coordinator(&nodes[follower].get("/v1/groups"));
    named_coordinator(
        &nodes[follower].post(&format!("/v1/groups/{GROUP}/members"), json!({"topics": [TOPIC]})),
    );

    // Followed: a member joins and commits at the coordinator.
    let member = join(&coordinator);
    let (status, v) = commit(&coordinator, &member, 3);
    assert_eq!(status, 200, "{v}");
    assert_eq!(offset_in(&v), Some(3), "{v}");

    // The coordinator goes with kill -9; a survivor takes over.
    nodes[first as usize - 1].kill9();
    let survivors: Vec<&Broker> = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != first as usize - 1)
        .map(|(_, b)| b)
        .collect();
    let second = coordinator_of(&survivors, Some(first));
    assert_ne!(second, first, "a new controller leader");
    let at_second = nodes[second as usize - 1].client();
    let (status, v) = commits(&at_second);
    assert_eq!(status, 200, "{v}");
    assert_eq!(offset_in(&v), Some(3), "the commit survived the failover: {v}");
    // The member is unknown there: it joins again and goes on from 3.
    let (status, v) = at_second.post(
        &format!("/v1/groups/{GROUP}/members/{}/heartbeat", member.0),
        json!({}),
    );
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["error"]["code"], "unknown_member");
    let again = join(&at_second);
    assert_ne!(again.0, member.0);
    let (status, v) = commit(&at_second, &again, 5);
    assert_eq!(status, 200, "{v}");
    assert_eq!(offset_in(&v), Some(5), "{v}");
    let third = survivors
        .iter()
        .position(|b| b.url("/") != at_second.url("/"))
        .unwrap();
    named_coordinator(&commits(survivors[third]));

    // The first coordinator rejoins; the second goes: the new one (which
    // may be the node that was down for the first commit) holds both.
    nodes[first as usize - 1].restart();
    let all: Vec<&Broker> = nodes.iter().collect();
    coordinator_of(&all, None);
    nodes[second as usize - 1].kill9();
    let survivors: Vec<&Broker> = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != second as usize - 1)
        .map(|(_, b)| b)
        .collect();
    let last = coordinator_of(&survivors, Some(second));
    assert_ne!(last, second);
    let at_last = nodes[last as usize - 1].client();
    let mut seen = Value::Null;
    wait_for("the last coordinator to answer the commits", || {
        let (status, v) = commits(&at_last);
        seen = v;
        status == 200
    });
    assert_eq!(offset_in(&seen), Some(5), "every commit survived: {seen}");

    // Listed, described and deleted at the coordinator.
    let (status, list) = at_last.get("/v1/groups");
    assert_eq!(status, 200, "{list}");
    assert!(
        list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == GROUP),
        "{list}"
    );
    let (status, d) = at_last.get(&format!("/v1/groups/{GROUP}"));
    assert_eq!(status, 200, "{d}");
    let (status, v) = at_last.delete(&format!("/v1/groups/{GROUP}"));
    assert_eq!(status, 200, "{v}");
    let (status, v) = commits(&at_last);
    assert_eq!(status, 404, "deleted: {v}");
    // Deleted in the controller group too: the node that was down for
    // the deletion learns it when it comes back.
    nodes[second as usize - 1].restart();
    let all: Vec<&Broker> = nodes.iter().collect();
    let now = coordinator_of(&all, None);
    let (status, v) = commits(&nodes[now as usize - 1]);
    assert_eq!(status, 404, "{v}");
}

#[test]
fn a_kafka_consumer_group_commits_at_the_controller_leader() {
    let kafka: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", common::free_port()))
        .collect();
    let nodes = cluster::start_each(3, |i| vec!["--kafka-addr".into(), kafka[i].clone()]);
    let (status, body) = cluster::create(&nodes[0], TOPIC, 1, Some(3));
    assert_eq!(status, 201, "{body}");
    let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
    let values: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    wait_for("10 records produced at the partition's leader", || {
        let l = cluster::wait_leader(&running, TOPIC, 0) as usize - 1;
        matches!(cluster::produce(&nodes[l], TOPIC, 0, &values), Ok((200, _)))
    });
    let all: Vec<&Broker> = nodes.iter().collect();
    let coordinator = coordinator_of(&all, None) as usize - 1;
    let elsewhere = (coordinator + 1) % 3;
    // Every node must know each node's Kafka address before a client asks.
    wait_for("every node registered with its Kafka listener", || {
        nodes.iter().all(|b| {
            b.try_get("/v1/cluster")
                .is_ok_and(|(s, v)| s == 200 && v["nodes"].as_array().is_some_and(|n| n.len() == 3))
        })
    });

    let member = kafka_common::Running::start(&["group-member", &kafka[elsewhere], "kg", TOPIC]);
    member.until(|l| l["o"].as_u64() == Some(9));
    let at = nodes[coordinator].client();
    wait_for("the Kafka consumer's commits at the coordinator", || {
        let (status, v) = at.get("/v1/groups/kg/commits");
        status == 200 && offset_in(&v) == Some(10)
    });
    let (status, v) = nodes[elsewhere].get("/v1/groups/kg/commits");
    assert_eq!(status, 421, "{v}");
    member.signal("-TERM");
    member.wait();
}
