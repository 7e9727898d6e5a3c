//! Producing through the group: dense offsets and identical replicas,
//! concurrent produces coalesced, a batch the log refuses, a full queue.

use super::*;

#[test]
fn produce_on_the_leader_gives_dense_offsets_and_identical_replicas() {
    let mut c = Cluster::new(group_config(30_000), false);
    let leader = c.leader();

    // A follower refuses with the leader it knows: never proposed.
    let follower = IDS.into_iter().find(|&i| i != leader).unwrap();
    assert_eq!(
        produce(c.node(follower), batch("f", 1, true)),
        Err(ProduceError::NotLeader { leader: Some(leader) })
    );

    // Version 1 and version 2 batches, one at a time: dense offsets.
    let mut expected = Vec::new();
    let mut next = 0;
    for i in 0..20 {
        let n = i % 3 + 1;
        let base = produce_acked(c.node(leader), || batch(&format!("a{i}"), n, i % 2 == 0));
        assert_eq!(base, next, "batch {i} starts where the one before ended");
        expected.extend((0..n).map(|k| (base + k as u64, format!("a{i}-{k}"))));
        next += n as u64;
    }
    // Refused before anything is proposed: a producer's sequence with a
    // gap (idempotent produce: tests/idempotent.rs), garbage.
    let mut stamped = Vec::new();
    let rec = Record {
        key: None,
        value: b"x".to_vec(),
        timestamp_ms: 1,
    };
    let stamp = ProducerStamp {
        producer_id: 4,
        epoch: 0,
        base_sequence: 3,
    };
    encode(Offset(0), &[rec], stamp, &mut stamped);
    assert!(matches!(
        produce(c.node(leader), BatchBuf::from(stamped)),
        Err(ProduceError::Refused(r)) if r.code == "out_of_order_sequence"
    ));
    assert!(matches!(
        produce(c.node(leader), BatchBuf::from(vec![7u8; 100])),
        Err(ProduceError::Invalid(_))
    ));

    wait_hw(&c.running(), next);
    for n in c.running() {
        assert_eq!(records(n), expected, "node {}'s records", n.id);
    }
    let (term, replicas, in_sync) = c.node(leader).call(|_| async move {
        let p = part();
        (p.term(), p.replicas(), p.in_sync())
    });
    assert!(term >= 1);
    assert_eq!(replicas, IDS.to_vec());
    assert!(in_sync.contains(&leader));

    // A follower shuts down (its log closed), the leader writes on, the
    // follower reopens from its directories and catches up.
    c.stop(follower);
    for i in 0..10 {
        let base = produce_acked(c.node(leader), || batch(&format!("b{i}"), 2, true));
        assert_eq!(base, next);
        expected.extend((0..2).map(|k| (base + k, format!("b{i}-{k}"))));
        next += 2;
    }
    c.start(follower);
    wait_hw(&c.running(), next);
    for n in c.running() {
        assert_eq!(records(n), expected, "node {}'s records after the restart", n.id);
    }
    wait_until("every replica in sync", || {
        c.node(leader).call(|_| async move { part().in_sync().len() }) == 3
    });
    let root = c.stop_all();
    let first = log_files(&dir_of(root.path(), 1));
    assert!(first.len() > 1, "the log rolled");
    for id in [2, 3] {
        assert_eq!(
            log_files(&dir_of(root.path(), id)),
            first,
            "node {id}'s segment files are byte-identical"
        );
    }
}

/// Counts what a replica's observer is told.
#[derive(Default)]
struct Seen {
    commits: Cell<usize>,
    entries: Cell<usize>,
    batches: Cell<usize>,
}

struct Watcher(Rc<Seen>);

impl ReplicaObserver for Watcher {
    fn committed(&self, latency: Duration) {
        assert!(latency > Duration::ZERO);
        self.0.commits.set(self.0.commits.get() + 1);
    }

    fn proposed(&self, batches: usize, bytes: usize) {
        assert!(bytes > 0);
        self.0.entries.set(self.0.entries.get() + 1);
        self.0.batches.set(self.0.batches.get() + batches);
    }
}

#[test]
fn concurrent_produces_are_coalesced_into_few_entries_in_order() {
    let c = Cluster::new(group_config(30_000), false);
    let leader = c.leader();
    const SUBMITTERS: usize = 4;
    const EACH: usize = 50;
    let (answers, entries, batches, seen) = c.node(leader).call(|_| async move {
        let p = part();
        let before = p.stats().entries_proposed.get();
        let seen = Rc::new(Seen::default());
        p.stats().set_observer(Some(Box::new(Watcher(seen.clone()))));
        // Submitter s's j-th produce is created (and first polled) after
        // its (j-1)-th: that is its submission order.
        let produces = (0..SUBMITTERS * EACH).map(|i| {
            let p = p.clone();
            let (s, j) = (i % SUBMITTERS, i / SUBMITTERS);
            async move { (s, j, p.produce(batch(&format!("s{s}-{j}"), 1, true)).await) }
        });
        let answers = join_all(produces).await;
        let stats = p.stats();
        stats.set_observer(None);
        assert!(stats.commit_latency_us_sum.get() > 0);
        assert_eq!(stats.produced.get(), (SUBMITTERS * EACH) as u64);
        (
            answers,
            stats.entries_proposed.get() - before,
            stats.batches_proposed.get(),
            (seen.commits.get(), seen.entries.get(), seen.batches.get()),
        )
    });
    assert_eq!(
        seen,
        (SUBMITTERS * EACH, entries as usize, SUBMITTERS * EACH),
        "the observer saw each commit and each proposal"
    );
    let mut offsets = Vec::new();
    let mut last = [None; SUBMITTERS];
    for (s, j, answer) in answers {
        let base = answer.unwrap_or_else(|e| panic!("submitter {s}'s produce {j}: {e}"));
        assert!(
            last[s].is_none_or(|l| l < base),
            "submitter {s}'s produce {j} got {base}, before its produce {}",
            j.max(1) - 1
        );
        last[s] = Some(base);
        offsets.push(base);
    }
    offsets.sort();
    assert_eq!(
        offsets,
        (0..(SUBMITTERS * EACH) as u64).collect::<Vec<_>>(),
        "dense, each offset once"
    );
    assert_eq!(batches, (SUBMITTERS * EACH) as u64);
    assert!(
        entries * 10 <= (SUBMITTERS * EACH) as u64,
        "{} produces took {entries} entries",
        SUBMITTERS * EACH
    );
    // The log agrees: its data batches carry few distinct raft indexes,
    // and each record is where its produce was told.
    let hw = (SUBMITTERS * EACH) as u64;
    wait_hw(&c.running(), hw);
    let indexes = c.node(leader).call(|_| async move {
        let placed = part().log().placed_batches().await.expect("read the log");
        placed
            .iter()
            .filter_map(|b| b.header.raft.filter(|r| !r.control).map(|r| r.index))
            .collect::<BTreeSet<u64>>()
            .len()
    });
    assert_eq!(indexes as u64, entries, "data entries in the log");
    for n in c.running() {
        let got = records(n);
        assert_eq!(got.len() as u64, hw);
    }
    c.stop_all();
}

#[test]
fn a_batch_the_log_refuses_fails_alone_and_the_group_goes_on() {
    let log_config = LogConfig {
        segment_bytes: 4096,
        batch_bytes_max: 2048,
        ..LogConfig::default()
    };
    let c = Cluster::with_log(group_config(30_000), log_config, false);
    let leader = c.leader();
    let l = c.node(leader);
    assert_eq!(produce_acked(l, || batch("a", 2, true)), 0);
    // Over the log's batch_bytes_max, which produce was not told of: the
    // log refuses it when the entry is placed; the entry is written blank
    // and the produce answered as refused, nothing written.
    let big = || batch("big", 30, true);
    assert!(big().len() > 2048);
    match produce(l, big()) {
        Err(ProduceError::Invalid(why)) => assert!(why.contains("refused"), "{why}"),
        other => panic!("{other:?}"),
    }
    // The group goes on; the blank entry took no offset.
    assert_eq!(produce_acked(l, || batch("b", 1, true)), 2);
    // Told the topic's rules, produce refuses such a batch before it is
    // proposed.
    let proposed = l.call(|_| async move {
        let p = part();
        p.set_batch_rules(BatchRules {
            batch_bytes_max: 2048,
            compacted: false,
        });
        p.stats().entries_proposed.get()
    });
    match produce(l, big()) {
        Err(ProduceError::Invalid(why)) => assert!(why.contains("batch_bytes_max"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        l.call(|_| async move { part().stats().entries_proposed.get() }),
        proposed,
        "not proposed"
    );
    wait_hw(&c.running(), 3);
    let expected = vec![
        (0, "a-0".to_string()),
        (1, "a-1".to_string()),
        (2, "b-0".to_string()),
    ];
    for n in c.running() {
        assert_eq!(records(n), expected, "node {}'s records", n.id);
    }
    c.stop_all();
}

#[test]
fn a_full_queue_makes_produce_wait() {
    let one = batch("q", 1, true).len();
    let cfg = GroupConfig {
        proposals_in_flight: 1,
        queue_bytes_max: 3 * one,
        ..group_config(30_000)
    };
    let c = Cluster::new(cfg, false);
    let leader = c.leader();
    let (answers, most) = c.node(leader).call(move |_| async move {
        let p = part();
        let most = Rc::new(Cell::new(0));
        let done = Rc::new(Cell::new(false));
        let sampler = {
            let (p, most, done) = (p.clone(), most.clone(), done.clone());
            glommio::spawn_local(async move {
                while !done.get() {
                    most.set(most.get().max(p.proposer().queued_bytes()));
                    glommio::yield_if_needed().await;
                    glommio::timer::sleep(Duration::from_micros(200)).await;
                }
            })
        };
        let produces = (0..40).map(|i| {
            let p = p.clone();
            async move { p.produce(batch(&format!("p{i}"), 1, true)).await }
        });
        let answers = join_all(produces).await;
        done.set(true);
        sampler.await;
        (answers, most.get())
    });
    let mut offsets: Vec<u64> = answers
        .into_iter()
        .map(|a| a.expect("every produce waits, then goes"))
        .collect();
    offsets.sort();
    assert_eq!(offsets, (0..40).collect::<Vec<_>>());
    assert!(most > 0, "the queue was used");
    assert!(
        most <= 3 * one,
        "the queue held {most} bytes, over its bound of {}",
        3 * one
    );
    c.stop_all();
}
