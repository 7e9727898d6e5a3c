//! The partitions a shard owns: each one's log and, in cluster mode, its
//! replica's Raft group (the one place that knows a partition is
//! replicated), found by topic then partition without allocating.

use std::collections::HashMap;

use es_raft::PartitionRaft;
use es_storage::PartitionLog;

/// One owned partition. Its metrics (`es_partition_high_watermark`) are
/// read from the log at each scrape (operate/metrics_live.rs), not kept in the
/// exporter's registry, so a removed partition leaves no series.
pub struct Owned {
    pub log: PartitionLog,
    /// Cluster mode: this node's replica of the partition (its log is
    /// `log`); `None` standalone.
    pub raft: Option<PartitionRaft>,
}

/// A partition `OwnedPartitions::insert` refused: it is open already. The
/// log that was to be added comes back, for its caller to close.
pub struct Taken {
    pub topic: String,
    pub partition: u32,
    pub log: PartitionLog,
}

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "partition {}/{} is open already", self.topic, self.partition)
    }
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

    /// Whether `partition` of `topic` is open here.
    pub fn contains(&self, topic: &str, partition: u32) -> bool {
        self.get(topic, partition).is_some()
    }

    /// Adds a partition just opened. A slot already taken is refused, the
    /// log handed back: replacing an open log would leave two logs writing
    /// one directory, the replaced one never closed.
    pub fn insert(&mut self, topic: &str, partition: u32, log: PartitionLog) -> Result<(), Taken> {
        self.insert_replica(topic, partition, log, None)
    }

    /// Adds a partition just opened, with its replica's Raft group in
    /// cluster mode; refused as [`insert`](Self::insert) is.
    pub fn insert_replica(
        &mut self,
        topic: &str,
        partition: u32,
        log: PartitionLog,
        raft: Option<PartitionRaft>,
    ) -> Result<(), Taken> {
        let partitions = self.by_topic.entry(topic.to_string()).or_default();
        match partitions.entry(partition) {
            std::collections::hash_map::Entry::Occupied(_) => Err(Taken {
                topic: topic.to_string(),
                partition,
                log,
            }),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(Owned { log, raft });
                Ok(())
            }
        }
    }

    pub fn remove(&mut self, topic: &str, partition: u32) -> Option<Owned> {
        let partitions = self.by_topic.get_mut(topic)?;
        let owned = partitions.remove(&partition)?;
        if partitions.is_empty() {
            self.by_topic.remove(topic);
        }
        Some(owned)
    }

    /// Removes every partition, for closing.
    pub fn drain(&mut self) -> Vec<(String, u32, Owned)> {
        self.by_topic
            .drain()
            .flat_map(|(topic, partitions)| {
                partitions
                    .into_iter()
                    .map(move |(p, owned)| (topic.clone(), p, owned))
            })
            .collect()
    }

    /// The replica of a partition open here (cluster mode).
    pub fn replica(&self, topic: &str, partition: u32) -> Option<PartitionRaft> {
        self.get(topic, partition)?.raft.clone()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A second log for an open partition is refused and handed back; the
    /// open one stays, and the slot takes a log again once it is removed.
    #[test]
    fn a_taken_slot_is_refused_not_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(256 << 10)
            .make()
            .unwrap()
            .run(async move {
                let batcher = es_storage::FsyncBatcher::new();
                let open = |d: std::path::PathBuf| {
                    let batcher = batcher.clone();
                    async move {
                        PartitionLog::open(&d, es_storage::LogConfig::default(), batcher)
                            .await
                            .unwrap()
                            .0
                    }
                };
                let first = open(dir.join("a")).await;
                let second = open(dir.join("b")).await;
                let mut owned = OwnedPartitions::default();
                assert!(owned.insert("t", 0, first.clone()).is_ok());
                let taken = owned.insert("t", 0, second).expect_err("the slot is taken");
                assert_eq!((taken.topic.as_str(), taken.partition), ("t", 0));
                assert_eq!(taken.to_string(), "partition t/0 is open already");
                assert_eq!(owned.len(), 1);
                assert_eq!(
                    owned.get("t", 0).unwrap().log.dir(),
                    first.dir(),
                    "the open log is kept"
                );
                let again = owned.remove("t", 0).unwrap().log;
                assert!(owned.insert("t", 0, taken.log).is_ok(), "a free slot takes a log");
                again.close().await.unwrap();
                for (_, _, o) in owned.drain() {
                    o.log.close().await.unwrap();
                }
            });
    }
}
