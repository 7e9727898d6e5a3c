//! The final logs the checker reads: one replica's log of a partition
//! after the final drain, a node's logs, and the `topic/partition` names
//! that key them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    pub(super) fn get(&self, part: &Part) -> Option<&Log> {
        self.partitions.get(&part_name(part))
    }
}

/// `topic/partition`, the key of a final log's partitions.
pub fn part_name((topic, partition): &Part) -> String {
    format!("{topic}/{partition}")
}

/// `topic/partition` back to its parts (a topic name has no `/`).
pub(super) fn parse_part(name: &str) -> Option<Part> {
    let (topic, p) = name.rsplit_once('/')?;
    Some((topic.to_string(), p.parse().ok()?))
}
