//! Snapshot transfer and install (the spec's §5.3-5.4,
//! docs/design/raft-snapshots.md): three replicas over real loopback TCP
//! and real partition logs. A follower that was down while its leader
//! purged past what it holds catches up by snapshot: the leader streams
//! the entries it lacks, the follower installs them; afterwards its log
//! is byte for byte the leader's, it survives a restart, and the group
//! produces on. A follower whose log ends in entries no one committed (a
//! deposed leader's) has them replaced by the leader's.

mod common;
mod net;
mod snap_cluster;

use es_raft::{NodeId, Proposal};
use es_storage::Offset;
use net::*;
use snap_cluster::*;

/// Every stored batch of `node`'s hot log, with its base offset, as stored.
fn log_batches(node: &Node) -> Vec<(u64, Vec<u8>)> {
    node.call(|_| async move {
        let log = part().log().clone();
        let mut out = Vec::new();
        let mut at = Some(log.entry_cursor(log.hot_start_offset()).await.expect("a cursor"));
        while let Some(c) = at {
            let run = log
                .read_entry_run(c, 0, u64::MAX, 1 << 20, 64 << 20)
                .await
                .expect("read the log");
            out.extend(
                run.batches
                    .iter()
                    .map(|b| (b.header.base_offset.0, b.bytes.to_vec())),
            );
            at = run.next;
        }
        out
    })
}

/// Waits until `node`'s log is the current leader's, batch for batch. A
/// restarted node may bump the term (no pre-vote) and so add a blank entry
/// the node has yet to receive: equality is reached, not instant.
fn wait_same_log_as_leader(c: &Cluster, node: NodeId, what: &str) {
    wait_until(what, || {
        let leader = c.leader();
        log_batches(c.node(node)) == log_batches(c.node(leader))
    });
}

fn high_watermark(node: &Node) -> u64 {
    node.call(|_| async move { part().high_watermark() })
}

/// (bytes sent, bytes received, transfers sent) of `node`'s replica.
fn transfer_stats(node: &Node) -> (u64, u64, u64) {
    node.call(|_| async move {
        let s = part().stats().clone();
        (
            s.snapshot_bytes_sent.get(),
            s.snapshot_bytes_received.get(),
            s.snapshots_sent.get(),
        )
    })
}

fn wait_hw(c: &Cluster, ids: &[NodeId], hw: u64) {
    for &id in ids {
        wait_until(&format!("node {id}'s high watermark at {hw}"), || {
            high_watermark(c.node(id)) == hw
        });
    }
}

/// Purges `leader`'s log through everything it applied; the entry purged.
fn purge_all(c: &Cluster, leader: NodeId) -> u64 {
    let target = retain_below(c.node(leader), u64::MAX).expect("a purge");
    wait_until("the leader's purge", || {
        metrics(c.node(leader))
            .purged
            .is_some_and(|p| p.index >= target.index)
    });
    target.index
}

#[test]
fn a_replica_behind_the_purge_point_catches_up_by_snapshot() {
    let mut c = Cluster::new();
    let leader = c.leader();
    let late = IDS.into_iter().find(|&i| i != leader).unwrap();
    let other = IDS.into_iter().find(|&i| i != leader && i != late).unwrap();
    wait_until("every replica applied the group's start", || {
        metrics(c.node(late)).last_applied.is_some()
    });
    c.stop(late);
    for i in 0..40 {
        produce_acked(c.node(leader), format!("a{i}"), 3);
    }
    let purged = purge_all(&c, leader);
    for i in 0..5 {
        produce_acked(c.node(leader), format!("b{i}"), 3);
    }
    let hw = 135;
    wait_hw(&c, &[leader, other], hw);
    assert_eq!(transfer_stats(c.node(leader)), (0, 0, 0), "nothing sent yet");

    c.start(late);
    wait_hw(&c, &[late], hw);
    let (sent, _, transfers) = transfer_stats(c.node(leader));
    let (_, received, _) = transfer_stats(c.node(late));
    assert!(transfers >= 1, "the leader sent a snapshot");
    assert!(
        sent > 0 && received > 0,
        "records went by snapshot: {sent} sent, {received} received"
    );
    let snap = metrics(c.node(late))
        .snapshot
        .expect("the late replica has a snapshot");
    assert!(
        snap.index >= purged,
        "its snapshot {snap} covers the leader's purge {purged}"
    );
    wait_same_log_as_leader(
        &c,
        late,
        "the late replica's log to be the leader's, byte for byte",
    );

    // The group produces on, and the late replica takes part.
    let leader = c.leader();
    assert_eq!(produce_acked(c.node(leader), "after".into(), 2), hw);
    wait_hw(&c, &IDS, hw + 2);

    // What it installed is durable: a restart keeps it.
    c.stop(late);
    c.start(late);
    wait_hw(&c, &[late], hw + 2);
    wait_same_log_as_leader(&c, late, "the restarted replica's log to be the leader's");
    c.stop_all();
}

#[test]
fn a_divergent_uncommitted_tail_is_replaced_by_the_leaders_log() {
    let mut c = Cluster::new();
    let old = c.leader();
    for i in 0..3 {
        produce_acked(c.node(old), format!("c{i}"), 3);
    }
    wait_hw(&c, &IDS, 9);
    let others: Vec<NodeId> = IDS.into_iter().filter(|&i| i != old).collect();
    for &o in &others {
        c.stop(o);
    }
    // The lone old leader places entries no one else will ever hold.
    c.node(old).call(|_| async move {
        for i in 0..4 {
            let _ = part()
                .raft()
                .client_write_ff(Proposal::Batches(vec![batch(&format!("lost{i}"), 5)]))
                .await;
        }
    });
    wait_until("the old leader wrote its lost entries", || {
        c.node(old).call(|_| async move { part().log().written_offset() }) >= Offset(9 + 20)
    });
    assert_eq!(high_watermark(c.node(old)), 9, "none of them committed");
    c.stop(old);

    for &o in &others {
        c.start(o);
    }
    let leader = c.leader();
    for i in 0..20 {
        produce_acked(c.node(leader), format!("d{i}"), 3);
    }
    let hw = 9 + 60;
    purge_all(&c, leader);
    wait_hw(&c, &others, hw);

    c.start(old);
    wait_hw(&c, &[old], hw);
    let (_, received, _) = transfer_stats(c.node(old));
    assert!(received > 0, "the old leader caught up by snapshot");
    wait_same_log_as_leader(
        &c,
        old,
        "the lost entries to be gone: the old leader's log to be the leader's",
    );
    assert!(
        !log_batches(c.node(old))
            .iter()
            .any(|(_, b)| b.windows(4).any(|w| w == b"lost")),
        "no lost entry is left on the old leader"
    );
    let leader = c.leader();
    assert_eq!(produce_acked(c.node(leader), "after".into(), 2), hw);
    wait_hw(&c, &IDS, hw + 2);
    c.stop_all();
}

/// The leader's retention pass as the broker runs it in cluster mode: the
/// retention cut (here: keep nothing but the active segment), a purge up
/// to it, then cleanup. Returns the leader's first hot offset after it.
fn retention_on(c: &Cluster, id: NodeId) -> u64 {
    c.node(id).call(|_| async move {
        let log = part().log().clone();
        let mut config = log_config();
        config.cleanup.retention_bytes = Some(1);
        log.set_config(config).expect("retention config");
        let cut = log.retention_cut(i64::MAX / 2).expect("a retention cut");
        part().retain_below(cut.0).await.expect("purge").expect("a purge");
        // The purge lands through openraft; cleanup waits for the limit.
        while log.cleanup_limit() < cut {
            glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        }
        let (_, r) = log.cleanup(i64::MAX / 2).await;
        r.expect("cleanup");
        log.hot_start_offset().0
    })
}

fn hot_start(node: &Node) -> u64 {
    node.call(|_| async move { part().log().hot_start_offset().0 })
}

#[test]
fn a_replica_whose_whole_log_is_below_the_leaders_start_installs_everything() {
    let mut c = Cluster::new();
    let leader = c.leader();
    let late = IDS.into_iter().find(|&i| i != leader).unwrap();
    let other = IDS.into_iter().find(|&i| i != leader && i != late).unwrap();
    for i in 0..4 {
        produce_acked(c.node(leader), format!("e{i}"), 3);
    }
    wait_hw(&c, &IDS, 12);
    c.stop(late);
    for i in 0..40 {
        produce_acked(c.node(leader), format!("f{i}"), 3);
    }
    let hw = 12 + 120;
    wait_hw(&c, &[leader, other], hw);
    let start = retention_on(&c, leader);
    assert!(
        start > 12,
        "retention deleted past the late replica's end: the leader's log starts at {start}"
    );

    c.start(late);
    wait_hw(&c, &[late], hw);
    let installs = c.node(late).call(|_| async move {
        let s = part().stats().clone();
        (s.snapshots_installed.get(), s.whole_log_installs.get())
    });
    assert!(
        installs.0 >= 1 && installs.1 >= 1,
        "the late replica installed its whole log by snapshot: {installs:?}"
    );
    assert_eq!(
        hot_start(c.node(late)),
        start,
        "its log starts where the leader's does"
    );
    wait_same_log_as_leader(
        &c,
        late,
        "the late replica's log to be the leader's from its start",
    );
    assert_eq!(
        c.node(leader).call(|_| async move { part().log().holds() }),
        0,
        "the transfer's read hold is released"
    );

    // The group produces on, the late replica takes part, and what it
    // installed survives a restart.
    let leader = c.leader();
    assert_eq!(produce_acked(c.node(leader), "after".into(), 2), hw);
    wait_hw(&c, &IDS, hw + 2);
    c.stop(late);
    c.start(late);
    wait_hw(&c, &[late], hw + 2);
    assert_eq!(hot_start(c.node(late)), start);
    wait_same_log_as_leader(&c, late, "the restarted replica's log to be the leader's");
    c.stop_all();
}
