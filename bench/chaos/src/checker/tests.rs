//! Hand-made histories, one per anomaly: each must make the checker
//! fail (a checker that cannot fail is no checker), and a clean one
//! must pass.

use super::*;
use crate::history::Committed;

/// Builds histories with increasing times.
struct H {
    events: Vec<Event>,
    t: u64,
}

impl H {
    fn new() -> H {
        H {
            events: Vec::new(),
            t: 0,
        }
    }

    fn push(&mut self, mut e: Event) {
        self.t += 1_000_000;
        e.time = self.t;
        self.events.push(e);
    }

    /// A send of `value` to t/`p` answered `kind` (offset for `ok`).
    fn send(
        &mut self,
        process: &str,
        p: u32,
        value: &str,
        kind: Type,
        offset: Option<u64>,
        idempotent: bool,
    ) {
        let mut e = Event::new(process, Type::Invoke, F::Send).on("t", p);
        e.value = Some(value.into());
        e.idempotent = idempotent;
        self.push(e.clone());
        let mut done = e.complete(kind);
        done.offset = offset;
        self.push(done);
    }

    fn ok(&mut self, process: &str, p: u32, value: &str, offset: u64) {
        self.send(process, p, value, Type::Ok, Some(offset), false);
    }

    fn poll(&mut self, process: &str, session: u64, p: u32, records: &[(u64, &str)], hw: u64) {
        let mut e = Event::new(process, Type::Invoke, F::Poll).on("t", p);
        e.session = Some(session);
        self.push(e.clone());
        let mut done = e.complete(Type::Ok);
        done.records = records.iter().map(|(o, v)| (*o, v.to_string())).collect();
        done.hw = Some(hw);
        self.push(done);
    }

    fn group_op(&mut self, f: F, process: &str, offsets: &[(u32, u64)], kind: Type) {
        let mut e = Event::new(process, Type::Invoke, f);
        e.group = Some("g".into());
        let list: Vec<Committed> = offsets
            .iter()
            .map(|&(partition, offset)| Committed {
                topic: "t".into(),
                partition,
                offset,
            })
            .collect();
        if f == F::Commit {
            e.offsets = list.clone();
        }
        self.push(e.clone());
        let mut done = e.complete(kind);
        if f == F::Position {
            done.offsets = list;
        }
        self.push(done);
    }
}

fn log(records: &[(u64, &str)]) -> Log {
    Log {
        start: 0,
        high_watermark: records.last().map_or(0, |r| r.0 + 1),
        records: records.iter().map(|(o, v)| (*o, v.to_string())).collect(),
    }
}

fn node(id: u32, p0: &[(u64, &str)]) -> FinalLog {
    FinalLog {
        node: id,
        partitions: [("t/0".to_string(), log(p0))].into_iter().collect(),
    }
}

/// The clean run every anomaly below is a change of.
fn clean() -> (H, Vec<FinalLog>) {
    let mut h = H::new();
    h.ok("w0", 0, "w0-1", 0);
    h.send("w1", 0, "w1-1", Type::Ok, Some(1), true);
    h.ok("w0", 0, "w0-2", 2);
    h.poll("r0", 1, 0, &[(0, "w0-1"), (1, "w1-1")], 2);
    h.poll("r0", 1, 0, &[(2, "w0-2")], 3);
    h.group_op(F::Commit, "c0", &[(0, 3)], Type::Ok);
    h.group_op(F::Position, "c1", &[(0, 3)], Type::Ok);
    let finals = vec![node(1, &[(0, "w0-1"), (1, "w1-1"), (2, "w0-2")])];
    (h, finals)
}

fn failing(results: &Results) -> Vec<&'static str> {
    results
        .checks
        .iter()
        .filter(|(_, c)| c.verdict == Verdict::Fail && c.count > 0)
        .map(|(n, _)| *n)
        .collect()
}

#[test]
fn a_clean_history_passes() {
    let (h, finals) = clean();
    let r = check(&h.events, &finals, &[]);
    assert!(r.valid, "{:?}", failing(&r));
    assert_eq!(r.stats["sends_ok"], 3);
    assert_eq!(r.stats["records_polled"], 3);
}

#[test]
fn an_acked_record_missing_from_the_final_log_is_lost_and_unseen() {
    let (h, _) = clean();
    let finals = vec![node(1, &[(0, "w0-1"), (1, "w1-1")])];
    let r = check(&h.events, &finals, &[]);
    assert!(!r.valid);
    assert_eq!(r.checks["lost"].count, 1);
    assert_eq!(r.checks["unseen"].count, 1);
    assert_eq!(r.checks["lost"].witnesses[0]["value"], "w0-2");
}

#[test]
fn an_acked_record_moved_to_another_offset_is_lost_but_seen() {
    let (mut h, _) = clean();
    h.ok("w0", 0, "w0-3", 3);
    let finals = vec![node(1, &[(0, "w0-1"), (1, "w1-1"), (2, "w0-2"), (4, "w0-3")])];
    let r = check(&h.events, &finals, &[]);
    assert_eq!(failing(&r), ["lost"]);
    assert_eq!(r.checks["unseen"].count, 0);
}

#[test]
fn two_values_at_one_offset_are_inconsistent() {
    let (mut h, finals) = clean();
    // A reader saw another value at offset 1 than the one acknowledged.
    h.poll("r1", 1, 0, &[(1, "w9-9")], 3);
    let r = check(&h.events, &finals, &[]);
    assert_eq!(failing(&r), ["inconsistent-offsets"]);
    assert_eq!(r.checks["inconsistent-offsets"].witnesses[0]["offset"], 1);
}

#[test]
fn replicas_that_differ_below_the_common_high_watermark_diverge() {
    let (h, mut finals) = clean();
    finals.push(node(2, &[(0, "w0-1"), (1, "w1-1"), (2, "w0-2")]));
    assert!(check(&h.events, &finals, &[]).valid);
    // A shorter replica is no divergence: only below the common HW (it
    // is a replica behind).
    finals.push(node(3, &[(0, "w0-1"), (1, "w1-1")]));
    assert_eq!(failing(&check(&h.events, &finals, &[])), ["replica-behind"]);
    finals.pop();
    finals.push(node(4, &[(0, "w0-1"), (1, "w7-7"), (2, "w0-2")]));
    let r = check(&h.events, &finals, &[]);
    assert!(failing(&r).contains(&"divergence"), "{:?}", failing(&r));
    assert!(!failing(&r).contains(&"replica-behind"), "{:?}", failing(&r));
    assert_eq!(r.checks["divergence"].count, 1);
}

#[test]
fn a_replica_that_did_not_catch_up_is_behind() {
    let (h, finals) = clean();
    let full = &finals[0].partitions["t/0"];
    let reference = FinalLog {
        node: 0,
        ..finals[0].clone()
    };
    let replica = |id: u32, hw: u64| {
        let mut l = full.clone();
        l.records.retain(|&o, _| o < hw);
        l.high_watermark = hw;
        FinalLog {
            node: id,
            partitions: [("t/0".to_string(), l)].into_iter().collect(),
        }
    };
    let agreed = vec![reference.clone(), replica(1, 3), replica(2, 3), replica(3, 3)];
    assert!(check(&h.events, &agreed, &[]).valid);
    // Node 2 stopped at offset 2; the reference (node 0) is not a replica.
    let apart = vec![reference, replica(1, 3), replica(2, 2), replica(3, 3)];
    let r = check(&h.events, &apart, &[]);
    assert_eq!(failing(&r), ["replica-behind"]);
    assert_eq!(r.checks["replica-behind"].witnesses[0]["high_watermarks"]["2"], 2);
}

#[test]
fn an_idempotent_value_written_twice_fails_a_plain_one_is_counted() {
    let (h, _) = clean();
    // w0-1 is plain: twice is at least once.
    let finals = vec![node(1, &[(0, "w0-1"), (1, "w1-1"), (2, "w0-2"), (3, "w0-1")])];
    let r = check(&h.events, &finals, &[]);
    assert!(r.valid, "{:?}", failing(&r));
    assert_eq!(r.checks["duplicate-plain"].count, 1);
    // w1-1 is idempotent: twice is a violation.
    let finals = vec![node(1, &[(0, "w0-1"), (1, "w1-1"), (2, "w0-2"), (3, "w1-1")])];
    let r = check(&h.events, &finals, &[]);
    assert_eq!(failing(&r), ["duplicate"]);
}

#[test]
fn a_session_going_back_is_nonmonotonic_a_new_session_may() {
    let (mut h, finals) = clean();
    h.poll("r0", 2, 0, &[(0, "w0-1")], 3);
    assert!(check(&h.events, &finals, &[]).valid);
    h.poll("r0", 2, 0, &[(0, "w0-1")], 3);
    let r = check(&h.events, &finals, &[]);
    assert_eq!(failing(&r), ["nonmonotonic-poll"]);
}

#[test]
fn a_session_jumping_over_a_record_skips() {
    let (mut h, finals) = clean();
    h.poll("r1", 1, 0, &[(0, "w0-1"), (2, "w0-2")], 3);
    let r = check(&h.events, &finals, &[]);
    assert_eq!(failing(&r), ["poll-skip"]);
    assert_eq!(r.checks["poll-skip"].witnesses[0]["skipped"][0], 1);
}

#[test]
fn a_refused_send_that_was_written_fails() {
    let (mut h, _) = clean();
    h.send("w0", 0, "w0-3", Type::Fail, None, false);
    let finals = vec![node(1, &[(0, "w0-1"), (1, "w1-1"), (2, "w0-2"), (3, "w0-3")])];
    let r = check(&h.events, &finals, &[]);
    assert_eq!(failing(&r), ["fail-appeared"]);
    // An indeterminate one may appear: counted, valid.
    let mut h2 = clean().0;
    h2.send("w0", 0, "w0-3", Type::Info, None, false);
    let r = check(&h2.events, &finals, &[]);
    assert!(r.valid);
    assert_eq!(r.checks["info-recovered"].count, 1);
}

#[test]
fn a_committed_offset_read_back_lower_is_a_lost_commit() {
    let (mut h, finals) = clean();
    h.group_op(F::Position, "c1", &[(0, 2)], Type::Ok);
    let r = check(&h.events, &finals, &[]);
    assert_eq!(failing(&r), ["lost-commit"]);
    // A commit whose outcome is unknown may have set the lower offset.
    let (mut h, finals) = clean();
    h.group_op(F::Commit, "c1", &[(0, 2)], Type::Info);
    h.group_op(F::Position, "c1", &[(0, 2)], Type::Ok);
    assert!(check(&h.events, &finals, &[]).valid);
    // A refused one may not.
    let (mut h, finals) = clean();
    h.group_op(F::Commit, "c1", &[(0, 2)], Type::Fail);
    h.group_op(F::Position, "c1", &[(0, 2)], Type::Ok);
    assert_eq!(failing(&check(&h.events, &finals, &[])), ["lost-commit"]);
    // Nothing read back at all after an acknowledged commit.
    let (mut h, finals) = clean();
    h.group_op(F::Position, "c1", &[], Type::Ok);
    assert_eq!(failing(&check(&h.events, &finals, &[])), ["lost-commit"]);
}

#[test]
fn a_run_without_a_successful_send_tested_nothing() {
    let mut h = H::new();
    h.send("w0", 0, "w0-1", Type::Info, None, false);
    h.poll("r0", 1, 0, &[], 0);
    let r = check(&h.events, &[node(1, &[])], &[]);
    assert_eq!(failing(&r), ["no-progress"]);
}

#[test]
fn high_watermarks_going_down_are_counted_not_failed() {
    let (mut h, finals) = clean();
    h.poll("r0", 1, 0, &[], 2);
    let r = check(&h.events, &finals, &[]);
    assert!(r.valid);
    assert_eq!(r.checks["hw-regression"].count, 1);
}

#[test]
fn records_below_the_log_start_are_not_judged() {
    let (h, _) = clean();
    let mut finals = vec![node(1, &[(2, "w0-2")])];
    finals[0].partitions.get_mut("t/0").unwrap().start = 2;
    let r = check(&h.events, &finals, &[]);
    assert!(r.valid, "{:?}", failing(&r));
}

#[test]
fn availability_is_the_longest_gap_between_acks_around_a_fault() {
    let (h, finals) = clean();
    // Acks at 2, 4 and 6 ms. A fault from 1 to 5 ms: gaps 1, 2, 2 ms
    // until the first ack after it (6 ms).
    let fault = |start: u64, end: u64| Fault {
        name: "kill".into(),
        start,
        end,
    };
    let r = check(
        &h.events,
        &finals,
        &[fault(1_000_000, 5_000_000), fault(5_500_000, 9_000_000)],
    );
    assert_eq!(r.availability.after_faults[0]["longest_gap_s"], 0.002);
    assert_eq!(r.availability.after_faults[0]["recovered"], true);
    // No ack after the second fault ended: it runs to the history's end.
    assert_eq!(r.availability.after_faults[1]["recovered"], false);
    assert_eq!(r.availability.longest_gap_s["t/0"], 0.002);
}

#[test]
fn leader_changes_are_counted_apart_from_faults_and_gaps_per_partition() {
    let mut h = H::new();
    let leader = |h: &mut H, p: u32, node: u32, term: u64| {
        let mut e = Event::new("l0", Type::Ok, F::Leader).on("t", p);
        e.node = Some(node);
        e.term = Some(term);
        h.push(e);
    };
    leader(&mut h, 0, 1, 1); // 1 ms: the first leader, no change
    leader(&mut h, 1, 2, 1); // 2 ms
    h.ok("w0", 0, "w0-1", 0); // 3-4 ms
    leader(&mut h, 0, 2, 2); // 5 ms: during the fault (4-6 ms)
    h.ok("w0", 1, "w0-2", 0); // 6-7 ms
    leader(&mut h, 1, 3, 2); // 8 ms: no fault active
    h.ok("w0", 0, "w0-3", 1); // 9-10 ms
    let fault = Fault {
        name: "partition".into(),
        start: 4_000_000,
        end: 6_000_000,
    };
    let finals = vec![FinalLog {
        node: 1,
        partitions: [
            ("t/0".to_string(), log(&[(0, "w0-1"), (1, "w0-3")])),
            ("t/1".to_string(), log(&[(0, "w0-2")])),
        ]
        .into_iter()
        .collect(),
    }];
    let r = check(&h.events, &finals, &[fault]);
    let e = &r.availability.elections;
    assert_eq!((e.during_faults, e.without_faults), (1, 1));
    assert_eq!(e.without_faults_seen[0]["partition"], "t/1");
    assert_eq!(e.without_faults_seen[0]["leader"], 3);
    assert_eq!(e.without_faults_seen[0]["since_last_fault_s"], 0.002);
    // From the fault's start (4 ms): t/0 acked at 4 ms, then not
    // until 10 ms; t/1 first at 7 ms.
    let per = &r.availability.after_faults[0]["partitions"];
    assert_eq!(per["t/0"], 0.006);
    assert_eq!(per["t/1"], 0.003);
}

#[test]
fn results_serialize_with_counts_and_witnesses() {
    let (h, _) = clean();
    let r = check(&h.events, &[node(1, &[])], &[]);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["checks"]["lost"]["count"], 3);
    assert_eq!(v["checks"]["lost"]["verdict"], "fail");
    assert_eq!(v["checks"]["lost"]["witnesses"].as_array().unwrap().len(), 3);
}
