//! `divergence`: replicas whose final logs differ below their common high
//! watermark.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{Check, FinalLog, Log, Tally, Verdict};

/// Replicas whose final logs differ below their common high watermark.
pub(super) fn divergence(finals: &[FinalLog]) -> Check {
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
