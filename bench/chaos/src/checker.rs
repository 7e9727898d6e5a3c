//! The checker: a history and the final log of every replica in, a
//! verdict out (docs/reliability.md lists the checks).
//!
//! | check | rule | verdict |
//! |---|---|---|
//! | `lost` | every `ok` send (p, o, v) is in the reference log at (p, o) with value v | fail |
//! | `inconsistent-offsets` | a (p, o) ever seen (ack, poll, final log of any replica) with two values | fail |
//! | `divergence` | the replicas' final logs differ below their common high watermark | fail |
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::history::{Event, Type, F};

/// Witnesses kept per check.
const WITNESSES_MAX: usize = 10;

/// A partition: topic and partition number.
pub type Part = (String, u32);

/// One replica's log of one partition after the final drain.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    /// The log start offset: offsets below it are gone (retention).
    pub start: u64,
    pub high_watermark: u64,
    /// Offset to value.
    pub records: BTreeMap<u64, String>,
}

/// One node's logs after the final drain.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FinalLog {
    pub node: u32,
    pub partitions: BTreeMap<String, Log>,
}

impl FinalLog {
    fn get(&self, part: &Part) -> Option<&Log> {
        self.partitions.get(&part_name(part))
    }
}

/// `topic/partition`, the key of a final log's partitions.
pub fn part_name((topic, partition): &Part) -> String {
    format!("{topic}/{partition}")
}

/// A fault the nemesis injected: from `start` to `end` (ns since the start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Any occurrence makes the run invalid.
    Fail,
    /// Reported only.
    Info,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    pub verdict: Verdict,
    pub count: u64,
    /// The first occurrences.
    pub witnesses: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Results {
    /// No check with verdict `fail` counted anything.
    pub valid: bool,
    pub checks: BTreeMap<&'static str, Check>,
    pub availability: Availability,
    pub stats: BTreeMap<&'static str, u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Availability {
    /// Per fault: the longest time without an `ok` send on any partition,
    /// and on one partition (which), between the fault's start and the
    /// first ack after the fault ended (seconds).
    pub after_faults: Vec<Value>,
    /// Per partition: the longest time between two `ok` sends (seconds).
    pub longest_gap_s: BTreeMap<String, f64>,
    /// Leader changes the workload's lookups saw (cluster runs), during a
    /// fault and outside every fault.
    pub elections: Elections,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Elections {
    /// Changes seen while a fault was active.
    pub during_faults: u64,
    /// Changes seen while no fault was active (a lookup sees a change a
    /// little after it happened: one just after a fault's end may be that
    /// fault's).
    pub without_faults: u64,
    /// The first changes seen without a fault: partition, time, new leader
    /// and term, seconds since the last fault ended.
    pub without_faults_seen: Vec<Value>,
}

/// Collects one check's count and first witnesses.
struct Tally {
    verdict: Verdict,
    count: u64,
    witnesses: Vec<Value>,
}

impl Tally {
    fn new(verdict: Verdict) -> Tally {
        Tally {
            verdict,
            count: 0,
            witnesses: Vec::new(),
        }
    }

    fn add(&mut self, witness: impl FnOnce() -> Value) {
        self.count += 1;
        if self.witnesses.len() < WITNESSES_MAX {
            self.witnesses.push(witness());
        }
    }

    fn done(self) -> Check {
        Check {
            verdict: self.verdict,
            count: self.count,
            witnesses: self.witnesses,
        }
    }
}

fn part_of(e: &Event) -> Option<Part> {
    Some((e.topic.clone()?, e.partition?))
}

fn secs(ns: u64) -> f64 {
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

/// `topic/partition` back to its parts (a topic name has no `/`).
fn parse_part(name: &str) -> Option<Part> {
    let (topic, p) = name.rsplit_once('/')?;
    Some((topic.to_string(), p.parse().ok()?))
}

/// Replicas whose final logs differ below their common high watermark.
fn divergence(finals: &[FinalLog]) -> Check {
    let mut tally = Tally::new(Verdict::Fail);
    let names: BTreeSet<&String> = finals.iter().flat_map(|f| f.partitions.keys()).collect();
    for name in names {
        let logs: Vec<(u32, Option<&Log>)> =
            finals.iter().map(|f| (f.node, f.partitions.get(name))).collect();
        if logs.len() < 2 {
            continue;
        }
        let common = logs
            .iter()
            .map(|(_, l)| l.map_or(0, |l| l.high_watermark))
            .min()
            .unwrap_or(0);
        let from = logs
            .iter()
            .map(|(_, l)| l.map_or(0, |l| l.start))
            .max()
            .unwrap_or(0);
        for o in from..common {
            let values: Vec<Option<&String>> = logs
                .iter()
                .map(|(_, l)| l.and_then(|l| l.records.get(&o)))
                .collect();
            if values.windows(2).any(|w| w[0] != w[1]) {
                tally.add(|| {
                    let by_node: BTreeMap<String, Option<&String>> = logs
                        .iter()
                        .zip(&values)
                        .map(|((n, _), v)| (n.to_string(), *v))
                        .collect();
                    json!({"partition": name, "offset": o, "values": by_node})
                });
            }
        }
    }
    tally.done()
}

/// The reader checks, per (process, session, partition) in history order:
/// non-monotonic offsets, skipped records, and high watermarks going down.
fn polls(history: &[Event], reference: &FinalLog) -> (Check, Check, Check) {
    let mut nonmonotonic = Tally::new(Verdict::Fail);
    let mut skip = Tally::new(Verdict::Fail);
    let mut regression = Tally::new(Verdict::Info);
    let mut last: HashMap<(&str, Option<u64>, Part), u64> = HashMap::new();
    let mut last_hw: HashMap<(&str, Part), u64> = HashMap::new();
    for e in history.iter().filter(|e| e.f == F::Poll && e.kind == Type::Ok) {
        let Some(part) = part_of(e) else { continue };
        if let Some(hw) = e.hw {
            let key = (e.process.as_str(), part.clone());
            if let Some(&before) = last_hw.get(&key) {
                if hw < before {
                    regression.add(|| {
                        json!({"process": e.process, "partition": part_name(&part), "from": before, "to": hw, "at_s": secs(e.time)})
                    });
                }
            }
            last_hw.insert(key, hw);
        }
        let log = reference.get(&part);
        for &(o, _) in &e.records {
            let key = (e.process.as_str(), e.session, part.clone());
            if let Some(&prev) = last.get(&key) {
                if o <= prev {
                    nonmonotonic.add(|| {
                        json!({"process": e.process, "session": e.session, "partition": part_name(&part),
                               "offset": o, "after": prev, "at_s": secs(e.time)})
                    });
                } else if let Some(log) = log {
                    if prev + 1 >= log.start {
                        if let Some((&missed, v)) = log.records.range(prev + 1..o).next() {
                            skip.add(|| {
                                json!({"process": e.process, "session": e.session, "partition": part_name(&part),
                                       "from": prev, "to": o, "skipped": [missed, v], "at_s": secs(e.time)})
                            });
                        }
                    }
                }
            }
            last.insert(key, o);
        }
    }
    (nonmonotonic.done(), skip.done(), regression.done())
}

/// A commit of one partition's offset, as the history shows it.
struct CommitOp {
    invoked: u64,
    /// When it completed, and how; `None`: it never did.
    completed: Option<(u64, Type)>,
    offset: u64,
}

/// A group's committed offset read back below what was last acknowledged.
///
/// For a read invoked at `t`: let L be the `ok` commit of that partition
/// that completed last before `t`. Any commit that completed after L was
/// invoked, or whose outcome is unknown, may have been applied after L, so
/// the read may return the lowest of those; below that, an acknowledged
/// commit was lost.
fn lost_commits(history: &[Event]) -> Check {
    let mut tally = Tally::new(Verdict::Fail);
    let mut invoked_at: HashMap<&str, (u64, &Event)> = HashMap::new();
    let mut commits: HashMap<(String, String, u32), Vec<CommitOp>> = HashMap::new();
    let mut open: HashMap<&str, Vec<(String, String, u32, usize)>> = HashMap::new();
    let mut reads: Vec<(u64, &Event)> = Vec::new();
    for e in history.iter().filter(|e| matches!(e.f, F::Commit | F::Position)) {
        let group = e.group.clone().unwrap_or_default();
        match (e.f, e.kind) {
            (F::Commit, Type::Invoke) => {
                let mut ops = Vec::new();
                for c in &e.offsets {
                    let key = (group.clone(), c.topic.clone(), c.partition);
                    let list = commits.entry(key.clone()).or_default();
                    list.push(CommitOp {
                        invoked: e.time,
                        completed: None,
                        offset: c.offset,
                    });
                    ops.push((key.0, key.1, key.2, list.len() - 1));
                }
                open.insert(e.process.as_str(), ops);
            }
            (F::Commit, kind) => {
                for (g, t, p, i) in open.remove(e.process.as_str()).unwrap_or_default() {
                    if let Some(op) = commits.get_mut(&(g, t, p)).and_then(|l| l.get_mut(i)) {
                        op.completed = Some((e.time, kind));
                    }
                }
            }
            (F::Position, Type::Invoke) => {
                invoked_at.insert(e.process.as_str(), (e.time, e));
            }
            (F::Position, Type::Ok) => {
                if let Some((t, _)) = invoked_at.remove(e.process.as_str()) {
                    reads.push((t, e));
                }
            }
            _ => {}
        }
    }
    for (t, read) in reads {
        let group = read.group.clone().unwrap_or_default();
        let got: HashMap<(&str, u32), u64> = read
            .offsets
            .iter()
            .map(|c| ((c.topic.as_str(), c.partition), c.offset))
            .collect();
        for ((g, topic, p), ops) in &commits {
            if *g != group {
                continue;
            }
            let Some(last) = ops
                .iter()
                .filter(|c| matches!(c.completed, Some((done, Type::Ok)) if done < t))
                .max_by_key(|c| c.completed.map(|(d, _)| d))
            else {
                continue;
            };
            let floor = ops
                .iter()
                .filter(|c| c.invoked < t)
                .filter(|c| match c.completed {
                    Some((done, Type::Ok | Type::Info)) => done > last.invoked || done >= t,
                    Some((_, Type::Fail)) => false,
                    Some((_, Type::Invoke)) | None => true,
                })
                .map(|c| c.offset)
                .chain([last.offset])
                .min()
                .unwrap_or(last.offset);
            let read_offset = got.get(&(topic.as_str(), *p)).copied();
            if read_offset.is_none_or(|r| r < floor) {
                tally.add(|| {
                    json!({"group": g, "topic": topic, "partition": p, "read": read_offset,
                           "acknowledged": last.offset, "read_at_s": secs(t)})
                });
            }
        }
    }
    tally.done()
}

/// Per fault: the longest time without an `ok` send on any partition, and
/// the longest on one partition, from the fault's start until the first
/// ack after the fault ended; per partition, the longest gap between acks
/// over the whole run.
fn availability(sends_ok: &[&Event], faults: &[Fault], history: &[Event]) -> Availability {
    let mut acks: BTreeMap<Part, Vec<u64>> = BTreeMap::new();
    for e in sends_ok {
        if let Some(part) = part_of(e) {
            acks.entry(part).or_default().push(e.time);
        }
    }
    let all: Vec<u64> = sends_ok.iter().map(|e| e.time).collect();
    let end = history.last().map_or(0, |e| e.time);
    let leaders_seen = history.iter().any(|e| e.f == F::Leader);
    let mut out = Availability::default();
    for f in faults {
        let (any_gap, recovered) = gap_around(&all, f, end);
        let mut worst: Option<(u64, &Part)> = None;
        for (part, times) in &acks {
            let (gap, _) = gap_around(times, f, end);
            if worst.is_none_or(|(w, _)| gap > w) {
                worst = Some((gap, part));
            }
        }
        let (part_gap, part) = worst.map_or((0, String::new()), |(g, p)| (g, part_name(p)));
        let mut entry = json!({
            "fault": f.name, "start_s": secs(f.start), "duration_s": secs(f.end.saturating_sub(f.start)),
            "longest_gap_s": secs(any_gap), "recovered": recovered,
            "partition_longest_gap_s": secs(part_gap), "partition": part,
        });
        if leaders_seen {
            // A cluster run: every partition's own gap after the fault.
            let per: BTreeMap<String, f64> = acks
                .iter()
                .map(|(p, times)| (part_name(p), secs(gap_around(times, f, end).0)))
                .collect();
            entry["partitions"] = json!(per);
        }
        out.after_faults.push(entry);
    }
    out.elections = elections(history, faults);
    for (part, times) in &acks {
        let gap = times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        out.longest_gap_s.insert(part_name(part), secs(gap));
    }
    out
}

/// Leader changes in the history's `leader` events (the first leader of a
/// partition is no change), split by whether a fault was active.
fn elections(history: &[Event], faults: &[Fault]) -> Elections {
    let mut out = Elections::default();
    let mut last: HashMap<Part, (Option<u32>, Option<u64>)> = HashMap::new();
    for e in history.iter().filter(|e| e.f == F::Leader) {
        let Some(part) = part_of(e) else { continue };
        let before = last.insert(part.clone(), (e.node, e.term));
        if before.is_none() {
            continue;
        }
        if faults.iter().any(|f| f.start <= e.time && e.time <= f.end) {
            out.during_faults += 1;
            continue;
        }
        out.without_faults += 1;
        if out.without_faults_seen.len() < WITNESSES_MAX {
            let since = faults
                .iter()
                .filter(|f| f.end < e.time)
                .map(|f| secs(e.time - f.end))
                .reduce(f64::min);
            out.without_faults_seen.push(json!({
                "partition": part_name(&part), "at_s": secs(e.time), "leader": e.node,
                "term": e.term, "since_last_fault_s": since,
            }));
        }
    }
    out
}

/// The longest gap between the ack times `times` (sorted) from `f`'s
/// start to the first ack after it ended (or to `end`), and whether such
/// an ack came.
fn gap_around(times: &[u64], f: &Fault, end: u64) -> (u64, bool) {
    let mut last = f.start;
    let mut longest = 0;
    for &t in times.iter().filter(|&&t| t >= f.start) {
        longest = longest.max(t - last);
        last = t;
        if t >= f.end {
            return (longest, true);
        }
    }
    (longest.max(end.saturating_sub(last)), false)
}

#[cfg(test)]
mod tests {
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
        // A shorter replica is no divergence: only below the common HW.
        finals.push(node(3, &[(0, "w0-1"), (1, "w1-1")]));
        assert!(check(&h.events, &finals, &[]).valid);
        finals.push(node(4, &[(0, "w0-1"), (1, "w7-7"), (2, "w0-2")]));
        let r = check(&h.events, &finals, &[]);
        assert!(failing(&r).contains(&"divergence"), "{:?}", failing(&r));
        assert_eq!(r.checks["divergence"].count, 1);
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
}
