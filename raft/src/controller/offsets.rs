//! `GroupOffsets`: consumer groups' committed offsets, in the controller
//! group (the spec's §3.3). The coordinator logic (members, generations,
//! assignment) stays in the broker, on the controller leader's node; what
//! must survive a failover, the commits, is applied here on every node:
//! `CommitOffsets` and `DeleteGroup`. Deleting a topic drops its offsets
//! from every group.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::controller::command::{refusal, Refusal};
use crate::controller::state::TopicRecord;
use crate::limits::{CONTROLLER_GROUPS_MAX, CONTROLLER_GROUP_NAME_BYTES_MAX, CONTROLLER_GROUP_OFFSETS_MAX};

/// One group's committed offsets: topic → partition → offset.
pub type Committed = BTreeMap<String, BTreeMap<u32, u64>>;

/// Every group's committed offsets, as of an applied controller entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GroupOffsets(pub BTreeMap<String, Committed>);

/// A group's offsets as the broker answers them:
/// `[{"topic", "partition", "offset"}, ..]`, sorted.
pub fn offsets_json(c: &Committed) -> Value {
    Value::Array(
        c.iter()
            .flat_map(|(t, ps)| {
                ps.iter()
                    .map(move |(p, o)| json!({"topic": t, "partition": p, "offset": o}))
            })
            .collect(),
    )
}

impl GroupOffsets {
    /// A group's committed offsets.
    pub fn get(&self, group: &str) -> Option<&Committed> {
        self.0.get(group)
    }

    /// Applies `CommitOffsets`: every partition must exist in `topics`;
    /// a group not seen before is created. Answers
    /// `{"group", "offsets": [..]}` (all of the group's offsets).
    pub fn commit(
        &mut self,
        topics: &BTreeMap<String, TopicRecord>,
        group: String,
        offsets: Vec<((String, u32), u64)>,
    ) -> Result<Value, Refusal> {
        let invalid = |m: String| Err(Refusal::new(refusal::INVALID_REQUEST, m));
        if group.is_empty() || group.len() > CONTROLLER_GROUP_NAME_BYTES_MAX {
            return invalid(format!(
                "a group name of {} bytes: from 1 to {CONTROLLER_GROUP_NAME_BYTES_MAX}",
                group.len()
            ));
        }
        if offsets.is_empty() {
            return invalid("offsets must hold at least one offset".into());
        }
        for ((t, p), _) in &offsets {
            let Some(record) = topics.get(t) else {
                return Err(Refusal::new(refusal::TOPIC_NOT_FOUND, format!("no topic {t}")));
            };
            let n = record.partitions.len();
            if *p as usize >= n {
                return Err(Refusal::new(
                    refusal::PARTITION_NOT_FOUND,
                    format!("topic {t} has no partition {p} (it has {n})"),
                ));
            }
        }
        if !self.0.contains_key(&group) && self.0.len() >= CONTROLLER_GROUPS_MAX {
            return Err(Refusal::new(
                refusal::TOO_MANY_GROUPS,
                format!("the cluster holds {CONTROLLER_GROUPS_MAX} groups with offsets: delete one first"),
            ));
        }
        let mut next = self.0.get(&group).cloned().unwrap_or_default();
        for ((t, p), o) in offsets {
            next.entry(t).or_default().insert(p, o);
        }
        let n: usize = next.values().map(BTreeMap::len).sum();
        if n > CONTROLLER_GROUP_OFFSETS_MAX {
            return invalid(format!(
                "group {group:?} would hold {n} offsets, over {CONTROLLER_GROUP_OFFSETS_MAX}"
            ));
        }
        let v = json!({"group": &group, "offsets": offsets_json(&next)});
        self.0.insert(group, next);
        Ok(v)
    }

    /// Applies `DeleteGroup`; answers `{"group", "offsets": [..]}` of the
    /// group deleted.
    pub fn delete(&mut self, group: &str) -> Result<Value, Refusal> {
        match self.0.remove(group) {
            Some(c) => Ok(json!({"group": group, "offsets": offsets_json(&c)})),
            None => Err(Refusal::new(
                refusal::GROUP_NOT_FOUND,
                format!("group {group:?} does not exist"),
            )),
        }
    }

    /// A topic was deleted: its offsets go from every group (the groups
    /// stay, possibly empty: their members may commit elsewhere).
    pub fn topic_deleted(&mut self, topic: &str) {
        for c in self.0.values_mut() {
            c.remove(topic);
        }
    }
}

impl crate::controller::Controller {
    /// Commits a group's offsets (through the controller leader wherever
    /// it is); answered once applied: `{"group", "offsets"}` or a refusal
    /// (`topic_not_found`, `partition_not_found`, `too_many_groups`,
    /// `invalid_request`).
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<((String, u32), u64)>,
    ) -> Result<Result<Value, Refusal>, crate::controller::ControllerError> {
        self.propose(crate::controller::ControllerCommand::CommitOffsets {
            group: group.to_string(),
            offsets,
        })
        .await
    }

    /// Deletes a group's offsets; `group_not_found` if it has none.
    pub async fn delete_group(
        &self,
        group: &str,
    ) -> Result<Result<Value, Refusal>, crate::controller::ControllerError> {
        self.propose(crate::controller::ControllerCommand::DeleteGroup {
            group: group.to_string(),
        })
        .await
    }

    /// A group's committed offsets as this node applied them (run
    /// `read_barrier` first to see every commit answered anywhere).
    pub fn committed(&self, group: &str) -> Option<Committed> {
        self.state().groups.get(group).cloned()
    }
}
