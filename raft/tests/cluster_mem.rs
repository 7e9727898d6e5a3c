//! Three in-process nodes on the in-memory store, joined by the fault
//! router: elections, replication, a leader killed and restarted, and a
//! deposed leader's divergent suffix truncated when it rejoins.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use es_raft::mem_store::{MemLog, MemSm};
use es_raft::openraft::{Config, Raft, ServerState};
use es_raft::{Applied, EsRaft, NodeId, Proposal};
use es_storage::batch::encode;
use es_storage::{BatchBuf, Offset, ProducerStamp, Record};

const IDS: [NodeId; 3] = [1, 2, 3];

fn batch(value: &str, records: usize) -> BatchBuf {
    let recs: Vec<Record> = (0..records)
        .map(|i| Record {
            key: None,
            value: format!("{value}-{i}").into_bytes(),
            timestamp_ms: 1,
        })
        .collect();
    let mut out = Vec::new();
    encode(Offset(0), &recs, ProducerStamp::NONE, &mut out);
    BatchBuf::from(out)
}

struct Node {
    log: MemLog,
    sm: MemSm,
}

async fn boot(router: &Router) -> Vec<Node> {
    boot_with(router, config()).await
}

async fn boot_with(router: &Router, config: Arc<Config>) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in IDS {
        let (log, sm) = (MemLog::default(), MemSm::default());
        start_with(router, id, log.clone(), sm.clone(), config.clone()).await;
        nodes.push(Node { log, sm });
    }
    initialize(router, &IDS).await;
    nodes
}

fn node(nodes: &[Node], id: NodeId) -> &Node {
    &nodes[(id - 1) as usize]
}

async fn write(raft: &Raft<EsRaft>, value: &str, records: usize) -> Vec<u64> {
    let resp = raft
        .client_write(Proposal::Batches(vec![batch(value, records)]))
        .await
        .expect("client_write");
    match resp.data {
        Applied::Offsets(o) => o,
        other => panic!("a data entry applies to offsets, got {other:?}"),
    }
}

/// Every node of `ids` applied the same entries, in the same order.
fn same_state(nodes: &[Node], ids: &[NodeId]) {
    let first = node(nodes, ids[0]).sm.state();
    for &id in &ids[1..] {
        let s = node(nodes, id).sm.state();
        assert_eq!(
            s.applied, first.applied,
            "node {id} applied what node {} did",
            ids[0]
        );
        assert_eq!(s.next_offset, first.next_offset);
    }
}

#[test]
fn elects_a_leader_and_replicates() {
    run(async {
        let router = Router::default();
        let nodes = boot(&router).await;
        let leader = wait_leader(&router, &IDS).await;
        let raft = router.node(leader).unwrap();
        let mut next = 0;
        for i in 0..200 {
            let offsets = write(&raft, &format!("v{i}"), 1 + i % 3).await;
            assert_eq!(offsets, vec![next], "offsets are dense, in commit order");
            next += (1 + i % 3) as u64;
        }
        wait_applied(&router, &IDS, last_index(&raft)).await;
        same_state(&nodes, &IDS);
        assert_eq!(node(&nodes, 2).sm.state().next_offset, next);
        // The followers' logs hold what the leader's does.
        for id in IDS {
            assert_eq!(node(&nodes, id).log.log_ids(), node(&nodes, leader).log.log_ids());
        }
        for id in IDS {
            kill(&router, id).await;
        }
    });
}

#[test]
fn a_killed_leader_is_replaced_and_catches_up_when_restarted() {
    run(async {
        let router = Router::default();
        let nodes = boot(&router).await;
        let old = wait_leader(&router, &IDS).await;
        let raft = router.node(old).unwrap();
        for i in 0..20 {
            write(&raft, &format!("a{i}"), 2).await;
        }
        drop(raft);
        kill(&router, old).await;
        let new = wait_leader(&router, &others(&IDS, old)).await;
        assert_ne!(new, old);
        let raft = router.node(new).unwrap();
        let term = raft.metrics().borrow().current_term;
        for i in 0..20 {
            write(&raft, &format!("b{i}"), 2).await;
        }
        // The old leader comes back on its own "disk" and catches up.
        let n = node(&nodes, old);
        start(&router, old, n.log.clone(), n.sm.clone()).await;
        wait_applied(&router, &IDS, last_index(&raft)).await;
        same_state(&nodes, &IDS);
        assert_eq!(node(&nodes, old).sm.state().next_offset, 80);
        let back = router.node(old).unwrap();
        wait_metrics(&back, "the restarted node follows", |m| {
            m.state == ServerState::Follower && m.current_term >= term
        })
        .await;
        for id in IDS {
            kill(&router, id).await;
        }
    });
}

#[test]
fn a_deposed_leaders_divergent_suffix_is_truncated() {
    run(async {
        let router = Router::default();
        let nodes = boot(&router).await;
        let old = wait_leader(&router, &IDS).await;
        let raft = router.node(old).unwrap();
        for i in 0..10 {
            write(&raft, &format!("c{i}"), 1).await;
        }
        let committed = last_index(&raft);
        wait_applied(&router, &IDS, committed).await;

        // Cut the leader off; it still takes writes, which cannot commit.
        let lost = (0..5)
            .map(|i| Proposal::Batches(vec![batch(&format!("lost{i}"), 1)]))
            .collect();
        isolate_with_writes(&router, old, &IDS, lost).await;
        let divergent = node(&nodes, old).log.log_ids();

        // The majority elects another leader and writes past it.
        let new = wait_leader(&router, &others(&IDS, old)).await;
        let raft2 = router.node(new).unwrap();
        for i in 0..8 {
            write(&raft2, &format!("d{i}"), 1).await;
        }

        // Heal: the old leader's uncommitted entries are replaced.
        router.heal();
        wait_applied(&router, &IDS, last_index(&raft2)).await;
        let healed = node(&nodes, old).log.log_ids();
        assert_eq!(
            healed,
            node(&nodes, new).log.log_ids(),
            "logs agree after the heal"
        );
        let replaced = divergent
            .iter()
            .filter(|id| id.index > committed)
            .all(|id| !healed.contains(id));
        assert!(replaced, "every uncommitted entry of the old term was truncated");
        same_state(&nodes, &IDS);
        // The lost writes were never applied anywhere: offsets stayed dense.
        assert_eq!(node(&nodes, old).sm.state().next_offset, 18);
        drop((raft, raft2));
        glommio::timer::sleep(Duration::from_millis(10)).await;
        for id in IDS {
            kill(&router, id).await;
        }
    });
}

/// How many terms past the last leader's a new election may take in
/// `survivors_whose_election_timeouts_tie_still_elect`: a split vote costs
/// a term; with ticks out of step each split is a fresh chance (a handful
/// of terms at most, seen under load), while a tie that repeats runs the
/// survivors through a term per election timeout, hundreds before chance
/// breaks it.
const SPLIT_TERMS: u64 = 20;

/// openraft 0.9 draws a node's election timeout once, when it starts, and
/// checks it on its ticks. Here every node draws the same 400 ms, so after
/// the leader is cut off the two others reach their timeouts on the same
/// tick if their ticks are in step (three nodes started together on one
/// executor), both campaign, each refuses the other, and unless something
/// breaks the tie they do it again every term. They must elect within a
/// few terms all the same, round after round.
#[test]
fn survivors_whose_election_timeouts_tie_still_elect() {
    run(async {
        let tied = Config {
            election_timeout_min: 400,
            election_timeout_max: 401,
            ..(*config()).clone()
        };
        let tied = Arc::new(tied.validate().expect("valid config"));
        let router = Router::default();
        let nodes = boot_with(&router, tied).await;
        let mut leader = wait_leader(&router, &IDS).await;
        for round in 0..3 {
            let raft = router.node(leader).unwrap();
            write(&raft, &format!("t{round}"), 1).await;
            // Equal logs: either survivor may win, so nothing but the
            // timers decides.
            wait_applied(&router, &IDS, last_index(&raft)).await;
            let term = raft.metrics().borrow().current_term;
            drop(raft);
            router.isolate(leader, &IDS);
            let new = wait_leader_by_term(&router, &others(&IDS, leader), term + SPLIT_TERMS).await;
            router.heal();
            assert_eq!(wait_leader(&router, &IDS).await, new, "the old leader follows");
            leader = new;
        }
        wait_applied(&router, &IDS, last_index(&router.node(leader).unwrap())).await;
        same_state(&nodes, &IDS);
        for id in IDS {
            kill(&router, id).await;
        }
    });
}
