//! Consumer group operations, independent of the transport: route to the
//! coordinator shard, gather from every shard (list), and join offsets with
//! high watermarks (describe, lag, reset); and the group requests read from
//! their JSON bodies, the same fields on every listener. Each checks the
//! caller's grants first (docs/security.md, "Operation matrix").

use std::collections::BTreeMap;
use std::rc::Rc;

use futures::future::join_all;

use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::groups::coordinator::{self, GroupOp};
use crate::shard::message::{Op, Reply};
use crate::shard::Shard;

fn json(reply: Reply) -> Result<serde_json::Value, ApiError> {
    match reply {
        Reply::Json(r) => r,
        Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}

/// What `op` on `group` needs: `read` on the group for what changes it
/// (and `read` on each topic it joins or commits), `describe` for what
/// reads it, `delete` to delete it.
fn authorize(p: &Principal, group: &str, op: &GroupOp) -> Result<(), ApiError> {
    use {Operation as O, Resource as R};
    match op {
        GroupOp::Join { topics, .. } => {
            p.require(O::Read, R::Group, group)?;
            for t in topics {
                p.require(O::Read, R::Topic, t)?;
            }
        }
        GroupOp::Heartbeat { .. } | GroupOp::Leave { .. } => p.require(O::Read, R::Group, group)?,
        GroupOp::Commit { offsets, .. } => {
            p.require(O::Read, R::Group, group)?;
            for ((t, _), _) in offsets {
                p.require(O::Read, R::Topic, t)?;
            }
        }
        GroupOp::Commits | GroupOp::Describe => p.require(O::Describe, R::Group, group)?,
        GroupOp::Delete => p.require(O::Delete, R::Group, group)?,
        GroupOp::SetOwner { .. } => p.require_admin("change a group's owner")?,
    }
    Ok(())
}

/// Runs `op` on the group's coordinator, if `p` may.
pub async fn call(
    shard: &Rc<Shard>,
    p: &Principal,
    group: &str,
    op: GroupOp,
) -> Result<serde_json::Value, ApiError> {
    authorize(p, group, &op)?;
    crate::topics::topic::validate_group_name(group)?;
    crate::groups::cluster::check(shard)?;
    let owner = shard.group_owner(group);
    json(
        shard
            .call(
                owner,
                Op::Group {
                    group: group.to_string(),
                    op,
                    caller: p.clone(),
                },
            )
            .await,
    )
}

/// Every group of every shard `p` may describe, sorted by name.
pub async fn list(shard: &Rc<Shard>, p: &Principal) -> Result<serde_json::Value, ApiError> {
    crate::groups::cluster::check(shard)?;
    let replies = join_all((0..shard.shards).map(|s| shard.call(s, Op::ListGroups))).await;
    let mut groups = Vec::new();
    for r in replies {
        if let Some(arr) = json(r)?.get("groups").and_then(|g| g.as_array()) {
            groups.extend(
                arr.iter()
                    .filter(|g| {
                        p.allows(
                            Operation::Describe,
                            Resource::Group,
                            g["name"].as_str().unwrap_or(""),
                        )
                    })
                    .cloned(),
            );
        }
    }
    groups.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(serde_json::json!({ "groups": groups }))
}

/// Log start and high watermark of every partition of `topic`.
async fn bounds(shard: &Rc<Shard>, topic: &str) -> Result<BTreeMap<u32, (u64, u64)>, ApiError> {
    // Authorized by the caller: the group operation checked its topics.
    let desc = crate::topics::admin::describe(shard, &Principal::Anonymous, topic).await?;
    let mut out = BTreeMap::new();
    for p in desc["partitions"].as_array().into_iter().flatten() {
        if let (Some(id), Some(start), Some(hw)) = (
            p["partition"].as_u64(),
            p["log_start_offset"].as_u64(),
            p["high_watermark"].as_u64(),
        ) {
            out.insert(id as u32, (start, hw));
        }
    }
    Ok(out)
}

/// The group's members and, per partition, owner, committed offset, high
/// watermark and lag (of the topics `p` may describe).
pub async fn describe(shard: &Rc<Shard>, p: &Principal, group: &str) -> Result<serde_json::Value, ApiError> {
    let mut state = call(shard, p, group, GroupOp::Describe).await?;
    let mut owner_of: BTreeMap<(String, u64), String> = BTreeMap::new();
    for m in state["members"].as_array().into_iter().flatten() {
        for a in m["assignments"].as_array().into_iter().flatten() {
            if let (Some(t), Some(p)) = (a["topic"].as_str(), a["partition"].as_u64()) {
                owner_of.insert(
                    (t.to_string(), p),
                    m["member_id"].as_str().unwrap_or_default().to_string(),
                );
            }
        }
    }
    let mut committed: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for o in state["offsets"].as_array().into_iter().flatten() {
        if let (Some(t), Some(p), Some(off)) =
            (o["topic"].as_str(), o["partition"].as_u64(), o["offset"].as_u64())
        {
            committed.insert((t.to_string(), p), off);
        }
    }
    let mut topics: Vec<String> = state["topics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(String::from))
        .collect();
    topics.extend(committed.keys().map(|(t, _)| t.clone()));
    topics.sort();
    topics.dedup();
    let mut partitions = Vec::new();
    topics.retain(|t| p.allows(Operation::Describe, Resource::Topic, t));
    for t in topics {
        let Ok(b) = bounds(shard, &t).await else { continue };
        for (p, (start, hw)) in b {
            let key = (t.clone(), p as u64);
            let c = committed.get(&key).copied();
            let lag = crate::groups::coordinator::lag(start, hw, c);
            partitions.push(serde_json::json!({
                "topic": t,
                "partition": p,
                "member_id": owner_of.get(&key),
                "committed_offset": c,
                "high_watermark": hw,
                "lag": lag,
            }));
        }
    }
    state["partitions"] = serde_json::Value::Array(partitions);
    if let Some(obj) = state.as_object_mut() {
        obj.remove("offsets");
    }
    Ok(state)
}

/// Where a reset moves a group's offsets.
pub enum ResetTo {
    Earliest,
    Latest,
    Offset(u64),
    Timestamp(i64),
}

/// Commits new offsets for every partition of `topic` (the group must have
/// no members): the log start, the high watermark, an offset (clamped into
/// the log), or the first offset at or after a time.
pub async fn reset(
    shard: &Rc<Shard>,
    p: &Principal,
    group: &str,
    topic: &str,
    to: ResetTo,
) -> Result<serde_json::Value, ApiError> {
    p.require(Operation::Read, Resource::Group, group)?;
    p.require(Operation::Read, Resource::Topic, topic)?;
    crate::topics::topic::validate_group_name(group)?;
    let meta = crate::topics::admin::lookup(shard, topic)?;
    let b = bounds(shard, topic).await?;
    let mut offsets = Vec::new();
    for (p, (start, hw)) in b {
        let o = match to {
            ResetTo::Earliest => start,
            ResetTo::Latest => hw,
            ResetTo::Offset(o) => o.clamp(start, hw),
            ResetTo::Timestamp(ts) => {
                let op = Op::OffsetForTime {
                    topic: meta.name.clone(),
                    partition: p,
                    timestamp_ms: ts,
                };
                json(shard.call(shard.owner(topic, p), op).await)?["offset"]
                    .as_u64()
                    .unwrap_or(hw)
            }
        };
        offsets.push(((topic.to_string(), p), o));
    }
    call(
        shard,
        p,
        group,
        GroupOp::Commit {
            member: None,
            offsets,
        },
    )
    .await
}

/// An ownership transfer from its JSON body `{"owner": "<key id>"}`.
pub fn set_owner_op(v: &serde_json::Value) -> Result<GroupOp, ApiError> {
    let owner = v
        .get("owner")
        .and_then(|o| o.as_str())
        .filter(|o| crate::auth::token::is_id(o))
        .ok_or_else(|| ApiError::invalid("owner must be a key id (16 characters of a-z and 2-7)"))?;
    Ok(GroupOp::SetOwner {
        owner: owner.to_string(),
    })
}

/// A join from its JSON body `{"topics":[...], "session_timeout_ms"?}`.
pub fn join_op(v: &serde_json::Value) -> Result<GroupOp, ApiError> {
    let topics = v
        .get("topics")
        .and_then(|t| t.as_array())
        .ok_or_else(|| ApiError::invalid("topics must be an array of topic names"))?
        .iter()
        .map(|t| {
            t.as_str()
                .map(String::from)
                .ok_or_else(|| ApiError::invalid("topics must be strings"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let session_timeout_ms = match v.get("session_timeout_ms") {
        None | Some(serde_json::Value::Null) => None,
        Some(x) => Some(
            x.as_u64()
                .ok_or_else(|| ApiError::invalid("session_timeout_ms must be a positive integer"))?,
        ),
    };
    Ok(GroupOp::Join {
        topics,
        session_timeout_ms,
    })
}

/// A commit from its JSON body `{"member_id"?, "generation"?, "offsets"}`.
pub fn commit_op(v: &serde_json::Value) -> Result<GroupOp, ApiError> {
    let member = match (v.get("member_id"), v.get("generation")) {
        (None | Some(serde_json::Value::Null), None | Some(serde_json::Value::Null)) => None,
        (Some(m), Some(g)) => Some((
            m.as_str()
                .ok_or_else(|| ApiError::invalid("member_id must be a string"))?
                .to_string(),
            g.as_u64()
                .ok_or_else(|| ApiError::invalid("generation must be a non-negative integer"))?,
        )),
        _ => return Err(ApiError::invalid("member_id and generation go together")),
    };
    Ok(GroupOp::Commit {
        member,
        offsets: coordinator::parse_offsets(v)?,
    })
}

/// A reset from `{"topic", "to": "earliest"|"latest"|"offset"|"timestamp", "offset"?, "timestamp"?}`.
pub fn reset_args(v: &serde_json::Value) -> Result<(String, ResetTo), ApiError> {
    let topic = v
        .get("topic")
        .and_then(|t| t.as_str())
        .ok_or_else(|| ApiError::invalid("topic must be a string"))?
        .to_string();
    let to = match v.get("to").and_then(|t| t.as_str()) {
        Some("earliest") => ResetTo::Earliest,
        Some("latest") => ResetTo::Latest,
        Some("offset") => ResetTo::Offset(
            v.get("offset")
                .and_then(|o| o.as_u64())
                .ok_or_else(|| ApiError::invalid("to=offset needs a non-negative integer offset"))?,
        ),
        Some("timestamp") => ResetTo::Timestamp(
            v.get("timestamp")
                .and_then(|o| o.as_i64())
                .ok_or_else(|| ApiError::invalid("to=timestamp needs an integer timestamp (ms)"))?,
        ),
        _ => {
            return Err(ApiError::invalid(
                "to must be \"earliest\", \"latest\", \"offset\" or \"timestamp\"",
            ))
        }
    };
    Ok((topic, to))
}
