//! One member of a consumer group, as `es consume --group` is: the group
//! requests it makes (join, heartbeat, commit, fetch commits, leave) and
//! how their JSON answers are read (docs/protocol.md, "Group and producer
//! requests"; docs/groups.md). Answers without the expected fields are
//! errors, never panics.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use es_protocol::client::{Client, ClientError};
use es_protocol::{Kind, Request, Response};
use serde_json::{json, Value};

/// What the group gave this member: its id, the generation, and its
/// partitions of the topic.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub member_id: String,
    pub generation: u64,
    pub partitions: BTreeSet<u32>,
}

impl Assignment {
    /// A JoinGroup or Heartbeat answer: `{"member_id","generation","assignments":[{"topic","partition"}]}`.
    pub fn parse(doc: &Value, topic: &str) -> Result<Assignment, ClientError> {
        let bad = |what: &str| {
            ClientError::Protocol(format!("the broker's group answer has no valid {what}: {doc}"))
        };
        let member_id = doc
            .get("member_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("member_id"))?;
        let generation = doc
            .get("generation")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("generation"))?;
        let mut partitions = BTreeSet::new();
        for a in doc
            .get("assignments")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("assignments"))?
        {
            if a.get("topic").and_then(Value::as_str) != Some(topic) {
                continue;
            }
            let p = a
                .get("partition")
                .and_then(Value::as_u64)
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| bad("partition"))?;
            partitions.insert(p);
        }
        Ok(Assignment {
            member_id: member_id.to_string(),
            generation,
            partitions,
        })
    }
}

/// Whether an error means the group no longer knows this member (it
/// expired, or the broker restarted): join again.
pub fn is_lost(e: &ClientError) -> bool {
    matches!(e.code(), Some("unknown_member" | "group_not_found"))
}

/// Whether a commit was refused because the assignment changed: learn the
/// new one (heartbeat) and commit again what is still ours.
pub fn is_rebalanced(e: &ClientError) -> bool {
    matches!(e.code(), Some("stale_generation" | "not_assigned"))
}

#[derive(Clone)]
pub struct Member {
    client: Arc<Client>,
    group: String,
    topic: String,
    session_timeout_ms: u64,
}

impl Member {
    pub fn new(client: Arc<Client>, group: &str, topic: &str, session_timeout_ms: u64) -> Member {
        Member {
            client,
            group: group.to_string(),
            topic: topic.to_string(),
            session_timeout_ms,
        }
    }

    /// Joins as a new member (JoinGroup).
    pub fn join(&self) -> Result<Assignment, ClientError> {
        let body = json!({
            "group": self.group,
            "topics": [self.topic],
            "session_timeout_ms": self.session_timeout_ms,
        });
        Assignment::parse(&self.client.admin(Kind::JoinGroup, body)?, &self.topic)
    }

    /// Says this member is alive; the answer is the current assignment.
    pub fn heartbeat(&self, member_id: &str) -> Result<Assignment, ClientError> {
        self.heartbeat_answer(self.client.call(&self.heartbeat_request(member_id)))
    }

    /// A Heartbeat to send without waiting (pipelined with fetches).
    pub fn heartbeat_request(&self, member_id: &str) -> Request {
        Request::Admin(
            Kind::Heartbeat,
            json!({ "group": self.group, "member_id": member_id }),
        )
    }

    /// The assignment in the answer to a `heartbeat_request`.
    pub fn heartbeat_answer(&self, answer: Result<Response, ClientError>) -> Result<Assignment, ClientError> {
        match answer? {
            Response::AdminOk(doc) => Assignment::parse(&doc, &self.topic),
            other => Err(ClientError::Protocol(format!(
                "the broker answered a heartbeat with {:?}",
                other.kind()
            ))),
        }
    }

    /// Commits `offsets` (partition, next offset to consume) as this
    /// member, in the assignment's generation.
    pub fn commit(&self, assignment: &Assignment, offsets: &[(u32, u64)]) -> Result<(), ClientError> {
        let offsets: Vec<Value> = offsets
            .iter()
            .map(|(p, o)| json!({ "topic": self.topic, "partition": p, "offset": o }))
            .collect();
        let body = json!({
            "group": self.group,
            "member_id": assignment.member_id,
            "generation": assignment.generation,
            "offsets": offsets,
        });
        self.client.admin(Kind::CommitOffsets, body).map(|_| ())
    }

    /// The group's committed offsets for the topic, by partition.
    pub fn committed(&self) -> Result<BTreeMap<u32, u64>, ClientError> {
        let doc = self
            .client
            .admin(Kind::FetchCommits, json!({ "group": self.group }))?;
        let offsets = doc.get("offsets").and_then(Value::as_array).ok_or_else(|| {
            ClientError::Protocol(format!("the broker's commits have no \"offsets\": {doc}"))
        })?;
        let mut out = BTreeMap::new();
        for o in offsets {
            if o.get("topic").and_then(Value::as_str) != Some(self.topic.as_str()) {
                continue;
            }
            let partition = o
                .get("partition")
                .and_then(Value::as_u64)
                .and_then(|p| u32::try_from(p).ok());
            match (partition, o.get("offset").and_then(Value::as_u64)) {
                (Some(p), Some(offset)) => {
                    out.insert(p, offset);
                }
                _ => {
                    return Err(ClientError::Protocol(format!(
                        "the broker's commits hold a malformed offset: {o}"
                    )))
                }
            }
        }
        Ok(out)
    }

    /// Leaves the group: its partitions go to the other members at once.
    pub fn leave(&self, member_id: &str) -> Result<(), ClientError> {
        let body = json!({ "group": self.group, "member_id": member_id });
        self.client.admin(Kind::LeaveGroup, body).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_join_and_heartbeat_answers() {
        let doc = json!({"assignments":[{"partition":2,"topic":"orders"},{"partition":0,"topic":"orders"},
            {"partition":1,"topic":"other"}],"generation":3,"member_id":"m-1-0-4","session_timeout_ms":10000});
        let a = Assignment::parse(&doc, "orders").unwrap();
        assert_eq!(a.member_id, "m-1-0-4");
        assert_eq!(a.generation, 3);
        assert_eq!(a.partitions.into_iter().collect::<Vec<_>>(), vec![0, 2]);
        let none = json!({"assignments":[],"generation":4,"member_id":"m"});
        assert!(Assignment::parse(&none, "orders").unwrap().partitions.is_empty());
    }

    #[test]
    fn malformed_answers_are_errors() {
        assert!(Assignment::parse(&json!({"generation":1,"assignments":[]}), "t").is_err());
        assert!(Assignment::parse(&json!({"member_id":"m","generation":-1,"assignments":[]}), "t").is_err());
        let bad = json!({"member_id":"m","generation":1,"assignments":[{"topic":"t","partition":"x"}]});
        assert!(Assignment::parse(&bad, "t").is_err());
        assert!(Assignment::parse(&json!([]), "t").is_err());
    }

    #[test]
    fn error_kinds() {
        let e = |code: &str| ClientError::Broker {
            code: code.into(),
            message: String::new(),
            details: None,
        };
        assert!(is_lost(&e("unknown_member")) && is_lost(&e("group_not_found")));
        assert!(is_rebalanced(&e("stale_generation")) && is_rebalanced(&e("not_assigned")));
        assert!(!is_lost(&e("stale_generation")) && !is_rebalanced(&e("unknown_member")));
        assert!(!is_lost(&ClientError::Closed));
    }
}
