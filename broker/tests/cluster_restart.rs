//! The whole cluster killed with -9 at once and started again: every
//! topic is back on every node, every acknowledged record is served by
//! every replica at its offset, and writes go on at the next offset.

mod cluster;
mod common;

use common::{wait_for, Broker};

#[test]
fn full_cluster_kill9_and_restart_keeps_topics_and_records() {
    let mut nodes = cluster::start(3);
    let topics = [("a3", 3u32), ("b1", 1), ("c2", 2)];
    for (name, rf) in topics {
        let (status, body) = cluster::create(&nodes[rf as usize - 1], name, 2, Some(rf));
        assert_eq!(status, 201, "{body}");
    }
    let mut expected = Vec::new();
    {
        let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
        for (name, _) in topics {
            for p in 0..2 {
                let leader = cluster::wait_leader(&running, name, p);
                let values: Vec<String> = (0..40).map(|i| format!("{name}-{p}-{i}")).collect();
                let (status, body) = cluster::produce(&nodes[leader as usize - 1], name, p, &values).unwrap();
                assert_eq!(status, 200, "{body}");
                expected.push((name, p, values));
            }
        }
    }
    for b in nodes.iter_mut() {
        b.kill9();
    }
    for b in nodes.iter_mut() {
        b.restart();
    }
    let running: Vec<Option<&Broker>> = nodes.iter().map(Some).collect();
    for (name, p, values) in &expected {
        let want: Vec<(u64, String)> = values
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| (i as u64, v))
            .collect();
        let leader = cluster::wait_leader(&running, name, *p);
        let replicas = cluster::replicas(&nodes[leader as usize - 1], name, *p);
        for id in replicas {
            let b = &nodes[id as usize - 1];
            wait_for(&format!("node {id} to serve {name}/{p} again"), || {
                cluster::records(b, name, *p).as_ref() == Some(&want)
            });
        }
        // Writes go on after the last acknowledged offset.
        wait_for(&format!("a produce to {name}/{p} after the restart"), || {
            let leader = cluster::wait_leader(&running, name, *p);
            match cluster::produce(&nodes[leader as usize - 1], name, *p, &["next".to_string()]) {
                Ok((200, body)) => {
                    assert_eq!(body["offsets"][0]["offset"], values.len() as u64, "{body}");
                    true
                }
                _ => false,
            }
        });
    }
    for b in &nodes {
        for (name, _) in topics {
            assert_eq!(
                b.get(&format!("/v1/topics/{name}")).0,
                200,
                "{name} on {}",
                b.addr()
            );
        }
    }
}
