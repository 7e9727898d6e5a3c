//! Kafka clients against a 3-node cluster (docs/kafka.md, "In a
//! cluster"): three `es-broker` processes, each with its Kafka listener,
//! driven by kcat, confluent-kafka (librdkafka) and raw Metadata and
//! ListOffsets requests.
//!
//! - Metadata names the three brokers (kcat -L), the controller group's
//!   leader and, per partition, the leader every node agrees on with the
//!   Raft term as its leader epoch and the replicas in sync;
//! - an AdminClient bootstrapped from a follower of the controller
//!   creates an rf 3 topic (INVALID_REPLICATION_FACTOR past the node
//!   count) and deletes one: gone from every node;
//! - an idempotent producer bootstrapped from one node writes to every
//!   partition while a partition's leader is killed with -9: a new leader
//!   (higher epoch) takes the writes, and a consumer reading each
//!   partition from the beginning finds every acknowledged record at the
//!   offset its delivery report gave, each written once;
//! - ListOffsets on a follower is NOT_LEADER_OR_FOLLOWER; on the leader,
//!   the high watermark;
//! - a topic of one replica: the nodes without it name that replica as
//!   leader (from its leader reports), and kcat bootstrapped from one of
//!   them produces and consumes through it.

mod cluster;
mod common;
mod kafka_common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{free_port, wait_for, Broker};
use kafka_common::{kcat, py, Running};
use serde_json::Value;

/// Starts `n` nodes, each with a Kafka listener on a free port; waits
/// until they agree on a controller leader and every node registered its
/// Kafka address. The nodes and their Kafka addresses.
fn start(n: usize) -> (Vec<Broker>, Vec<String>) {
    let kafka: Vec<String> = (0..n).map(|_| format!("127.0.0.1:{}", free_port())).collect();
    let nodes = cluster::start_each(n, |i| {
        ["--produce-timeout-ms", "3000", "--kafka-addr", &kafka[i]]
            .map(String::from)
            .to_vec()
    });
    wait_for("every node to know every node's Kafka address", || {
        nodes.iter().all(|b| {
            cluster::controller_leader(&[b]).is_some()
                && (0..n).all(|i| {
                    b.try_get("/v1/cluster")
                        .ok()
                        .is_some_and(|(_, v)| v["nodes"][i]["kafka_addr"].as_str() == Some(kafka[i].as_str()))
                })
        })
    });
    (nodes, kafka)
}

// A raw Kafka client for what the real ones do not show: leader epochs,
// partition error codes, ListOffsets sent to a chosen node.

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Sends one request (header v1: non-flexible) and reads its answer's body
/// (after the correlation id).
fn call(addr: &str, key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut frame = Vec::new();
    frame.extend_from_slice(&key.to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&7i32.to_be_bytes());
    put_str(&mut frame, "cluster-kafka-test");
    frame.extend_from_slice(body);
    let mut s = TcpStream::connect(addr).expect("connect to the Kafka port");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&(frame.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&frame).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("an answer");
    let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut answer).expect("the whole answer");
    assert_eq!(&answer[..4], &7i32.to_be_bytes(), "the correlation id");
    answer.split_off(4)
}

/// Reads big-endian fields off a response.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        head.try_into().unwrap()
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take())
    }
    fn string(&mut self) -> Option<String> {
        let n = self.i16();
        if n < 0 {
            return None;
        }
        let (s, rest) = self.0.split_at(n as usize);
        self.0 = rest;
        Some(String::from_utf8(s.to_vec()).unwrap())
    }
    fn ids(&mut self) -> Vec<i32> {
        (0..self.i32()).map(|_| self.i32()).collect()
    }
}

/// One partition in a Metadata answer.
#[derive(Debug, Clone, PartialEq)]
struct PartitionMeta {
    error: i16,
    leader: i32,
    epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    offline: Vec<i32>,
}

/// A Metadata v7 answer for one topic.
#[derive(Debug)]
struct Meta {
    brokers: BTreeMap<i32, String>,
    cluster_id: Option<String>,
    controller: i32,
    topic_error: i16,
    partitions: Vec<PartitionMeta>,
}

/// Metadata v7 for `topic`, asked of `addr`.
fn metadata(addr: &str, topic: &str) -> Meta {
    let mut body = Vec::new();
    body.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut body, topic);
    body.push(0); // allow_auto_topic_creation
    let answer = call(addr, 3, 7, &body);
    let mut r = Reader(&answer);
    r.i32(); // throttle
    let brokers = (0..r.i32())
        .map(|_| {
            let id = r.i32();
            let host = r.string().unwrap();
            let port = r.i32();
            r.string(); // rack
            (id, format!("{host}:{port}"))
        })
        .collect();
    let cluster_id = r.string();
    let controller = r.i32();
    assert_eq!(r.i32(), 1, "one topic");
    let topic_error = r.i16();
    assert_eq!(r.string().as_deref(), Some(topic));
    r.take::<1>(); // is_internal
    let partitions = (0..r.i32())
        .map(|_| {
            let error = r.i16();
            let _index = r.i32();
            PartitionMeta {
                error,
                leader: r.i32(),
                epoch: r.i32(),
                replicas: r.ids(),
                isr: r.ids(),
                offline: r.ids(),
            }
        })
        .collect();
    Meta {
        brokers,
        cluster_id,
        controller,
        topic_error,
        partitions,
    }
}

/// ListOffsets v1 of `topic`/`partition` at `timestamp` (-1 latest),
/// asked of `addr`: (error code, offset).
fn list_offsets(addr: &str, topic: &str, partition: i32, timestamp: i64) -> (i16, i64) {
    let mut body = Vec::new();
    body.extend_from_slice(&(-1i32).to_be_bytes()); // replica_id
    body.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut body, topic);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&partition.to_be_bytes());
    body.extend_from_slice(&timestamp.to_be_bytes());
    let answer = call(addr, 2, 1, &body);
    let mut r = Reader(&answer);
    assert_eq!(r.i32(), 1, "one topic");
    r.string();
    assert_eq!(r.i32(), 1, "one partition");
    assert_eq!(r.i32(), partition);
    let error = r.i16();
    r.i64(); // timestamp
    (error, r.i64())
}

/// Each partition's leader and epoch once every node in `at` names the
/// same leader and epoch for every partition of `topic`.
fn agreed_leaders(at: &[&str], topic: &str) -> Option<Vec<(i32, i32)>> {
    let views: Vec<Vec<(i32, i32)>> = at
        .iter()
        .map(|a| {
            metadata(a, topic)
                .partitions
                .iter()
                .map(|p| (p.leader, p.epoch))
                .collect()
        })
        .collect();
    let first = views[0].clone();
    let agreed =
        !first.is_empty() && first.iter().all(|(l, e)| *l > 0 && *e > 0) && views.iter().all(|v| *v == first);
    agreed.then_some(first)
}

#[test]
fn kafka_clients_follow_partition_leaders_through_a_leader_kill() {
    let (mut nodes, kafka) = start(3);
    let addrs: Vec<&str> = kafka.iter().map(String::as_str).collect();

    // kcat -L through node 3: the three brokers at their Kafka addresses.
    let (ok, out, err) = kcat(&["-b", addrs[2], "-L", "-J"], "");
    assert!(ok, "kcat -L: {err}");
    let listed: Value = serde_json::from_str(&out).expect("kcat -J prints JSON");
    let brokers: BTreeMap<u64, String> = listed["brokers"]
        .as_array()
        .expect("brokers")
        .iter()
        .map(|b| (b["id"].as_u64().unwrap(), b["name"].as_str().unwrap().to_string()))
        .collect();
    let expected: BTreeMap<u64, String> = (1..=3u64).zip(kafka.iter().cloned()).collect();
    assert_eq!(brokers, expected, "kcat -L: {out}");

    // The AdminClient, bootstrapped from a node that does not lead the
    // controller group, creates an rf 3 topic; rf 4 is refused.
    let all: Vec<&Broker> = nodes.iter().collect();
    let controller = cluster::controller_leader(&all).expect("a controller leader");
    let follower = if controller == 1 { 2 } else { 1 };
    let via = addrs[follower - 1];
    let m = metadata(via, "kc");
    assert_eq!(m.controller as u64, controller, "controller_id is raft0's leader");
    assert_eq!(
        m.brokers.values().cloned().collect::<Vec<_>>(),
        kafka,
        "every node is a broker"
    );
    assert_eq!(m.topic_error, 3, "UNKNOWN_TOPIC_OR_PARTITION before the create");
    let cluster_id = nodes[0].get("/v1/cluster").1["cluster_id"].clone();
    assert_eq!(m.cluster_id.as_deref(), cluster_id.as_str(), "the cluster's id");
    let created = py(&["create-rf", via, "kc", "3", "3"]);
    assert_eq!(created, vec![serde_json::json!({"created": "kc"})]);
    let refused = py(&["create-rf", via, "kc-wide", "1", "4"]);
    assert_eq!(
        refused,
        vec![serde_json::json!({"error": "INVALID_REPLICATION_FACTOR"})]
    );

    // Every node names the same leader and epoch per partition; the epoch
    // is the leader's Raft term; each partition has three replicas.
    let mut leaders = Vec::new();
    wait_for(
        "every node to agree on each partition's leader",
        || match agreed_leaders(&addrs, "kc") {
            Some(l) => {
                leaders = l;
                true
            }
            None => false,
        },
    );
    for (p, (leader, epoch)) in leaders.iter().enumerate() {
        let d = cluster::partition_of(&nodes[*leader as usize - 1], "kc", p as u32).unwrap();
        assert_eq!(d["leader_term"].as_i64(), Some(*epoch as i64), "{d}");
    }
    // Every node, followers included, reports the leader's in-sync set.
    let sorted = |mut v: Vec<i32>| {
        v.sort();
        v
    };
    wait_for("every node to show three replicas in sync", || {
        addrs.iter().all(|a| {
            metadata(a, "kc").partitions.into_iter().all(|m| {
                m.error == 0
                    && sorted(m.replicas) == [1, 2, 3]
                    && sorted(m.isr) == [1, 2, 3]
                    && m.offline.is_empty()
            })
        })
    });

    // An idempotent producer bootstrapped from one node writes to every
    // partition; partition 0's leader is killed with -9 meanwhile.
    let producer = Running::start(&[
        "produce-stream",
        addrs[follower - 1],
        "kc",
        "3",
        "enable.idempotence=true",
    ]);
    let mut reports: Vec<Value> = Vec::new();
    let acked_per_partition = |reports: &[Value]| {
        let mut n = [0usize; 3];
        for r in reports {
            if let Some(p) = r["p"].as_u64() {
                n[p as usize] += 1;
            }
        }
        n
    };
    while acked_per_partition(&reports).iter().any(|&n| n < 30) {
        reports.push(producer.next());
    }
    let (victim, old_epoch) = leaders[0];
    let gone = victim as usize - 1;
    nodes[gone].kill9();
    let before = acked_per_partition(&reports);
    while acked_per_partition(&reports)
        .iter()
        .zip(before)
        .any(|(&n, b)| n < b + 30)
    {
        reports.push(producer.next());
    }
    producer.signal("-TERM");
    loop {
        let r = producer.next();
        let done = r["done"] == true;
        reports.push(r);
        if done {
            break;
        }
    }
    let done = reports.last().unwrap().clone();
    assert_eq!(done["undelivered"], 0, "every record delivered: {done}");
    producer.wait();

    // The survivors agree on a new leader of partition 0, at a higher epoch.
    let survivors: Vec<&str> = (0..3).filter(|&i| i != gone).map(|i| addrs[i]).collect();
    let mut after = Vec::new();
    wait_for(
        "the survivors to agree on every partition's leader",
        || match agreed_leaders(&survivors, "kc") {
            Some(l) if l.iter().all(|(leader, _)| *leader != victim) => {
                after = l;
                true
            }
            _ => false,
        },
    );
    assert!(after[0].1 > old_epoch, "{after:?} after {leaders:?}");
    let m = metadata(survivors[0], "kc");
    assert!(
        m.partitions[0].offline.contains(&victim),
        "the killed node is an offline replica: {m:?}"
    );

    // Every acknowledged record is where its delivery report put it,
    // written once; none was lost to the kill.
    let mut acked: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for r in &reports {
        if let (Some(p), Some(o)) = (r["p"].as_u64(), r["o"].as_u64()) {
            let v = r["v"].as_str().unwrap().to_string();
            assert!(acked.insert((p, o), v).is_none(), "offset {p}/{o} reported twice");
        }
    }
    let failed = reports.iter().filter(|r| r.get("error").is_some()).count();
    assert_eq!(failed, 0, "no delivery failed: {reports:?}");
    for p in 0..3u64 {
        let last = acked.range((p, 0)..(p + 1, 0)).next_back().unwrap().0 .1;
        let read = py(&[
            "consume",
            survivors[0],
            "kc",
            &p.to_string(),
            &(last + 1).to_string(),
        ]);
        let log: BTreeMap<u64, String> = read
            .iter()
            .map(|r| (r["o"].as_u64().unwrap(), r["v"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(
            log.len() as u64,
            last + 1,
            "partition {p}: dense offsets to {last}"
        );
        let mut seen = BTreeSet::new();
        for v in log.values() {
            assert!(seen.insert(v.clone()), "partition {p}: {v} written twice");
        }
        for ((_, o), v) in acked.range((p, 0)..(p + 1, 0)) {
            assert_eq!(log.get(o), Some(v), "partition {p} offset {o}");
        }
    }

    // ListOffsets: the leader answers its high watermark, a follower
    // NOT_LEADER_OR_FOLLOWER.
    let (leader0, _) = after[0];
    let (error, hw) = list_offsets(addrs[leader0 as usize - 1], "kc", 0, -1);
    assert_eq!(error, 0);
    let last0 = acked.range((0, 0)..(1, 0)).next_back().unwrap().0 .1 as i64;
    assert!(hw > last0, "high watermark {hw} past offset {last0}");
    let other = survivors
        .iter()
        .find(|a| **a != addrs[leader0 as usize - 1])
        .unwrap();
    assert_eq!(list_offsets(other, "kc", 0, -1).0, 6, "a follower's ListOffsets");

    // The killed node rejoins. A topic of one replica: the other nodes
    // name that replica as its leader (from its reports), and kcat
    // bootstrapped from one of them produces there and reads back.
    nodes[gone].restart();
    let created = py(&["create-rf", survivors[0], "k1", "1", "1"]);
    assert_eq!(created, vec![serde_json::json!({"created": "k1"})]);
    let holder = cluster::wait_leader(&nodes.iter().map(Some).collect::<Vec<_>>(), "k1", 0) as usize;
    let elsewhere = addrs[holder % 3];
    wait_for("a node without the replica to name its leader", || {
        let m = metadata(elsewhere, "k1").partitions[0].clone();
        m.leader == holder as i32 && m.epoch > 0 && m.isr == vec![holder as i32]
    });
    assert_eq!(
        metadata(elsewhere, "k1").partitions[0].replicas,
        vec![holder as i32]
    );
    let (ok, _, err) = kcat(
        &["-b", elsewhere, "-P", "-t", "k1", "-p", "0", "-K:"],
        "a:1\nb:2\n",
    );
    assert!(ok, "kcat -P: {err}");
    let (ok, out, err) = kcat(
        &[
            "-b",
            elsewhere,
            "-C",
            "-t",
            "k1",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k=%s@%o\n",
        ],
        "",
    );
    assert!(ok, "kcat -C: {err}");
    assert_eq!(out, "a=1@0\nb=2@1\n");

    // A topic created and deleted through followers is gone from every
    // node.
    let created = py(&["create-rf", survivors[1], "kd", "2", "2"]);
    assert_eq!(created, vec![serde_json::json!({"created": "kd"})]);
    let deleted = py(&["delete", survivors[0], "kd"]);
    assert_eq!(deleted, vec![serde_json::json!({"deleted": "kd"})]);
    wait_for("every node to have deleted kd", || {
        nodes.iter().zip(&addrs).all(|(b, a)| {
            b.try_get("/v1/topics/kd").is_ok_and(|(s, _)| s == 404) && metadata(a, "kd").topic_error == 3
        })
    });
}
