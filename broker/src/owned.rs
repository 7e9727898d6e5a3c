//! The partitions a shard owns: each one's log and the metric handles its
//! requests update, found by topic then partition without allocating.

use std::collections::HashMap;

use es_storage::PartitionLog;

/// One owned partition. Its metrics (`es_partition_high_watermark`) are
/// read from the log at each scrape (metrics_live.rs), not kept in the
/// exporter's registry, so a removed partition leaves no series.
pub struct Owned {
    pub log: PartitionLog,
}

/// Owned partitions by topic, then partition.
#[derive(Default)]
pub struct OwnedPartitions {
    by_topic: HashMap<String, HashMap<u32, Owned>>,
}

impl OwnedPartitions {
    pub fn get(&self, topic: &str, partition: u32) -> Option<&Owned> {
        self.by_topic.get(topic)?.get(&partition)
    }

    pub fn insert(&mut self, topic: &str, partition: u32, log: PartitionLog) {
        self.by_topic
            .entry(topic.to_string())
            .or_default()
            .insert(partition, Owned { log });
    }

    pub fn remove(&mut self, topic: &str, partition: u32) -> Option<PartitionLog> {
        let partitions = self.by_topic.get_mut(topic)?;
        let owned = partitions.remove(&partition)?;
        if partitions.is_empty() {
            self.by_topic.remove(topic);
        }
        Some(owned.log)
    }

    /// Removes every partition, for closing.
    pub fn drain(&mut self) -> Vec<(String, u32, PartitionLog)> {
        self.by_topic
            .drain()
            .flat_map(|(topic, partitions)| {
                partitions
                    .into_iter()
                    .map(move |(p, owned)| (topic.clone(), p, owned.log))
            })
            .collect()
    }

    /// Every partition's log, copied out (a pass that awaits must not hold
    /// the map borrowed).
    pub fn logs(&self) -> Vec<(String, u32, PartitionLog)> {
        self.by_topic
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions
                    .iter()
                    .map(move |(p, owned)| (topic.clone(), *p, owned.log.clone()))
            })
            .collect()
    }

    /// Every partition, by reference (for a pass that does not await).
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32, &Owned)> {
        self.by_topic.iter().flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |(p, owned)| (topic.as_str(), *p, owned))
        })
    }

    pub fn len(&self) -> usize {
        self.by_topic.values().map(HashMap::len).sum()
    }
}
