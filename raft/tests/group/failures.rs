//! Nodes lost and restarted: an isolated leader, two of three nodes down,
//! a whole cluster restarted.

use super::*;

#[test]
fn an_isolated_leader_loses_no_acknowledged_produce() {
    let c = Cluster::new(group_config(3_000), true);
    let old = c.leader();
    // Four streams of produces on the leader, one at a time each, until
    // told to stop; every answer noted with the value produced.
    c.node(old).call(|_| async move {
        for s in 0..4 {
            glommio::spawn_local(async move {
                let mut j = 0;
                while !STREAM_STOP.with(Cell::get) {
                    let tag = format!("s{s}-{j}");
                    let answer = part().produce(batch(&tag, 1, true)).await;
                    let failed = answer.is_err();
                    STREAM.with(|v| v.borrow_mut().push((format!("{tag}-0"), answer)));
                    if failed {
                        // A refusal is immediate: give the shard back.
                        glommio::timer::sleep(Duration::from_millis(20)).await;
                    }
                    j += 1;
                }
            })
            .detach();
        }
    });
    let acked = |n: &Node| {
        n.call(|_| async move { STREAM.with(|v| v.borrow().iter().filter(|(_, a)| a.is_ok()).count()) })
    };
    wait_until("acknowledged produces before the cut", || {
        acked(c.node(old)) >= 40
    });

    c.isolate(old);
    // The cut-off leader soon refuses produce outright: it has heard from
    // no quorum for longer than the election timeout.
    wait_until("the isolated leader refuses with leader_not_available", || {
        // (Not its other refusal, a produce queued for the whole timeout
        // behind entries that cannot commit.)
        matches!(
            produce(c.node(old), batch("late", 1, true)),
            Err(ProduceError::LeaderNotAvailable(why)) if why.contains("quorum")
        )
    });
    let others: Vec<&Node> = c.running().into_iter().filter(|n| n.id != old).collect();
    let new = wait_leader_of(&others);
    let mut after = Vec::new();
    for i in 0..10 {
        let tag = format!("n{i}");
        let base = produce_acked(c.node(new), || batch(&tag, 1, true));
        after.push((format!("{tag}-0"), Ok(base)));
    }
    let stream = c.node(old).call(|_| async move {
        STREAM_STOP.with(|s| s.set(true));
        // Each stream ends within a produce timeout.
        glommio::timer::sleep(Duration::from_millis(3_500)).await;
        STREAM.with(|v| v.take())
    });
    c.heal();
    wait_until("the old leader follows the new one", || {
        view(c.node(old)).1 == Some(new)
    });
    let hw = view(c.node(new)).2;
    wait_hw(&c.running(), hw);

    let (elections, became) = c.node(new).call(|_| async move {
        let s = part().stats().clone();
        (s.elections.get(), s.became_leader.get())
    });
    assert!(elections >= 1 && became == 1, "the new leader saw its election");

    let log: BTreeMap<u64, String> = records(c.node(new)).into_iter().collect();
    for n in c.running() {
        let theirs: BTreeMap<u64, String> = records(n).into_iter().collect();
        assert_eq!(theirs, log, "node {}'s records", n.id);
    }
    let mut oks = 0;
    for (value, answer) in stream.iter().chain(&after) {
        match answer {
            Ok(base) => {
                oks += 1;
                assert_eq!(
                    log.get(base),
                    Some(value),
                    "{value} was acknowledged at offset {base}"
                );
            }
            Err(ProduceError::OutcomeUnknown(_))
            | Err(ProduceError::NotLeader { .. })
            | Err(ProduceError::LeaderNotAvailable(_)) => {}
            Err(e) => panic!("{value}: {e}"),
        }
    }
    assert!(oks >= 50, "acknowledged before and after the cut: {oks}");
    c.stop_all();
}

#[test]
fn with_two_of_three_nodes_down_nothing_is_acknowledged() {
    let mut c = Cluster::new(group_config(2_000), false);
    let leader = c.leader();
    for i in 0..5 {
        produce_acked(c.node(leader), || batch(&format!("a{i}"), 1, true));
    }
    let down: Vec<NodeId> = IDS.into_iter().filter(|&i| i != leader).collect();
    for &id in &down {
        c.stop(id);
    }
    // The leader alone: each produce fails (after the produce timeout at
    // worst), answered as never proposed or of unknown outcome.
    let mut refused = false;
    let started = Instant::now();
    while !refused || started.elapsed() < Duration::from_secs(3) {
        match produce(c.node(leader), batch("alone", 1, true)) {
            Ok(base) => panic!("acknowledged at {base} with two of three nodes down"),
            Err(ProduceError::LeaderNotAvailable(why)) => refused |= why.contains("quorum"),
            Err(ProduceError::OutcomeUnknown(_)) => {}
            Err(e) => panic!("unexpected answer: {e}"),
        }
        assert!(started.elapsed() < HANG_GUARD, "hung");
    }
    let hw = view(c.node(leader)).2;
    assert_eq!(hw, 5, "the high watermark stayed where the quorum left it");
    // One node back: a quorum again, produces acknowledged.
    c.start(down[0]);
    wait_until("produce acknowledged again", || {
        produce(c.node(leader), batch("back", 1, true)).is_ok()
    });
    c.stop_all();
}

#[test]
fn a_cluster_restarted_whole_keeps_its_records_and_offsets() {
    let mut c = Cluster::new(group_config(30_000), false);
    let leader = c.leader();
    for i in 0..10 {
        produce_acked(c.node(leader), || batch(&format!("a{i}"), 3, true));
    }
    let before = records(c.node(leader));
    assert_eq!(before.len(), 30);
    for id in IDS {
        c.stop(id);
    }
    for id in IDS {
        c.start(id);
    }
    let leader = c.leader();
    assert_eq!(
        produce_acked(c.node(leader), || batch("b", 1, true)),
        30,
        "offsets go on where they stopped"
    );
    wait_hw(&c.running(), 31);
    for n in c.running() {
        let got = records(n);
        assert_eq!(got[..30], before[..], "node {}'s records", n.id);
        assert_eq!(got[30], (30, "b-0".to_string()));
    }
    c.stop_all();
}
