//! A consumer group's committed offsets, held compactly: one entry per
//! topic, its partitions' offsets sorted in one vector. A group is kept for
//! as long as it has offsets (up to `--groups-max` of them), so this is most
//! of what a group costs: per topic its name and 40 bytes, per partition 16.
//! Capacities are kept exact: a group's vectors never hold spare room.

/// The committed offsets of one group, sorted by topic then partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Committed {
    topics: Vec<TopicOffsets>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct TopicOffsets {
    topic: Box<str>,
    /// `(partition, offset)`, sorted by partition, one per partition.
    partitions: Vec<(u32, u64)>,
}

impl Committed {
    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// Partitions with an offset.
    pub fn len(&self) -> usize {
        self.topics.iter().map(|t| t.partitions.len()).sum()
    }

    /// Sets the offset of one partition (replacing any it had).
    pub fn set(&mut self, topic: &str, partition: u32, offset: u64) {
        let t = match self.topics.binary_search_by(|t| (*t.topic).cmp(topic)) {
            Ok(t) => t,
            Err(at) => {
                self.topics.reserve_exact(1);
                self.topics.insert(
                    at,
                    TopicOffsets {
                        topic: topic.into(),
                        partitions: Vec::new(),
                    },
                );
                at
            }
        };
        let parts = &mut self.topics[t].partitions;
        match parts.binary_search_by_key(&partition, |(p, _)| *p) {
            Ok(p) => parts[p].1 = offset,
            Err(at) => {
                parts.reserve_exact(1);
                parts.insert(at, (partition, offset));
            }
        }
    }

    /// Every `(topic, partition, offset)`, sorted by topic and partition.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32, u64)> + '_ {
        self.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |(p, o)| (&*t.topic, *p, *o)))
    }

    /// Keeps the offsets of the partitions `keep` says yes to; whether any
    /// was dropped.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, u32) -> bool) -> bool {
        let before = self.len();
        for t in &mut self.topics {
            let topic = &*t.topic;
            t.partitions.retain(|(p, _)| keep(topic, *p));
            t.partitions.shrink_to_fit();
        }
        self.topics.retain(|t| !t.partitions.is_empty());
        self.topics.shrink_to_fit();
        self.len() != before
    }

    pub fn clear(&mut self) {
        self.topics = Vec::new();
    }
}

impl<'a> FromIterator<(&'a str, u32, u64)> for Committed {
    fn from_iter<I: IntoIterator<Item = (&'a str, u32, u64)>>(iter: I) -> Committed {
        let mut c = Committed::default();
        for (t, p, o) in iter {
            c.set(t, p, o);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    proptest! {
        /// The same as a sorted map of (topic, partition) to offset, the
        /// last write of a partition winning, with no spare capacity.
        #[test]
        fn behaves_as_a_sorted_map(ops in proptest::collection::vec((0u8..4, 0u32..6, any::<u64>(), any::<bool>()), 0..60)) {
            let mut c = Committed::default();
            let mut model: BTreeMap<(String, u32), u64> = BTreeMap::new();
            for (t, p, o, keep) in ops {
                let topic = format!("t{t}");
                if keep {
                    c.set(&topic, p, o);
                    model.insert((topic, p), o);
                } else {
                    c.retain(|x, q| !(x == topic && q == p));
                    model.remove(&(topic, p));
                }
                let got: Vec<(String, u32, u64)> = c.iter().map(|(t, p, o)| (t.to_string(), p, o)).collect();
                let want: Vec<(String, u32, u64)> = model.iter().map(|((t, p), o)| (t.clone(), *p, *o)).collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(c.len(), model.len());
                prop_assert_eq!(c.topics.capacity(), c.topics.len());
                for t in &c.topics {
                    prop_assert_eq!(t.partitions.capacity(), t.partitions.len());
                }
            }
        }
    }
}
