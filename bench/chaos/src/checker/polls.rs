//! The reader checks: `nonmonotonic-poll`, `poll-skip` and
//! `hw-regression`, over each reader session's polls in history order.

use std::collections::HashMap;

use serde_json::json;

use super::{part_name, part_of, secs, Check, FinalLog, Part, Tally, Verdict};
use crate::history::{Event, Type, F};

/// The reader checks, per (process, session, partition) in history order:
/// non-monotonic offsets, skipped records, and high watermarks going down.
pub(super) fn polls(history: &[Event], reference: &FinalLog) -> (Check, Check, Check) {
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
