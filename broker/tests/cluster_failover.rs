//! A partition's leader killed with -9 while producers write to it: the
//! survivors elect another leader and take the writes; every record any
//! producer saw acknowledged is in the log at the offset it was given;
//! once the old leader restarts and rejoins, every replica serves the
//! same records at the same offsets. And with two of three nodes down,
//! nothing is acknowledged: every answer is an error.

mod cluster;
mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use common::{wait_for, Broker, Client};

/// Acknowledged records: value → offset.
type Acked = Arc<Mutex<BTreeMap<String, u64>>>;

/// Writes one record at a time to `topic`/0 until `stop`, each to the
/// first of `clients` that acknowledges it (every node is tried in turn:
/// a refused or failed produce is sent again, as a new record).
fn producer(tag: usize, clients: Vec<Client>, topic: &'static str, acked: Acked, stop: Arc<AtomicBool>) {
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let value = format!("p{tag}-{seq}");
        seq += 1;
        for c in &clients {
            if let Ok((200, body)) = cluster::produce(c, topic, 0, std::slice::from_ref(&value)) {
                let offset = body["offsets"][0]["offset"].as_u64().expect("an offset");
                acked.lock().unwrap().insert(value.clone(), offset);
                break;
            }
        }
        thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn acked_count(acked: &Acked) -> usize {
    acked.lock().unwrap().len()
}

#[test]
fn leader_killed_mid_produce_loses_no_acknowledged_record() {
    let mut nodes = cluster::start_with(3, &["--produce-timeout-ms", "3000"]);
    let (status, body) = cluster::create(&nodes[0], "f", 1, Some(3));
    assert_eq!(status, 201, "{body}");
    let leader = {
        let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
        cluster::wait_leader(&running, "f", 0)
    };
    let acked: Acked = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<Client> = nodes.iter().map(|b| b.client()).collect();
    let producers: Vec<_> = (0..3)
        .map(|t| {
            let (clients, acked, stop) = (clients.clone(), acked.clone(), stop.clone());
            thread::spawn(move || producer(t, clients, "f", acked, stop))
        })
        .collect();
    wait_for("records acknowledged before the kill", || {
        acked_count(&acked) >= 60
    });
    let gone = leader as usize - 1;
    nodes[gone].kill9();
    let before = acked_count(&acked);
    wait_for("records acknowledged by a new leader", || {
        acked_count(&acked) >= before + 60
    });
    {
        let running: Vec<Option<&Broker>> = nodes
            .iter()
            .enumerate()
            .map(|(i, b)| (i != gone).then_some(b))
            .collect();
        let next = cluster::wait_leader(&running, "f", 0);
        assert_ne!(next, leader, "a new leader among the survivors");
    }
    nodes[gone].restart();
    let before = acked_count(&acked);
    wait_for("records acknowledged after the rejoin", || {
        acked_count(&acked) >= before + 30
    });
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let last = *acked.values().max().unwrap();
    // Every replica, the restarted one included, serves the same log.
    let mut logs = Vec::new();
    for (i, b) in nodes.iter().enumerate() {
        let mut log = Vec::new();
        wait_for(
            &format!("node {} to serve every acknowledged offset", i + 1),
            || match cluster::records(b, "f", 0) {
                Some(l) if l.last().is_some_and(|(o, _)| *o >= last) => {
                    log = l;
                    true
                }
                _ => false,
            },
        );
        logs.push(log);
    }
    let shortest = logs.iter().map(Vec::len).min().unwrap();
    for (i, log) in logs.iter().enumerate() {
        assert_eq!(
            log[..shortest],
            logs[0][..shortest],
            "node {} differs from node 1",
            i + 1
        );
        for (k, (o, _)) in log.iter().enumerate() {
            assert_eq!(*o, k as u64, "node {}: offsets are dense", i + 1);
        }
    }
    let at: BTreeMap<u64, &str> = logs[0].iter().map(|(o, v)| (*o, v.as_str())).collect();
    for (value, offset) in &acked {
        assert_eq!(
            at.get(offset).copied(),
            Some(value.as_str()),
            "acknowledged {value} at {offset} is not there"
        );
    }
}

#[test]
fn two_of_three_down_acknowledges_nothing() {
    let mut nodes = cluster::start_with(3, &["--produce-timeout-ms", "2000"]);
    let (status, body) = cluster::create(&nodes[1], "q", 1, Some(3));
    assert_eq!(status, 201, "{body}");
    let leader = {
        let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
        cluster::wait_leader(&running, "q", 0)
    };
    let l = leader as usize - 1;
    let (status, body) = cluster::produce(&nodes[l], "q", 0, &["before".to_string()]).unwrap();
    assert_eq!(status, 200, "{body}");
    // The two followers go: the leader is alone.
    for i in (0..3).filter(|&i| i != l) {
        nodes[i].kill9();
    }
    for k in 0..5 {
        let (status, body) = cluster::produce(&nodes[l], "q", 0, &[format!("alone-{k}")]).unwrap();
        assert_ne!(status, 200, "acknowledged without a majority: {body}");
        let code = body["error"]["code"].as_str().unwrap_or_default().to_string();
        assert!(
            ["leader_not_available", "outcome_unknown", "not_leader"].contains(&code.as_str()),
            "{status} {body}"
        );
    }
    // Back to three: writes are taken again.
    for i in (0..3).filter(|&i| i != l) {
        nodes[i].restart();
    }
    let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
    wait_for("a produce acknowledged again", || {
        let leader = cluster::wait_leader(&running, "q", 0);
        matches!(
            cluster::produce(&nodes[leader as usize - 1], "q", 0, &["after".to_string()]),
            Ok((200, _))
        )
    });
}
