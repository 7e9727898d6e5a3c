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
        ];
        for c in cmds {
            assert_eq!(ControllerCommand::decode(&c.encode()).unwrap(), c);
        }
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
