//! `ControllerCommand`: what the controller group's log holds, one command
//! per entry (the JSON of the command is the value of the entry's single
//! record), and what applying one gives back: a result or a [`Refusal`].
//!
//! The outcome travels as JSON too (openraft's `Applied::Command` bytes,
//! and the ControllerProposeOk frame of a forwarded command):
//! `{"ok": <result>}` or `{"refused": {"code": .., "message": ..}}`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::controller::state::NodeInfo;

/// A change to the cluster's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ControllerCommand {
    /// Sets the cluster uuid if none is set; gives the uuid in force.
    ClusterInit { uuid: String },
    /// Adds a node's addresses, or replaces them.
    RegisterNode(NodeInfo),
    /// Creates a topic: `meta` is the broker's (kept as it is);
    /// `partitions` and `replication_factor` are raft's to assign
    /// (`None`: three, or every voter when there are fewer).
    CreateTopic {
        name: String,
        meta: Value,
        partitions: u32,
        replication_factor: Option<u32>,
    },
    /// Deletes a topic; gives its record.
    DeleteTopic { name: String },
    /// Replaces a topic's `meta`; gives its record.
    PatchTopic { name: String, meta: Value },
    /// A new producer id (`existing` none), owned by `owner` (the caller's
    /// key id, if any), or the next epoch of `existing` (its owner or an
    /// `admin` only); gives `{"producer_id", "epoch"}`
    /// (`producers.rs`).
    InitProducer {
        existing: Option<i64>,
        #[serde(default)]
        owner: Option<String>,
        #[serde(default)]
        admin: bool,
    },
    /// Sets a consumer group's committed offsets (of existing partitions);
    /// gives `{"group", "offsets"}` with all of the group's offsets
    /// (`offsets.rs`).
    CommitOffsets {
        group: String,
        offsets: Vec<((String, u32), u64)>,
    },
    /// Deletes a consumer group's offsets; gives them.
    DeleteGroup { group: String },
}

/// Why a command was not applied: the same on every node. `code` is one
/// of [`refusal`]'s; the broker maps it to its error table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub code: String,
    pub message: String,
}

/// The codes of a [`Refusal`].
pub mod refusal {
    /// CreateTopic of a name that exists.
    pub const TOPIC_EXISTS: &str = "topic_exists";
    /// DeleteTopic or PatchTopic of a name that does not.
    pub const TOPIC_NOT_FOUND: &str = "topic_not_found";
    /// More replicas asked for than the controller has voters.
    pub const REPLICATION_FACTOR_TOO_LARGE: &str = "replication_factor_too_large";
    /// A command that cannot be applied as it is (no partitions, a
    /// replication factor of 0, bytes that are not a command).
    pub const INVALID_REQUEST: &str = "invalid_request";
    /// CommitOffsets of a partition the topic does not have.
    pub const PARTITION_NOT_FOUND: &str = "partition_not_found";
    /// DeleteGroup of a group with no offsets.
    pub const GROUP_NOT_FOUND: &str = "group_not_found";
    /// CommitOffsets creating a group past `CONTROLLER_GROUPS_MAX`.
    pub const TOO_MANY_GROUPS: &str = "too_many_groups";
    /// InitProducer or a produce with a producer id never issued.
    pub const UNKNOWN_PRODUCER_ID: &str = "unknown_producer_id";
    /// InitProducer of an id owned by another key.
    pub const NOT_OWNER: &str = "not_owner";
    /// A produce by an epoch older than the producer id's current one.
    pub const PRODUCER_FENCED: &str = "producer_fenced";
    /// A produce whose sequence is older than the partition's window.
    pub const DUPLICATE_SEQUENCE: &str = "duplicate_sequence";
    /// A produce whose sequence leaves a gap after the last one written.
    pub const OUT_OF_ORDER_SEQUENCE: &str = "out_of_order_sequence";
}

impl Refusal {
    pub fn new(code: &str, message: impl Into<String>) -> Refusal {
        Refusal {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl ControllerCommand {
    /// The command as its log record's value.
    pub fn encode(&self) -> Vec<u8> {
        // A command is plain data (strings, numbers, JSON values): it
        // always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A command from a log record's value.
    pub fn decode(bytes: &[u8]) -> Result<ControllerCommand, Refusal> {
        serde_json::from_slice(bytes)
            .map_err(|e| Refusal::new(refusal::INVALID_REQUEST, format!("not a controller command: {e}")))
    }

    /// What the command is, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            ControllerCommand::ClusterInit { .. } => "ClusterInit",
            ControllerCommand::RegisterNode(_) => "RegisterNode",
            ControllerCommand::CreateTopic { .. } => "CreateTopic",
            ControllerCommand::DeleteTopic { .. } => "DeleteTopic",
            ControllerCommand::PatchTopic { .. } => "PatchTopic",
            ControllerCommand::InitProducer { .. } => "InitProducer",
            ControllerCommand::CommitOffsets { .. } => "CommitOffsets",
            ControllerCommand::DeleteGroup { .. } => "DeleteGroup",
        }
    }
}

/// An outcome as bytes: `{"ok": ..}` or `{"refused": {..}}`.
pub fn encode_outcome(outcome: &Result<Value, Refusal>) -> Bytes {
    let v = match outcome {
        Ok(v) => json!({ "ok": v }),
        Err(r) => json!({ "refused": r }),
    };
    Bytes::from(v.to_string())
}

/// An outcome from its bytes; `None` when they are not one.
pub fn decode_outcome(bytes: &[u8]) -> Option<Result<Value, Refusal>> {
    let mut v: Value = serde_json::from_slice(bytes).ok()?;
    let o = v.as_object_mut()?;
    if o.len() != 1 {
        return None;
    }
    if let Some(ok) = o.remove("ok") {
        return Some(Ok(ok));
    }
    let r = o.remove("refused")?;
    Some(Err(serde_json::from_value(r).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_outcomes_round_trip() {
        let cmds = [
            ControllerCommand::ClusterInit { uuid: "u".into() },
            ControllerCommand::RegisterNode(NodeInfo {
                node_id: 2,
                raft_addr: "127.0.0.1:1".into(),
                http_addr: "127.0.0.1:2".into(),
                binary_addr: "127.0.0.1:3".into(),
                kafka_addr: None,
            }),
            ControllerCommand::CreateTopic {
                name: "t".into(),
                meta: json!({"partitions": 3, "retention_ms": null}),
                partitions: 3,
                replication_factor: Some(2),
            },
            ControllerCommand::DeleteTopic { name: "t".into() },
            ControllerCommand::PatchTopic {
                name: "t".into(),
                meta: json!({}),
            },
            ControllerCommand::InitProducer {
                existing: Some(4),
                owner: Some("k".into()),
                admin: false,
            },
            ControllerCommand::CommitOffsets {
                group: "g".into(),
                offsets: vec![(("t".into(), 1), 7)],
            },
            ControllerCommand::DeleteGroup { group: "g".into() },
        ];
        for c in cmds {
            assert_eq!(ControllerCommand::decode(&c.encode()).unwrap(), c);
        }
        // The broker may send the fields it uses only.
        assert_eq!(
            ControllerCommand::decode(br#"{"InitProducer":{"existing":null}}"#).unwrap(),
            ControllerCommand::InitProducer {
                existing: None,
                owner: None,
                admin: false
            }
        );
        assert_eq!(
            ControllerCommand::decode(b"{\"Nope\":1}").unwrap_err().code,
            refusal::INVALID_REQUEST
        );
        for o in [
            Ok(json!({"a": [1, 2]})),
            Ok(Value::Null),
            Err(Refusal::new(refusal::TOPIC_EXISTS, "topic t exists")),
        ] {
            assert_eq!(decode_outcome(&encode_outcome(&o)), Some(o));
        }
        assert_eq!(decode_outcome(b"{}"), None);
        assert_eq!(decode_outcome(b"{\"ok\":1,\"refused\":2}"), None);
        assert_eq!(decode_outcome(b"[1]"), None);
    }
}
