//! The availability report, never a verdict: per fault the longest wait
//! for an `ok` send, per partition the longest gap between acks, and the
//! leader changes seen during and outside faults.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::{json, Value};

use super::tally::WITNESSES_MAX;
use super::{part_name, part_of, secs, Fault, Part};
use crate::history::{Event, F};

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

/// Per fault: the longest time without an `ok` send on any partition, and
/// the longest on one partition, from the fault's start until the first
/// ack after the fault ended; per partition, the longest gap between acks
/// over the whole run.
pub(super) fn availability(sends_ok: &[&Event], faults: &[Fault], history: &[Event]) -> Availability {
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
