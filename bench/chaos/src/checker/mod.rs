//! The checker: a history and the final log of every replica in, a
//! verdict out (docs/reliability.md lists the checks).
//!
//! | check | rule | verdict |
//! |---|---|---|
//! | `lost` | every `ok` send (p, o, v) is in the reference log at (p, o) with value v | fail |
//! | `inconsistent-offsets` | a (p, o) ever seen (ack, poll, final log of any replica) with two values | fail |
//! | `divergence` | the replicas' final logs differ below their common high watermark | fail |
//! | `replica-behind` | after the heal and the wait for the replicas to agree, their final high watermarks differ | fail |
//! | `duplicate` | an idempotent producer's value at two offsets | fail |
//! | `duplicate-plain` | a plain producer's value at two offsets (at least once) | counted |
//! | `nonmonotonic-poll` | one reader session returns an offset <= one it returned before | fail |
//! | `poll-skip` | consecutive records o1 < o2 of a session with a record of the log between them | fail |
//! | `unseen` | an `ok` send whose value is nowhere in the reference log | fail |
//! | `fail-appeared` | a send the broker refused (only `fail`s) whose value is in the log | fail |
//! | `lost-commit` | a group's committed offset read back below the last commit acknowledged before the read | fail |
//! | `no-progress` | no send or no poll succeeded: the run tested nothing | fail |
//! | `info-recovered` | `info` sends whose value appears | counted |
//! | `hw-regression` | a reader saw a partition's high watermark go down | counted |
//!
//! The reference log is the first of the final logs (the leader's, in a
//! cluster). Offsets below a log's start (retention) are not checked
//! against it. Availability (the longest wait for an `ok` send after each
//! fault, per partition) is reported, never a verdict.
//!
//! One room per check family: the final logs and their partition names
//! (`finals.rs`), a check's count and witnesses (`tally.rs`), replica
//! divergence (`divergence.rs`), replicas that did not catch up
//! (`behind.rs`), the reader checks (`polls.rs`), lost
//! commits (`commits.rs`), and the availability report (`availability.rs`);
//! `check` here runs them all. The hand-made histories that make each
//! check fail are in `tests.rs`.

mod availability;
mod behind;
mod commits;
mod divergence;
mod finals;
mod polls;
mod tally;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::history::{Event, Type, F};

pub use availability::Availability;
pub use finals::{part_name, FinalLog, Log, Part};
pub use tally::{Check, Verdict};

use availability::availability;
use behind::behind;
use commits::lost_commits;
use divergence::divergence;
use finals::parse_part;
use polls::polls;
use tally::Tally;

/// A fault the nemesis injected: from `start` to `end` (ns since the start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Results {
    /// No check with verdict `fail` counted anything.
    pub valid: bool,
    pub checks: BTreeMap<&'static str, Check>,
    pub availability: Availability,
    pub stats: BTreeMap<&'static str, u64>,
}

pub(super) fn part_of(e: &Event) -> Option<Part> {
    Some((e.topic.clone()?, e.partition?))
}

pub(super) fn secs(ns: u64) -> f64 {
    (ns as f64 / 1e9 * 1000.0).round() / 1000.0
}

/// Checks `history` against the final logs (`finals[0]` is the reference
/// log) and reports availability around `faults`.
pub fn check(history: &[Event], finals: &[FinalLog], faults: &[Fault]) -> Results {
    let empty = FinalLog::default();
    let reference = finals.first().unwrap_or(&empty);
    let mut checks = BTreeMap::new();
    let mut stats = BTreeMap::new();

    // Values in the reference log: value -> its offsets.
    let mut placed: HashMap<&str, Vec<(Part, u64)>> = HashMap::new();
    for (name, log) in &reference.partitions {
        let Some(part) = parse_part(name) else { continue };
        for (&o, v) in &log.records {
            placed.entry(v.as_str()).or_default().push((part.clone(), o));
        }
    }

    let sends_ok: Vec<&Event> = history
        .iter()
        .filter(|e| e.f == F::Send && e.kind == Type::Ok && e.offset.is_some() && e.value.is_some())
        .collect();
    for (name, kind) in [
        ("sends_invoked", Type::Invoke),
        ("sends_ok", Type::Ok),
        ("sends_failed", Type::Fail),
        ("sends_info", Type::Info),
    ] {
        stats.insert(
            name,
            history
                .iter()
                .filter(|e| e.f == F::Send && e.kind == kind)
                .count() as u64,
        );
    }
    let polls_ok = history.iter().filter(|e| e.f == F::Poll && e.kind == Type::Ok);
    stats.insert("polls_ok", polls_ok.clone().count() as u64);
    stats.insert("records_polled", polls_ok.map(|e| e.records.len() as u64).sum());
    stats.insert(
        "commits_ok",
        history
            .iter()
            .filter(|e| e.f == F::Commit && e.kind == Type::Ok)
            .count() as u64,
    );
    stats.insert(
        "final_records",
        reference
            .partitions
            .values()
            .map(|l| l.records.len() as u64)
            .sum(),
    );
    stats.insert("faults", faults.len() as u64);

    // lost and unseen
    let mut lost = Tally::new(Verdict::Fail);
    let mut unseen = Tally::new(Verdict::Fail);
    for e in &sends_ok {
        let (Some(part), Some(o), Some(v)) = (part_of(e), e.offset, e.value.as_deref()) else {
            continue;
        };
        let log = reference.get(&part);
        if log.is_some_and(|l| o < l.start) {
            continue;
        }
        let found = log.and_then(|l| l.records.get(&o));
        if found.map(String::as_str) != Some(v) {
            lost.add(|| {
                json!({"topic": part.0, "partition": part.1, "offset": o, "value": v,
                       "acked_at_s": secs(e.time), "final_value": found})
            });
        }
        if !placed.contains_key(v) {
            unseen.add(|| json!({"topic": part.0, "partition": part.1, "offset": o, "value": v}));
        }
    }
    checks.insert("lost", lost.done());
    checks.insert("unseen", unseen.done());

    // inconsistent offsets: every value ever seen at each (p, o)
    let mut seen: BTreeMap<(Part, u64), BTreeMap<String, String>> = BTreeMap::new();
    for e in &sends_ok {
        if let (Some(part), Some(o), Some(v)) = (part_of(e), e.offset, &e.value) {
            seen.entry((part, o))
                .or_default()
                .entry(v.clone())
                .or_insert_with(|| format!("ack to {}", e.process));
        }
    }
    for e in history.iter().filter(|e| e.f == F::Poll && e.kind == Type::Ok) {
        let Some(part) = part_of(e) else { continue };
        for (o, v) in &e.records {
            seen.entry((part.clone(), *o))
                .or_default()
                .entry(v.clone())
                .or_insert_with(|| format!("poll by {}", e.process));
        }
    }
    for f in finals {
        for (name, log) in &f.partitions {
            let Some(part) = parse_part(name) else { continue };
            for (&o, v) in &log.records {
                seen.entry((part.clone(), o))
                    .or_default()
                    .entry(v.clone())
                    .or_insert_with(|| format!("final log of node {}", f.node));
            }
        }
    }
    let mut inconsistent = Tally::new(Verdict::Fail);
    for ((part, o), values) in &seen {
        if values.len() > 1 {
            inconsistent.add(|| json!({"topic": part.0, "partition": part.1, "offset": o, "values": values}));
        }
    }
    checks.insert("inconsistent-offsets", inconsistent.done());

    checks.insert("divergence", divergence(finals));
    checks.insert("replica-behind", behind(finals));

    // duplicates: a value at several offsets (acks and the reference log)
    let idempotent: HashSet<&str> = history
        .iter()
        .filter(|e| e.f == F::Send && e.idempotent)
        .filter_map(|e| e.value.as_deref())
        .collect();
    let mut at: BTreeMap<&str, BTreeSet<(Part, u64)>> = BTreeMap::new();
    for (v, places) in &placed {
        at.entry(v).or_default().extend(places.iter().cloned());
    }
    for e in &sends_ok {
        if let (Some(part), Some(o), Some(v)) = (part_of(e), e.offset, e.value.as_deref()) {
            at.entry(v).or_default().insert((part, o));
        }
    }
    let mut duplicate = Tally::new(Verdict::Fail);
    let mut duplicate_plain = Tally::new(Verdict::Info);
    for (v, places) in &at {
        if places.len() < 2 {
            continue;
        }
        let offsets: Vec<Value> = places.iter().map(|(p, o)| json!([part_name(p), o])).collect();
        let tally = if idempotent.contains(v) {
            &mut duplicate
        } else {
            &mut duplicate_plain
        };
        tally.add(|| json!({"value": v, "at": offsets}));
    }
    checks.insert("duplicate", duplicate.done());
    checks.insert("duplicate-plain", duplicate_plain.done());

    let (nonmonotonic, skip, hw_regression) = polls(history, reference);
    checks.insert("nonmonotonic-poll", nonmonotonic);
    checks.insert("poll-skip", skip);
    checks.insert("hw-regression", hw_regression);

    // outcomes per value: refused sends that appear, info sends that appear
    let mut outcomes: BTreeMap<&str, (bool, bool, bool)> = BTreeMap::new(); // (ok, fail, info)
    for e in history.iter().filter(|e| e.f == F::Send) {
        let Some(v) = e.value.as_deref() else { continue };
        let o = outcomes.entry(v).or_default();
        match e.kind {
            Type::Ok => o.0 = true,
            Type::Fail => o.1 = true,
            Type::Info => o.2 = true,
            Type::Invoke => {}
        }
    }
    let mut fail_appeared = Tally::new(Verdict::Fail);
    let mut info_recovered = Tally::new(Verdict::Info);
    let mut info_unrecovered = 0;
    for (v, (ok, fail, info)) in &outcomes {
        let appears = placed.get(v);
        if *fail && !*ok && !*info {
            if let Some(places) = appears {
                fail_appeared.add(|| json!({"value": v, "at": places.iter().map(|(p, o)| json!([part_name(p), o])).collect::<Vec<_>>()}));
            }
        }
        if *info && !*ok {
            match appears {
                Some(places) => info_recovered.add(|| json!({"value": v, "at": places.iter().map(|(p, o)| json!([part_name(p), o])).collect::<Vec<_>>()})),
                None => info_unrecovered += 1,
            }
        }
    }
    stats.insert("info_sends_not_written", info_unrecovered);
    checks.insert("fail-appeared", fail_appeared.done());
    checks.insert("info-recovered", info_recovered.done());

    checks.insert("lost-commit", lost_commits(history));

    let mut no_progress = Tally::new(Verdict::Fail);
    if stats["sends_ok"] == 0 || stats["polls_ok"] == 0 {
        no_progress.add(|| json!({"sends_ok": stats["sends_ok"], "polls_ok": stats["polls_ok"]}));
    }
    checks.insert("no-progress", no_progress.done());

    let valid = checks
        .values()
        .all(|c| c.verdict == Verdict::Info || c.count == 0);
    Results {
        valid,
        checks,
        availability: availability(&sends_ok, faults, history),
        stats,
    }
}

#[cfg(test)]
mod tests;
