//! Three in-process nodes whose Raft logs are real partition logs
//! (`LogStore`, `PartitionSm`), joined by the fault router: replication
//! gives byte-identical segment files, a deposed leader's divergent suffix
//! is truncated from its files, in place, when it rejoins, and a leader killed and
//! restarted from its directories catches up.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use es_raft::openraft::Raft;
use es_raft::{Applied, EsRaft, LogStore, NodeId, PartitionSm, Proposal};
use es_storage::batch::{encode, encode_v2, RaftStamp};
use es_storage::{BatchBuf, FsyncBatcher, LogConfig, Offset, ProducerStamp, Record};

const IDS: [NodeId; 3] = [1, 2, 3];

fn records(tag: &str, n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record {
            key: Some(format!("k{i}").into_bytes()),
            value: format!("{tag}-{i}").into_bytes(),
            timestamp_ms: 11,
        })
        .collect()
}

/// A produced batch: version 2, or version 1 (copied into v2 by the store).
fn batch(tag: &str, n: usize, v1: bool) -> BatchBuf {
    let mut out = Vec::new();
    if v1 {
        encode(Offset(0), &records(tag, n), ProducerStamp::NONE, &mut out);
    } else {
        encode_v2(
            Offset(0),
            &records(tag, n),
            ProducerStamp::NONE,
            RaftStamp::default(),
            &mut out,
        );
    }
    BatchBuf::from(out)
}

struct Node {
    dir: PathBuf,
}

impl Node {
    async fn open(&self) -> (LogStore, PartitionSm) {
        let config = LogConfig {
            segment_bytes: 2048,
            ..LogConfig::default()
        };
        let store = LogStore::open(
            &self.dir.join("log"),
            &self.dir.join("raft"),
            config,
            FsyncBatcher::new(),
        )
        .await
        .expect("open the replica");
        let sm = PartitionSm::new(&store).expect("state machine");
        (store, sm)
    }
}

/// A running node: its handles, so a test can stop it as a crash would.
struct Up {
    store: LogStore,
    sm: PartitionSm,
}

async fn boot(router: &Router, root: &Path) -> (Vec<Node>, Vec<Up>) {
    let mut nodes = Vec::new();
    let mut ups = Vec::new();
    for id in IDS {
        let node = Node {
            dir: root.join(format!("node{id}")),
        };
        let (store, sm) = node.open().await;
        start(router, id, store.clone(), sm.clone()).await;
        nodes.push(node);
        ups.push(Up { store, sm });
    }
    initialize(router, &IDS).await;
    (nodes, ups)
}

async fn write(raft: &Raft<EsRaft>, tag: &str, batches: usize) -> Vec<u64> {
    let bs = (0..batches)
        .map(|b| batch(&format!("{tag}/{b}"), 2, b % 2 == 1))
        .collect();
    match raft
        .client_write(Proposal::Batches(bs))
        .await
        .expect("client_write")
        .data
    {
        Applied::Offsets(o) => o,
        other => panic!("offsets expected, got {other:?}"),
    }
}

async fn stop(router: &Router, id: NodeId, up: &Up) {
    kill(router, id).await;
    up.store.close().await.expect("close");
}

#[test]
fn replicas_hold_byte_identical_logs() {
    let root = tempfile::tempdir().unwrap();
    let (nodes, ups) = run(async {
        let router = Router::default();
        let (nodes, ups) = boot(&router, root.path()).await;
        let leader = wait_leader(&router, &IDS).await;
        let raft = router.node(leader).unwrap();
        let mut next = 0;
        for i in 0..60 {
            let offsets = write(&raft, &format!("w{i}"), 1 + i % 3).await;
            assert_eq!(offsets[0], next, "dense offsets in commit order");
            next += 2 * (1 + i % 3) as u64;
        }
        wait_applied(&router, &IDS, last_index(&raft)).await;
        for (i, up) in ups.iter().enumerate() {
            assert_eq!(up.sm.committed_offset(), next, "node {}'s high watermark", i + 1);
            assert_eq!(
                up.store.log().committed_offset().0,
                next,
                "the log serves up to it"
            );
        }
        for (id, up) in IDS.iter().zip(&ups) {
            stop(&router, *id, up).await;
        }
        (nodes, ups)
    });
    drop(ups);
    let first = log_files(&nodes[0].dir);
    assert!(first.len() > 1, "the log rolled");
    for n in &nodes[1..] {
        assert_eq!(log_files(&n.dir), first, "segment files are byte-identical");
    }
}

#[test]
fn a_divergent_follower_is_truncated_and_a_restarted_leader_catches_up() {
    let root = tempfile::tempdir().unwrap();
    let nodes = run(async {
        let router = Router::default();
        let (nodes, mut ups) = boot(&router, root.path()).await;
        let old = wait_leader(&router, &IDS).await;
        let raft = router.node(old).unwrap();
        for i in 0..10 {
            write(&raft, &format!("a{i}"), 2).await;
        }
        let committed = last_index(&raft);
        wait_applied(&router, &IDS, committed).await;

        // The leader is cut off and takes writes that cannot commit.
        let lost = (0..4)
            .map(|i| Proposal::Batches(vec![batch(&format!("lost{i}"), 3, false)]))
            .collect();
        isolate_with_writes(&router, old, &IDS, lost).await;
        let up_old = &ups[(old - 1) as usize];
        let divergent = up_old.store.log_ids();
        assert!(divergent.iter().any(|l| l.index > committed));
        // A handle taken before the truncation, as a broker's partition
        // table holds one: the cut is in place, so it stays the log's.
        let handle = up_old.store.log();

        let new = wait_leader(&router, &others(&IDS, old)).await;
        let raft2 = router.node(new).unwrap();
        for i in 0..6 {
            write(&raft2, &format!("b{i}"), 1).await;
        }
        router.heal();
        wait_applied(&router, &IDS, last_index(&raft2)).await;
        let healed = ups[(old - 1) as usize].store.log_ids();
        assert_eq!(healed, ups[(new - 1) as usize].store.log_ids());
        assert!(
            divergent
                .iter()
                .filter(|l| l.index > committed)
                .all(|l| !healed.contains(l)),
            "the uncommitted entries are gone from the old leader's log"
        );
        assert!(handle.failure().is_none(), "the old handle is not closed");
        assert_eq!(
            handle.next_offset(),
            ups[(new - 1) as usize].store.log().next_offset(),
            "the handle taken before the truncation holds the healed log"
        );
        assert_eq!(
            handle.committed_offset(),
            ups[(new - 1) as usize].store.log().committed_offset()
        );

        // Kill the new leader and restart it from its directories.
        drop((raft, raft2));
        let up_new = ups.remove((new - 1) as usize);
        stop(&router, new, &up_new).await;
        drop(up_new);
        let third = wait_leader(&router, &others(&IDS, new)).await;
        let raft3 = router.node(third).unwrap();
        for i in 0..5 {
            write(&raft3, &format!("c{i}"), 2).await;
        }
        let (store, sm) = nodes[(new - 1) as usize].open().await;
        start(&router, new, store.clone(), sm.clone()).await;
        ups.insert((new - 1) as usize, Up { store, sm });
        wait_applied(&router, &IDS, last_index(&raft3)).await;
        let hw = ups[0].sm.committed_offset();
        for up in &ups {
            assert_eq!(up.sm.committed_offset(), hw, "one high watermark");
        }
        assert_eq!(hw, 2 * (10 * 2 + 6 + 5 * 2), "the lost writes took no offset");
        drop(raft3);
        glommio::timer::sleep(Duration::from_millis(10)).await;
        for (id, up) in IDS.iter().zip(&ups) {
            stop(&router, *id, up).await;
        }
        nodes
    });
    let first = log_files(&nodes[0].dir);
    for n in &nodes[1..] {
        assert_eq!(
            log_files(&n.dir),
            first,
            "segment files are byte-identical after the heal"
        );
    }
}

#[test]
fn a_restarted_replica_serves_what_it_had_committed() {
    let root = tempfile::tempdir().unwrap();
    run(async {
        let router = Router::default();
        let (nodes, ups) = boot(&router, root.path()).await;
        let leader = wait_leader(&router, &IDS).await;
        let raft = router.node(leader).unwrap();
        for i in 0..8 {
            write(&raft, &format!("r{i}"), 2).await;
        }
        let last = last_index(&raft);
        wait_applied(&router, &IDS, last).await;
        let hw = ups[0].sm.committed_offset();
        assert_eq!(hw, 8 * 2 * 2);
        drop(raft);
        for (id, up) in IDS.iter().zip(&ups) {
            stop(&router, *id, up).await;
        }
        drop(ups);

        // Each replica restarted alone: no leader tells it what is
        // committed; its committed file does.
        for (&id, node) in IDS.iter().zip(&nodes) {
            let (store, sm) = node.open().await;
            let log = store.log();
            assert_eq!(
                log.committed_offset().0,
                hw,
                "node {id} serves what it had committed, at open"
            );
            start(&router, id, store.clone(), sm.clone()).await;
            assert_eq!(sm.committed_offset(), hw, "node {id} re-applied up to it");
            assert_eq!(sm.last_applied().map(|l| l.index), Some(last));
            let read = log
                .read(Offset(0), usize::MAX, log.committed_offset())
                .await
                .unwrap();
            assert_eq!(read.len() as u64, hw, "node {id}'s records, all readable");
            kill(&router, id).await;
            store.close().await.unwrap();
        }

        // The file is a hint: one that fails its checksum reads as none
        // (the replica starts, serving nothing until a leader says more).
        let file = nodes[0].dir.join("raft").join("committed");
        let mut bytes = std::fs::read(&file).unwrap();
        assert_eq!(bytes.len(), 20, "a log id and its CRC");
        bytes[3] ^= 0xff;
        std::fs::write(&file, &bytes).unwrap();
        let (store, sm) = nodes[0].open().await;
        assert_eq!(store.log().committed_offset().0, 0);
        start(&router, IDS[0], store.clone(), sm.clone()).await;
        assert_eq!(sm.committed_offset(), 0, "nothing re-applied on a bad hint");
        kill(&router, IDS[0]).await;
        store.close().await.unwrap();
    });
}
