//! Where each partition leads: the workload's routing table in a cluster
//! run. Learned from `GET /v1/topics/{t}` (`partitions[i].leader`, a node
//! id, and `leader_term` where the broker reports it) and from the
//! `error.leader.node_id` of a 421 `not_leader`. A lookup that sees a new
//! leader records a `leader` event in the history (a higher term, or a
//! different node where no term is reported), so the checker can count
//! the elections that happened while no fault was active.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::checker::Part;
use crate::history::{Event, Recorder, Type, F};

#[derive(Default)]
pub struct Leaders {
    /// The leader each partition was last said to have.
    known: Mutex<HashMap<Part, u32>>,
    /// The last leader (and its term) a describe showed, per partition.
    seen: Mutex<HashMap<Part, (Option<u64>, u32)>>,
}

impl Leaders {
    /// The node `part` was last said to be led by.
    pub fn get(&self, part: &Part) -> Option<u32> {
        self.known.lock().expect("leaders lock").get(part).copied()
    }

    /// A 421 named `node` as the leader of `part`.
    pub fn hint(&self, part: &Part, node: u32) {
        self.known
            .lock()
            .expect("leaders lock")
            .insert(part.clone(), node);
    }

    /// The leader of `part` is not known any more (a refusal without a
    /// hint, a leader that does not answer).
    pub fn forget(&self, part: &Part) {
        self.known.lock().expect("leaders lock").remove(part);
    }

    /// Learns the leaders in a describe answer `v` of `topic`, recording a
    /// `leader` event (as `process`) for each partition whose leader
    /// changed. The partitions without a leader.
    pub fn learn(&self, rec: &Recorder, process: &str, topic: &str, v: &Value) -> Vec<Part> {
        let mut leaderless = Vec::new();
        for p in v["partitions"].as_array().into_iter().flatten() {
            let Some(partition) = p["partition"].as_u64().and_then(|p| u32::try_from(p).ok()) else {
                continue;
            };
            let part = (topic.to_string(), partition);
            let Some(leader) = p["leader"].as_u64().and_then(|n| u32::try_from(n).ok()) else {
                leaderless.push(part);
                continue;
            };
            let term = p["leader_term"].as_u64();
            let mut seen = self.seen.lock().expect("leaders lock");
            let (changed, stale) = match (seen.get(&part), term) {
                (None, _) => (true, false),
                // A term only moves forward: an older view (a node cut off
                // from the leader) is not an election, nor where to send.
                (Some(&(Some(old), _)), Some(new)) => (new > old, new < old),
                (Some(&(_, node)), _) => (node != leader, false),
            };
            if !stale {
                self.hint(&part, leader);
            }
            if changed {
                seen.insert(part.clone(), (term, leader));
                let mut e = Event::new(process, Type::Ok, F::Leader).on(topic, partition);
                e.node = Some(leader);
                e.term = term;
                rec.record(e);
            }
        }
        leaderless
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Instant;

    #[test]
    fn a_new_term_or_node_is_recorded_a_stale_view_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let rec = Recorder::create(&path, Instant::now()).unwrap();
        let l = Leaders::default();
        let d = |leader: Value, term: u64| {
            json!({"partitions": [{"partition": 0, "leader": leader, "leader_term": term},
                                  {"partition": 1, "leader": null}]})
        };
        assert_eq!(
            l.learn(&rec, "l0", "t", &d(json!(1), 3)),
            vec![("t".to_string(), 1)]
        );
        l.learn(&rec, "l0", "t", &d(json!(1), 3));
        // A stale view (term 2 < 3) neither counts nor reroutes.
        l.learn(&rec, "l0", "t", &d(json!(2), 2));
        assert_eq!(l.get(&("t".into(), 0)), Some(1));
        l.learn(&rec, "l0", "t", &d(json!(2), 4));
        assert_eq!(l.get(&("t".into(), 0)), Some(2));
        l.hint(&("t".into(), 0), 3);
        assert_eq!(l.get(&("t".into(), 0)), Some(3));
        rec.flush().unwrap();
        let events = crate::history::read(&path).unwrap();
        let seen: Vec<(Option<u32>, Option<u64>)> = events.iter().map(|e| (e.node, e.term)).collect();
        assert_eq!(seen, vec![(Some(1), Some(3)), (Some(2), Some(4))]);
    }
}
