//! `ClusterState`: what the controller group holds (the cluster uuid, the
//! node registry, the topics with their replica assignment), and how a
//! command changes it. Applying is deterministic and does the validation,
//! so every node that applies the same log reaches the same state and
//! gives the proposer the same answer (the spec's §3.2).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::controller::command::{refusal, ControllerCommand, Refusal};
use crate::controller::offsets::GroupOffsets;
use crate::controller::producers::ProducerRegistry;
use crate::limits::{CONTROLLER_REPLICATION_FACTOR_DEFAULT, CONTROLLER_TOPIC_PARTITIONS_MAX};
use crate::types::{GroupId, NodeId, CONTROLLER_GROUP};

/// A node's advertised addresses (as clients and peers reach it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node_id: NodeId,
    pub raft_addr: String,
    pub http_addr: String,
    pub binary_addr: String,
    #[serde(default)]
    pub kafka_addr: Option<String>,
}

/// One partition's Raft group and replicas; `replicas[0]` is the
/// preferred leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionAssignment {
    pub group: GroupId,
    pub replicas: Vec<NodeId>,
}

/// A topic: the broker's metadata (opaque here) and, per partition, its
/// group and replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicRecord {
    pub name: String,
    /// The broker's `TopicMeta` as JSON: the broker owns its shape.
    pub meta: Value,
    pub partitions: Vec<PartitionAssignment>,
    /// The controller log index of the CreateTopic that made it.
    pub created_index: u64,
}

/// The cluster's metadata, as of some applied controller entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterState {
    pub cluster_uuid: Option<String>,
    pub nodes: BTreeMap<NodeId, NodeInfo>,
    pub topics: BTreeMap<String, TopicRecord>,
    /// The group id the next partition gets (0 is the controller's).
    pub next_group_id: u64,
    /// Producer ids and epochs issued (`InitProducer`).
    #[serde(default)]
    pub producers: ProducerRegistry,
    /// Consumer groups' committed offsets (`CommitOffsets`,
    /// `DeleteGroup`).
    #[serde(default)]
    pub groups: GroupOffsets,
}

impl Default for ClusterState {
    fn default() -> ClusterState {
        ClusterState {
            cluster_uuid: None,
            nodes: BTreeMap::new(),
            topics: BTreeMap::new(),
            next_group_id: CONTROLLER_GROUP + 1,
            producers: ProducerRegistry::default(),
            groups: GroupOffsets::default(),
        }
    }
}

fn to_json<T: Serialize>(v: &T) -> Value {
    // The state's types are plain data: they always serialize.
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The replicas of partition `p` of a topic whose assignment starts at
/// `start`: `rf` voters in a row from `(p + start) % n` of the sorted
/// `voters` (Kafka's round robin, shifted per topic so that the preferred
/// leaders of small topics do not all land on the first node).
pub fn replicas_of(voters: &[NodeId], p: u64, start: u64, rf: usize) -> Vec<NodeId> {
    let n = voters.len() as u64;
    (0..rf as u64)
        .map(|i| voters[((p % n + i + start % n) % n) as usize])
        .collect()
}

impl ClusterState {
    /// The group a partition of `topic` belongs to.
    pub fn group_of(&self, topic: &str, partition: u32) -> Option<GroupId> {
        self.topics
            .get(topic)?
            .partitions
            .get(partition as usize)
            .map(|a| a.group)
    }

    /// Applies `cmd`, the entry at `index`, with `voters` the controller's
    /// voters at that entry (sorted). A refused command changes nothing.
    pub fn apply(&mut self, index: u64, voters: &[NodeId], cmd: ControllerCommand) -> Result<Value, Refusal> {
        match cmd {
            ControllerCommand::ClusterInit { uuid } => {
                if uuid.is_empty() {
                    return Err(Refusal::new(refusal::INVALID_REQUEST, "an empty cluster uuid"));
                }
                let uuid = self.cluster_uuid.get_or_insert(uuid);
                Ok(Value::String(uuid.clone()))
            }
            ControllerCommand::RegisterNode(info) => {
                let v = to_json(&info);
                self.nodes.insert(info.node_id, info);
                Ok(v)
            }
            ControllerCommand::CreateTopic {
                name,
                meta,
                partitions,
                replication_factor,
            } => {
                if self.topics.contains_key(&name) {
                    return Err(Refusal::new(
                        refusal::TOPIC_EXISTS,
                        format!("topic {name} exists"),
                    ));
                }
                if partitions == 0 || partitions > CONTROLLER_TOPIC_PARTITIONS_MAX {
                    return Err(Refusal::new(
                        refusal::INVALID_REQUEST,
                        format!("{partitions} partitions: from 1 to {CONTROLLER_TOPIC_PARTITIONS_MAX}"),
                    ));
                }
                let n = voters.len() as u32;
                let rf = replication_factor.unwrap_or(CONTROLLER_REPLICATION_FACTOR_DEFAULT.min(n));
                if rf == 0 || n == 0 {
                    return Err(Refusal::new(
                        refusal::INVALID_REQUEST,
                        "a replication factor of 0",
                    ));
                }
                if rf > n {
                    return Err(Refusal::new(
                        refusal::REPLICATION_FACTOR_TOO_LARGE,
                        format!("replication factor {rf} is larger than the {n} nodes of the cluster"),
                    ));
                }
                let start = self.next_group_id;
                let assignment: Vec<PartitionAssignment> = (0..partitions as u64)
                    .map(|p| PartitionAssignment {
                        group: start + p,
                        replicas: replicas_of(voters, p, start, rf as usize),
                    })
                    .collect();
                self.next_group_id = start + partitions as u64;
                let record = TopicRecord {
                    name: name.clone(),
                    meta,
                    partitions: assignment,
                    created_index: index,
                };
                let v = to_json(&record);
                self.topics.insert(name, record);
                Ok(v)
            }
            ControllerCommand::DeleteTopic { name } => match self.topics.remove(&name) {
                Some(r) => {
                    self.groups.topic_deleted(&name);
                    Ok(to_json(&r))
                }
                None => Err(Refusal::new(refusal::TOPIC_NOT_FOUND, format!("no topic {name}"))),
            },
            ControllerCommand::PatchTopic { name, meta } => match self.topics.get_mut(&name) {
                Some(r) => {
                    r.meta = meta;
                    Ok(to_json(r))
                }
                None => Err(Refusal::new(refusal::TOPIC_NOT_FOUND, format!("no topic {name}"))),
            },
            ControllerCommand::InitProducer {
                existing,
                owner,
                admin,
            } => self.producers.init(existing, owner.as_deref(), admin),
            ControllerCommand::CommitOffsets { group, offsets } => {
                self.groups.commit(&self.topics, group, offsets)
            }
            ControllerCommand::DeleteGroup { group } => self.groups.delete(&group),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;

    fn create(name: &str, partitions: u32, rf: Option<u32>) -> ControllerCommand {
        ControllerCommand::CreateTopic {
            name: name.into(),
            meta: json!({"name": name, "partitions": partitions}),
            partitions,
            replication_factor: rf,
        }
    }

    #[test]
    fn topics_get_groups_in_order_and_replicas_spread() {
        let voters = [1, 2, 3];
        let mut s = ClusterState::default();
        let r = s.apply(5, &voters, create("a", 3, None)).unwrap();
        let a: TopicRecord = serde_json::from_value(r).unwrap();
        assert_eq!(a, s.topics["a"], "the result is the record");
        assert_eq!(a.created_index, 5);
        assert_eq!(
            a.partitions.iter().map(|p| p.group).collect::<Vec<_>>(),
            [1, 2, 3],
            "group 0 is the controller's"
        );
        for p in &a.partitions {
            assert_eq!(p.replicas.len(), 3, "rf defaults to min(3, voters)");
            assert_eq!(p.replicas.iter().collect::<BTreeSet<_>>().len(), 3, "distinct");
        }
        let leaders: BTreeSet<NodeId> = a.partitions.iter().map(|p| p.replicas[0]).collect();
        assert_eq!(leaders.len(), 3, "each node prefers to lead one partition");
        assert_eq!(s.next_group_id, 4);

        // Topics of one partition each still spread their leaders.
        let mut firsts = BTreeSet::new();
        for t in ["b", "c", "d"] {
            s.apply(6, &voters, create(t, 1, Some(1))).unwrap();
            firsts.insert(s.topics[t].partitions[0].replicas[0]);
        }
        assert_eq!(firsts.len(), 3, "one-partition topics do not all land on node 1");
        assert_eq!(s.group_of("d", 0), Some(6));
        assert_eq!(s.group_of("d", 1), None);

        // rf 2 of 5 voters: consecutive voters, every node used.
        let five = [1, 2, 3, 4, 5];
        let r = s.apply(7, &five, create("e", 5, Some(2))).unwrap();
        let e: TopicRecord = serde_json::from_value(r).unwrap();
        let mut used = BTreeSet::new();
        for p in &e.partitions {
            assert_eq!(p.replicas.len(), 2);
            assert_ne!(p.replicas[0], p.replicas[1]);
            used.extend(p.replicas.iter().copied());
        }
        assert_eq!(used.len(), 5);
    }

    #[test]
    fn refusals_change_nothing() {
        let voters = [1, 2, 3];
        let mut s = ClusterState::default();
        s.apply(1, &voters, create("a", 2, None)).unwrap();
        let before = s.clone();
        let code = |r: Result<Value, Refusal>| r.unwrap_err().code;
        let mut t = s.clone();
        assert_eq!(
            code(t.apply(2, &voters, create("a", 1, None))),
            refusal::TOPIC_EXISTS
        );
        assert_eq!(
            code(t.apply(2, &voters, create("b", 1, Some(4)))),
            refusal::REPLICATION_FACTOR_TOO_LARGE
        );
        assert_eq!(
            code(t.apply(2, &voters, create("b", 0, None))),
            refusal::INVALID_REQUEST
        );
        assert_eq!(
            code(t.apply(2, &voters, create("b", 1, Some(0)))),
            refusal::INVALID_REQUEST
        );
        assert_eq!(
            code(t.apply(2, &voters, create("b", CONTROLLER_TOPIC_PARTITIONS_MAX + 1, None))),
            refusal::INVALID_REQUEST
        );
        assert_eq!(
            code(t.apply(2, &voters, ControllerCommand::DeleteTopic { name: "x".into() })),
            refusal::TOPIC_NOT_FOUND
        );
        assert_eq!(
            code(t.apply(
                2,
                &voters,
                ControllerCommand::PatchTopic {
                    name: "x".into(),
                    meta: json!({})
                }
            )),
            refusal::TOPIC_NOT_FOUND
        );
        assert_eq!(t, before);
        // rf 1 of 1 voter is fine; the default follows the voters.
        let mut one = ClusterState::default();
        let r: TopicRecord =
            serde_json::from_value(one.apply(1, &[7], create("a", 2, None)).unwrap()).unwrap();
        assert!(r.partitions.iter().all(|p| p.replicas == [7]));
    }

    #[test]
    fn init_register_patch_delete() {
        let voters = [1, 2, 3];
        let mut s = ClusterState::default();
        let init = |u: &str| ControllerCommand::ClusterInit { uuid: u.into() };
        assert_eq!(s.apply(1, &voters, init("u1")).unwrap(), json!("u1"));
        assert_eq!(
            s.apply(2, &voters, init("u2")).unwrap(),
            json!("u1"),
            "the first uuid stays"
        );
        assert_eq!(s.cluster_uuid.as_deref(), Some("u1"));
        let node = |addr: &str| NodeInfo {
            node_id: 2,
            raft_addr: addr.into(),
            http_addr: "h".into(),
            binary_addr: "b".into(),
            kafka_addr: None,
        };
        s.apply(3, &voters, ControllerCommand::RegisterNode(node("r1")))
            .unwrap();
        s.apply(4, &voters, ControllerCommand::RegisterNode(node("r2")))
            .unwrap();
        assert_eq!(s.nodes.len(), 1);
        assert_eq!(s.nodes[&2].raft_addr, "r2", "replaced");
        s.apply(5, &voters, create("t", 2, None)).unwrap();
        let patched = s
            .apply(
                6,
                &voters,
                ControllerCommand::PatchTopic {
                    name: "t".into(),
                    meta: json!({"retention_ms": 5}),
                },
            )
            .unwrap();
        assert_eq!(patched["meta"], json!({"retention_ms": 5}));
        assert_eq!(patched["created_index"], json!(5), "the assignment stays");
        let deleted = s
            .apply(7, &voters, ControllerCommand::DeleteTopic { name: "t".into() })
            .unwrap();
        assert_eq!(deleted["name"], json!("t"));
        assert!(s.topics.is_empty());
        assert_eq!(s.next_group_id, 3, "group ids are never reused");
    }

    #[test]
    fn offsets_commit_to_existing_partitions_and_go_with_their_topic() {
        let voters = [1, 2, 3];
        let mut s = ClusterState::default();
        s.apply(1, &voters, create("t", 2, None)).unwrap();
        s.apply(2, &voters, create("u", 1, None)).unwrap();
        let commit = |g: &str, o: Vec<((&str, u32), u64)>| ControllerCommand::CommitOffsets {
            group: g.into(),
            offsets: o.into_iter().map(|((t, p), o)| ((t.to_string(), p), o)).collect(),
        };
        let r = s
            .apply(3, &voters, commit("g", vec![(("t", 1), 5), (("u", 0), 2)]))
            .unwrap();
        assert_eq!(r["group"], json!("g"));
        assert_eq!(r["offsets"].as_array().unwrap().len(), 2);
        let r = s
            .apply(4, &voters, commit("g", vec![(("t", 1), 9), (("t", 0), 1)]))
            .unwrap();
        assert_eq!(
            r["offsets"],
            json!([
                {"topic": "t", "partition": 0, "offset": 1},
                {"topic": "t", "partition": 1, "offset": 9},
                {"topic": "u", "partition": 0, "offset": 2},
            ]),
            "all of the group's offsets, the new ones in place"
        );
        let before = s.clone();
        let code = |r: Result<Value, Refusal>| r.unwrap_err().code;
        assert_eq!(
            code(s.apply(5, &voters, commit("g", vec![(("x", 0), 1)]))),
            refusal::TOPIC_NOT_FOUND
        );
        assert_eq!(
            code(s.apply(5, &voters, commit("g", vec![(("t", 0), 1), (("t", 2), 1)]))),
            refusal::PARTITION_NOT_FOUND,
            "one bad partition refuses the whole commit"
        );
        assert_eq!(
            code(s.apply(5, &voters, commit("g", vec![]))),
            refusal::INVALID_REQUEST
        );
        assert_eq!(
            code(s.apply(5, &voters, commit("", vec![(("t", 0), 1)]))),
            refusal::INVALID_REQUEST
        );
        assert_eq!(
            code(s.apply(5, &voters, ControllerCommand::DeleteGroup { group: "h".into() })),
            refusal::GROUP_NOT_FOUND
        );
        assert_eq!(s, before, "refusals change nothing");
        s.apply(5, &voters, commit("h", vec![(("t", 0), 3)])).unwrap();
        s.apply(6, &voters, ControllerCommand::DeleteTopic { name: "t".into() })
            .unwrap();
        assert_eq!(
            crate::controller::offsets::offsets_json(s.groups.get("g").unwrap()),
            json!([{"topic": "u", "partition": 0, "offset": 2}]),
            "a deleted topic's offsets go"
        );
        assert!(s.groups.get("h").unwrap().is_empty(), "the group stays");
        let deleted = s
            .apply(7, &voters, ControllerCommand::DeleteGroup { group: "g".into() })
            .unwrap();
        assert_eq!(deleted["offsets"].as_array().unwrap().len(), 1);
        assert!(s.groups.get("g").is_none());
    }

    #[test]
    fn producers_are_issued_through_apply() {
        let mut s = ClusterState::default();
        let init = |existing| ControllerCommand::InitProducer {
            existing,
            owner: None,
            admin: false,
        };
        assert_eq!(
            s.apply(1, &[1], init(None)).unwrap(),
            json!({"producer_id": 0, "epoch": 0})
        );
        assert_eq!(
            s.apply(2, &[1], init(None)).unwrap(),
            json!({"producer_id": 1, "epoch": 0})
        );
        assert_eq!(
            s.apply(3, &[1], init(Some(0))).unwrap(),
            json!({"producer_id": 0, "epoch": 1})
        );
        assert_eq!(
            s.apply(4, &[1], init(Some(9))).unwrap_err().code,
            refusal::UNKNOWN_PRODUCER_ID
        );
        assert_eq!(
            s.producers.check(0, 0).unwrap_err().code,
            refusal::PRODUCER_FENCED
        );
    }

    #[test]
    fn a_state_of_the_earlier_format_reads_with_no_producers_or_groups() {
        let v = json!({"cluster_uuid": "u", "nodes": {}, "topics": {}, "next_group_id": 4});
        let s: ClusterState = serde_json::from_value(v).unwrap();
        assert_eq!(s.producers, ProducerRegistry::default());
        assert_eq!(s.groups, GroupOffsets::default());
    }

    #[test]
    fn the_same_commands_give_the_same_state_and_it_round_trips_as_json() {
        let cmds = || {
            vec![
                ControllerCommand::ClusterInit { uuid: "u".into() },
                create("a", 4, None),
                create("b", 2, Some(2)),
                create("a", 1, None),
                ControllerCommand::DeleteTopic { name: "b".into() },
                create("c", 3, Some(1)),
                ControllerCommand::InitProducer {
                    existing: None,
                    owner: Some("k".into()),
                    admin: false,
                },
                ControllerCommand::InitProducer {
                    existing: Some(0),
                    owner: None,
                    admin: true,
                },
                ControllerCommand::CommitOffsets {
                    group: "g".into(),
                    offsets: vec![(("c".into(), 2), 10), (("a".into(), 0), 3)],
                },
            ]
        };
        let run = || {
            let mut s = ClusterState::default();
            let outcomes: Vec<_> = cmds()
                .into_iter()
                .enumerate()
                .map(|(i, c)| s.apply(i as u64 + 1, &[1, 2, 3], c))
                .collect();
            (s, outcomes)
        };
        let (a, oa) = run();
        let (b, ob) = run();
        assert_eq!(a, b);
        assert_eq!(oa, ob);
        let back: ClusterState = serde_json::from_value(to_json(&a)).unwrap();
        assert_eq!(back, a);
    }
}
