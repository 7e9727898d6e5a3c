//! A membership as bytes, for control batches and snapshot images:
//! `{"configs":[[1,2,3]],"nodes":[1,2,3]}` (the joint configs, then every
//! node, voters and learners). es nodes carry no address in a membership
//! (`EmptyNode`): the controller's registry has them.

use std::collections::{BTreeMap, BTreeSet};

use openraft::EmptyNode;
use serde_json::{json, Value};

use crate::types::{Membership, NodeId};

/// The membership's JSON.
pub fn to_json(m: &Membership) -> Value {
    let configs: Vec<Vec<NodeId>> = m
        .get_joint_config()
        .iter()
        .map(|c| c.iter().copied().collect())
        .collect();
    let nodes: Vec<NodeId> = m.nodes().map(|(id, _)| *id).collect();
    json!({ "configs": configs, "nodes": nodes })
}

/// The membership's bytes.
pub fn encode(m: &Membership) -> Vec<u8> {
    to_json(m).to_string().into_bytes()
}

/// A membership from its JSON; `None` if it is not one.
pub fn from_json(v: &Value) -> Option<Membership> {
    let configs: Vec<BTreeSet<NodeId>> = v
        .get("configs")?
        .as_array()?
        .iter()
        .map(|c| {
            c.as_array()
                .map(|ids| ids.iter().filter_map(Value::as_u64).collect())
        })
        .collect::<Option<_>>()?;
    let nodes: BTreeMap<NodeId, EmptyNode> = v
        .get("nodes")?
        .as_array()?
        .iter()
        .map(|id| id.as_u64().map(|id| (id, EmptyNode {})))
        .collect::<Option<_>>()?;
    Some(Membership::new(configs, nodes))
}

/// A membership from its bytes; `None` if they are not one.
pub fn decode(bytes: &[u8]) -> Option<Membership> {
    from_json(&serde_json::from_slice(bytes).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_a_learner() {
        let voters: BTreeSet<NodeId> = [1, 2, 3].into();
        let nodes: BTreeMap<NodeId, EmptyNode> = [1, 2, 3, 4].map(|id| (id, EmptyNode {})).into();
        let m = Membership::new(vec![voters], nodes);
        let bytes = encode(&m);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"configs":[[1,2,3]],"nodes":[1,2,3,4]}"#
        );
        assert_eq!(decode(&bytes), Some(m));
        assert_eq!(decode(b"{}"), None);
        assert_eq!(decode(b"not json"), None);
    }
}
