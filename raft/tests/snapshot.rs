//! Purge is retention (the spec's §5.2): `PartitionRaft::retain_below`
//! on three replicas, each on its own glommio executor thread, talking
//! over real loopback TCP, each over a real partition log. A retention cut
//! snapshots the applied prefix and purges the entries wholly below it;
//! the log's cleanup limit follows the purge; purge ≤ snapshot ≤ applied;
//! the purge point and the snapshot survive a restart; a cut past what is
//! applied purges only what is applied.

mod common;
mod net;
mod snap_cluster;

use es_storage::Offset;
use net::*;
use snap_cluster::*;

/// Waits until `node`'s purge point reaches `index`, then checks the
/// invariant purge ≤ snapshot ≤ applied and that the cleanup limit is
/// `limit`.
fn wait_purged(node: &Node, index: u64, limit: u64) {
    wait_until(&format!("node {} purged through {index}", node.id), || {
        metrics(node).purged.is_some_and(|p| p.index >= index)
    });
    let m = metrics(node);
    let (purged, snapshot, applied) = (m.purged.unwrap(), m.snapshot.unwrap(), m.last_applied.unwrap());
    assert_eq!(purged.index, index, "purged exactly through the entry asked for");
    assert!(purged <= snapshot, "purge {purged} ≤ snapshot {snapshot}");
    assert!(snapshot <= applied, "snapshot {snapshot} ≤ applied {applied}");
    let applied_offset = node.call(|_| async move { part().applied_offset() });
    assert_eq!(cleanup_limit(node), limit, "the cleanup limit follows the purge");
    assert!(
        limit <= applied_offset,
        "cleanup limit {limit} ≤ applied offset {applied_offset}"
    );
}

#[test]
fn retention_purges_through_the_last_entry_wholly_below_the_cut() {
    let mut c = Cluster::new();
    let leader = c.leader();
    // 30 entries of one batch of 3 records each: entry k (1-based among
    // them) holds offsets 3(k-1)..3k.
    let mut bases = Vec::new();
    for i in 0..30 {
        bases.push(produce_acked(c.node(leader), format!("b{i}"), 3));
    }
    assert_eq!(bases, (0..30).map(|i| i * 3).collect::<Vec<u64>>());
    let hw = 90;
    for id in IDS {
        wait_until(&format!("node {id}'s high watermark at {hw}"), || {
            c.node(id).call(|_| async move { part().high_watermark() }) == hw
        });
        assert_eq!(metrics(c.node(id)).purged, None);
        assert_eq!(
            cleanup_limit(c.node(id)),
            0,
            "nothing purged: cleanup touches nothing"
        );
    }
    // The index of the entry holding offset o.
    let index_of = |o: u64| -> u64 {
        // Entries 1.. are the blank and membership entries openraft
        // placed first; the data entries follow: read their stamps.
        c.node(leader).call(move |_| async move {
            let p = part();
            let batches = p
                .log()
                .read_batches(Offset(o), usize::MAX, Offset(o + 1))
                .await
                .expect("read");
            batches[0].header.raft.expect("v2").index
        })
    };

    // A cut on a batch boundary: that batch and all before it go.
    let cut = bases[10];
    let target = retain_below(c.node(leader), cut).expect("a purge below the cut");
    assert_eq!(target.index, index_of(bases[9]), "the entry ending at the cut");
    wait_purged(c.node(leader), target.index, cut);
    assert_eq!(
        c.node(leader)
            .call(|_| async move { part().stats().snapshots_triggered.get() }),
        1
    );

    // Within a batch: only what ends by the cut; nothing new here.
    assert_eq!(
        retain_below(c.node(leader), cut + 2),
        None,
        "no entry wholly below"
    );
    assert_eq!(cleanup_limit(c.node(leader)), cut);

    // The next boundary: the snapshot covers it already (no new build).
    let cut2 = bases[12];
    let target2 = retain_below(c.node(leader), cut2 + 1).expect("a purge");
    assert_eq!(target2.index, index_of(bases[11]));
    wait_purged(c.node(leader), target2.index, cut2);
    assert_eq!(
        c.node(leader)
            .call(|_| async move { part().stats().snapshots_triggered.get() }),
        1
    );

    // Each replica purges on its own: a follower's cut.
    let follower = IDS.into_iter().find(|&i| i != leader).unwrap();
    let t = retain_below(c.node(follower), bases[20]).expect("a purge");
    wait_purged(c.node(follower), t.index, bases[20]);

    // Past the applied end: only what is applied goes.
    let all = retain_below(c.node(leader), u64::MAX).expect("a purge");
    let applied = metrics(c.node(leader)).last_applied.unwrap();
    assert!(all.index <= applied.index);
    wait_purged(c.node(leader), all.index, hw);

    // The purge point, the snapshot and the cleanup limit are durable.
    let before = metrics(c.node(leader));
    c.stop(leader);
    c.start(leader);
    wait_until("the restarted replica's metrics", || {
        metrics(c.node(leader)).last_applied.is_some()
    });
    let after = metrics(c.node(leader));
    assert_eq!(after.purged, before.purged, "the purge point survives a restart");
    assert_eq!(after.snapshot, before.snapshot, "the snapshot survives a restart");
    assert_eq!(cleanup_limit(c.node(leader)), hw, "so does the cleanup limit");

    // The group goes on: a produce is acknowledged and reaches everyone.
    let leader = c.leader();
    assert_eq!(produce_acked(c.node(leader), "after".into(), 2), hw);
    for id in IDS {
        wait_until(&format!("node {id}'s high watermark at {}", hw + 2), || {
            c.node(id).call(|_| async move { part().high_watermark() }) == hw + 2
        });
    }
    c.stop_all();
}
