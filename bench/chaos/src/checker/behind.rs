//! `replica-behind`: in a cluster run, replicas whose final high
//! watermarks differ. The workload has stopped and every fault is healed
//! before the final drain, and the run waits up to 60 s for the replicas
//! to agree (cluster.rs `settle`): a replica still behind then stopped
//! replicating, and the partition runs with fewer copies than it should.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{Check, FinalLog, Tally, Verdict};

/// Partitions whose replicas (the final logs of nodes other than 0, the
/// reference) end at different high watermarks.
pub(super) fn behind(finals: &[FinalLog]) -> Check {
    let mut tally = Tally::new(Verdict::Fail);
    let replicas: Vec<&FinalLog> = finals.iter().filter(|f| f.node != 0).collect();
    let names: BTreeSet<&String> = replicas.iter().flat_map(|f| f.partitions.keys()).collect();
    for name in names {
        let hws: BTreeMap<String, Option<u64>> = replicas
            .iter()
            .map(|f| {
                (
                    f.node.to_string(),
                    f.partitions.get(name).map(|l| l.high_watermark),
                )
            })
            .collect();
        let first = hws.values().next().copied().flatten();
        if hws.len() > 1 && hws.values().any(|h| *h != first) {
            tally.add(|| json!({"partition": name, "high_watermarks": hws}));
        }
    }
    tally.done()
}
