//! Three `es-broker` processes on loopback as one cluster, for the
//! replicated data path's tests (cluster_basic, cluster_failover,
//! cluster_restart): start them, wait for the controller, find a
//! partition's leader, read a replica's records.
#![allow(dead_code)]

use serde_json::{json, Value};

use crate::common::{free_port, wait_for, Broker, Client};

/// Starts `n` nodes (ids 1..=n) with short raft timeouts, and waits until
/// they agree on a controller leader with every node registered.
pub fn start(n: usize) -> Vec<Broker> {
    start_with(n, &[])
}

/// [`start`] with more flags for every node.
pub fn start_with(n: usize, extra: &[&str]) -> Vec<Broker> {
    start_each(n, |_| extra.iter().map(|a| a.to_string()).collect())
}

/// [`start`] with more flags for each node: `extra(i)` for node `i + 1`.
pub fn start_each(n: usize, extra: impl Fn(usize) -> Vec<String>) -> Vec<Broker> {
    let raft: Vec<u16> = (0..n).map(|_| free_port()).collect();
    let peers = raft
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}=127.0.0.1:{p}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let nodes: Vec<Broker> = (0..n)
        .map(|i| {
            let id = (i + 1).to_string();
            let raft_addr = format!("127.0.0.1:{}", raft[i]);
            let mut args = vec![
                "--shards",
                "1",
                "--spin-before-park-us",
                "0",
                "--disk-threads",
                "2",
                "--node-id",
                &id,
                "--peers",
                &peers,
                "--raft-addr",
                &raft_addr,
                "--raft-insecure",
                "--raft-heartbeat-ms",
                "100",
                "--raft-election-timeout-ms",
                "800",
            ];
            let more = extra(i);
            args.extend(more.iter().map(String::as_str));
            Broker::start_with(&args)
        })
        .collect();
    let all: Vec<&Broker> = nodes.iter().collect();
    wait_for("the nodes to agree on a controller leader", || {
        controller_leader(&all).is_some()
    });
    nodes
}

/// The controller leader every node of `nodes` names, once they agree and
/// every node is registered.
pub fn controller_leader(nodes: &[&Broker]) -> Option<u64> {
    let mut leader = None;
    for b in nodes {
        let (200, v) = b.try_get("/v1/cluster").ok()? else {
            return None;
        };
        let l = v["controller"]["leader"].as_u64()?;
        if leader.is_some_and(|x| x != l) {
            return None;
        }
        leader = Some(l);
        let registered = v["nodes"].as_array()?.iter().all(|n| n["registered"] == true);
        if !registered {
            return None;
        }
    }
    leader
}

/// Creates a topic through `via`; the answer (status, body).
pub fn create(via: &Client, name: &str, partitions: u32, rf: Option<u32>) -> (u16, Value) {
    let mut body = json!({"name": name, "partitions": partitions});
    if let Some(rf) = rf {
        body["replication_factor"] = json!(rf);
    }
    via.post("/v1/topics", body)
}

/// A partition as node `b` describes it, if it answers.
pub fn partition_of(b: &Broker, topic: &str, p: u32) -> Option<Value> {
    let (200, v) = b.try_get(&format!("/v1/topics/{topic}")).ok()? else {
        return None;
    };
    v["partitions"].get(p as usize).cloned()
}

/// The node id leading partition `p` of `topic`, once a node says it leads
/// it (its own replica, in its own describe).
pub fn leader_now(nodes: &[&Broker], topic: &str, p: u32) -> Option<u64> {
    for (i, b) in nodes.iter().enumerate() {
        let id = (i + 1) as u64;
        let Some(d) = partition_of(b, topic, p) else {
            continue;
        };
        if d["local_replica"] == true && d["leader"].as_u64() == Some(id) && d["in_sync_replicas"].is_array()
        {
            return Some(id);
        }
    }
    None
}

/// Waits for a leader of partition `p` of `topic` among the running
/// `nodes` (index i is node i+1; `None` for a node that is down).
pub fn wait_leader(nodes: &[Option<&Broker>], topic: &str, p: u32) -> u64 {
    let mut leader = 0;
    wait_for(&format!("a leader of {topic}/{p}"), || {
        for (i, b) in nodes.iter().enumerate() {
            let Some(b) = b else { continue };
            let id = (i + 1) as u64;
            if let Some(d) = partition_of(b, topic, p) {
                if d["local_replica"] == true && d["leader"].as_u64() == Some(id) {
                    leader = id;
                    return true;
                }
            }
        }
        false
    });
    leader
}

/// The replicas of partition `p` of `topic` as `b` knows them.
pub fn replicas(b: &Broker, topic: &str, p: u32) -> Vec<u64> {
    let d = partition_of(b, topic, p).expect("the topic is described");
    d["replicas"]
        .as_array()
        .expect("replicas")
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// Every record `(offset, value)` node `b` serves of a partition, from 0 to
/// its high watermark; `None` while it answers anything but 200.
pub fn records(b: &Client, topic: &str, p: u32) -> Option<Vec<(u64, String)>> {
    records_from(b, topic, p, 0)
}

/// [`records`] from offset `from`.
pub fn records_from(b: &Client, topic: &str, p: u32, from: u64) -> Option<Vec<(u64, String)>> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let (status, body) = b
            .try_get(&format!(
                "/v1/topics/{topic}/partitions/{p}/records?offset={offset}&max_records=1000"
            ))
            .ok()?;
        if status != 200 {
            return None;
        }
        for r in body["records"].as_array()? {
            out.push((r["offset"].as_u64()?, r["value"].as_str()?.to_string()));
        }
        let next = body["next_offset"].as_u64()?;
        let hw = body["high_watermark"].as_u64()?;
        if next >= hw {
            return Some(out);
        }
        offset = next;
    }
}

/// Produces `values` to partition `p` of `topic` at `b`: (status, body).
pub fn produce(b: &Client, topic: &str, p: u32, values: &[String]) -> Result<(u16, Value), String> {
    let records: Vec<Value> = values
        .iter()
        .map(|v| json!({"value": v, "partition": p}))
        .collect();
    b.try_post(
        &format!("/v1/topics/{topic}/records"),
        &json!({ "records": records }),
    )
}
