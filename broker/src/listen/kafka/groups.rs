//! The classic consumer group APIs: FindCoordinator (this broker; in a
//! cluster the controller leader's node, groups/cluster.rs),
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup and DescribeGroups
//! (groups/classic.rs, on the group's shard), OffsetCommit and
//! OffsetFetch (the es groups log: `es group describe` shows their lag),
//! ListGroups (es's list, Kafka groups with it). Each checks the key's
//! grants first (Read on the group, and on each topic committed).

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::*;

use super::codec::{s, Body};
use super::connection::Answer;
use super::handler::{
    answer, group_code, this_broker, GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST, TOPIC_AUTHORIZATION_FAILED,
};
use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::groups::classic::{ClassicOp, ClassicReply, JoinArgs};
use crate::groups::coordinator::GroupOp;
use crate::shard::message::{Op, Reply};
use crate::shard::Shard;

/// Runs `op` on `group`'s shard, its grant (Read on the group) checked.
async fn call(shard: &Rc<Shard>, p: &Principal, group: &str, op: ClassicOp) -> Result<ClassicReply, i16> {
    p.require(Operation::Read, Resource::Group, group)
        .map_err(|_| GROUP_AUTHORIZATION_FAILED)?;
    crate::topics::topic::validate_group_name(group).map_err(|e| group_code(&e))?;
    let op = Op::Classic {
        group: group.to_string(),
        op,
        caller: p.clone(),
    };
    match shard.call(shard.group_owner(group), op).await {
        Reply::Classic(Ok(r)) => Ok(r),
        Reply::Classic(Err(e)) | Reply::Done(Err(e)) => Err(group_code(&e)),
        _ => Err(-1),
    }
}

fn failed(code: i16) -> ClassicReply {
    ClassicReply {
        error: code,
        ..ClassicReply::default()
    }
}

pub async fn handle(
    shard: &Rc<Shard>,
    p: &Principal,
    body: Body,
    (key, v, cid): (ApiKey, i16, i32),
    client_id: Option<String>,
) -> Answer {
    match body {
        Body::FindCoordinator(f) => answer(key, v, cid, &find_coordinator(shard, f, v)),
        Body::JoinGroup(j) => {
            let group = j.group_id.0.to_string();
            let args = JoinArgs {
                member_id: j.member_id.to_string(),
                requires_known_id: v >= 4,
                client_id: client_id.unwrap_or_default(),
                session_timeout_ms: j.session_timeout_ms,
                rebalance_timeout_ms: if v >= 1 {
                    j.rebalance_timeout_ms
                } else {
                    j.session_timeout_ms
                },
                protocol_type: j.protocol_type.to_string(),
                protocols: j
                    .protocols
                    .into_iter()
                    .map(|p| (p.name.to_string(), p.metadata))
                    .collect(),
            };
            let r = call(shard, p, &group, ClassicOp::Join(args))
                .await
                .unwrap_or_else(failed);
            let mut body = JoinGroupResponse::default()
                .with_error_code(r.error)
                .with_generation_id(r.generation)
                .with_protocol_name(Some(s(r.protocol)))
                .with_leader(s(r.leader))
                .with_member_id(s(r.member_id))
                .with_members(
                    r.members
                        .into_iter()
                        .map(|(id, meta, _)| {
                            JoinGroupResponseMember::default()
                                .with_member_id(s(id))
                                .with_metadata(meta)
                        })
                        .collect(),
                );
            if v >= 7 {
                body = body.with_protocol_type(Some(s(r.protocol_type)));
            }
            answer(key, v, cid, &body)
        }
        Body::SyncGroup(sg) => {
            let op = ClassicOp::Sync {
                member_id: sg.member_id.to_string(),
                generation: sg.generation_id,
                assignments: sg
                    .assignments
                    .into_iter()
                    .map(|a| (a.member_id.to_string(), a.assignment))
                    .collect(),
            };
            let r = call(shard, p, sg.group_id.0.as_str(), op)
                .await
                .unwrap_or_else(failed);
            let mut body = SyncGroupResponse::default()
                .with_error_code(r.error)
                .with_assignment(r.assignment);
            if v >= 5 {
                body = body
                    .with_protocol_type(Some(s(r.protocol_type)))
                    .with_protocol_name(Some(s(r.protocol)));
            }
            answer(key, v, cid, &body)
        }
        Body::Heartbeat(h) => {
            let op = ClassicOp::Heartbeat {
                member_id: h.member_id.to_string(),
                generation: h.generation_id,
            };
            let r = call(shard, p, h.group_id.0.as_str(), op)
                .await
                .unwrap_or_else(failed);
            answer(
                key,
                v,
                cid,
                &HeartbeatResponse::default().with_error_code(r.error),
            )
        }
        Body::LeaveGroup(l) => {
            let ids: Vec<String> = if v >= 3 {
                l.members.iter().map(|m| m.member_id.to_string()).collect()
            } else {
                vec![l.member_id.to_string()]
            };
            let r = call(
                shard,
                p,
                l.group_id.0.as_str(),
                ClassicOp::Leave {
                    member_ids: ids.clone(),
                },
            )
            .await
            .unwrap_or_else(failed);
            let codes: Vec<i16> = r
                .members
                .iter()
                .map(|(_, c, _)| {
                    i16::from_be_bytes([c.first().copied().unwrap_or(0), c.get(1).copied().unwrap_or(0)])
                })
                .collect();
            let mut body = LeaveGroupResponse::default();
            if v >= 3 {
                body = body.with_error_code(r.error).with_members(
                    ids.into_iter()
                        .zip(codes.iter().copied().chain(std::iter::repeat(r.error)))
                        .map(|(id, c)| MemberResponse::default().with_member_id(s(id)).with_error_code(c))
                        .collect(),
                );
            } else {
                body = body.with_error_code(if r.error != 0 {
                    r.error
                } else {
                    codes.first().copied().unwrap_or(0)
                });
            }
            answer(key, v, cid, &body)
        }
        Body::OffsetCommit(c) => answer(key, v, cid, &offset_commit(shard, p, c).await),
        Body::OffsetFetch(f) => answer(key, v, cid, &offset_fetch(shard, p, f).await),
        Body::DescribeGroups(d) => {
            let mut out = Vec::with_capacity(d.groups.len());
            for g in d.groups {
                out.push(describe(shard, p, g).await);
            }
            answer(key, v, cid, &DescribeGroupsResponse::default().with_groups(out))
        }
        Body::ListGroups(l) => {
            let groups = match crate::groups::admin::list(shard, p).await {
                Ok(v) => v["groups"].as_array().cloned().unwrap_or_default(),
                Err(_) => Vec::new(),
            };
            // A group with members is Stable here, one without Empty.
            let listed = groups
                .iter()
                .filter_map(|g| {
                    let state = if g["members"].as_u64().unwrap_or(0) > 0 {
                        "Stable"
                    } else {
                        "Empty"
                    };
                    Some((g["name"].as_str()?, state))
                })
                .filter(|(_, state)| {
                    l.states_filter.is_empty() || l.states_filter.iter().any(|f| f.as_str() == *state)
                })
                .map(|(n, state)| {
                    let g = ListedGroup::default()
                        .with_group_id(GroupId(s(n)))
                        .with_protocol_type(s("consumer"));
                    if v >= 4 {
                        g.with_group_state(s(state))
                    } else {
                        g
                    }
                })
                .collect();
            answer(key, v, cid, &ListGroupsResponse::default().with_groups(listed))
        }
        _ => Answer::closing(None),
    }
}

/// The coordinator of every group: this broker standalone; in a cluster
/// the controller leader's Kafka listener, or COORDINATOR_NOT_AVAILABLE
/// while there is none (or it is not registered yet).
fn coordinator(shard: &Shard) -> Result<(i32, String, i32), i16> {
    if shard.raft.is_none() {
        return Ok(this_broker(shard));
    }
    let unavailable = crate::error::ErrorCode::CoordinatorNotAvailable.kafka();
    let leader = shard.state.controller_leader().ok_or(unavailable)?;
    if leader == shard.config.node_id {
        return Ok(this_broker(shard));
    }
    let assignment = shard.catalog.assignment();
    let addr = assignment.kafka.get(&leader).ok_or(unavailable)?;
    let (host, port) = addr.rsplit_once(':').ok_or(unavailable)?;
    let port = port.parse::<u16>().map_err(|_| unavailable)?;
    Ok((leader as i32, host.to_string(), i32::from(port)))
}

fn find_coordinator(shard: &Shard, f: FindCoordinatorRequest, v: i16) -> FindCoordinatorResponse {
    let (error, (node, host, port)) = match (f.key_type, coordinator(shard)) {
        (0, Ok(at)) => (0, at),
        (0, Err(code)) => (code, (-1, String::new(), -1)),
        _ => (INVALID_REQUEST, this_broker(shard)),
    };
    let message = match error {
        0 => None,
        INVALID_REQUEST => Some(s("transactions are not supported")),
        _ => Some(s(
            "no group coordinator now: the cluster's controller has no leader",
        )),
    };
    if v >= 4 {
        let coordinators = f
            .coordinator_keys
            .into_iter()
            .map(|k| {
                Coordinator::default()
                    .with_key(k)
                    .with_node_id(BrokerId(node))
                    .with_host(s(host.as_str()))
                    .with_port(port)
                    .with_error_code(error)
                    .with_error_message(message.clone())
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let mut r = FindCoordinatorResponse::default()
        .with_error_code(error)
        .with_node_id(BrokerId(node))
        .with_host(s(host))
        .with_port(port);
    if v >= 1 {
        r = r.with_error_message(message);
    }
    r
}

async fn offset_commit(shard: &Rc<Shard>, p: &Principal, c: OffsetCommitRequest) -> OffsetCommitResponse {
    let group = c.group_id.0.to_string();
    let group_ok = p.allows(Operation::Read, Resource::Group, &group);
    let mut offsets = Vec::new();
    let mut codes: Vec<(TopicName, Vec<(i32, i16)>)> = Vec::new();
    for t in &c.topics {
        let topic = t.name.0.to_string();
        let topic_ok = p.allows(Operation::Read, Resource::Topic, &topic);
        let mut parts = Vec::new();
        for part in &t.partitions {
            let code = if !group_ok {
                GROUP_AUTHORIZATION_FAILED
            } else if !topic_ok {
                TOPIC_AUTHORIZATION_FAILED
            } else if part.partition_index < 0 || part.committed_offset < 0 {
                INVALID_REQUEST
            } else {
                offsets.push((
                    (topic.clone(), part.partition_index as u32),
                    part.committed_offset as u64,
                ));
                0
            };
            parts.push((part.partition_index, code));
        }
        codes.push((t.name.clone(), parts));
    }
    if !offsets.is_empty() {
        let op = ClassicOp::Commit {
            member_id: c.member_id.to_string(),
            generation: c.generation_id_or_member_epoch,
            offsets,
        };
        let code = match call(shard, p, &group, op).await {
            Ok(r) => r.error,
            Err(code) => code,
        };
        for (_, parts) in codes.iter_mut() {
            for (_, c) in parts.iter_mut().filter(|(_, c)| *c == 0) {
                *c = code;
            }
        }
    }
    let topics = codes
        .into_iter()
        .map(|(name, parts)| {
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(i, c)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(i)
                                .with_error_code(c)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

async fn offset_fetch(shard: &Rc<Shard>, p: &Principal, f: OffsetFetchRequest) -> OffsetFetchResponse {
    let group = f.group_id.0.to_string();
    let committed: Result<Vec<(String, u32, u64)>, ApiError> =
        crate::groups::admin::call(shard, p, &group, GroupOp::Commits)
            .await
            .map(|v| {
                v["offsets"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|o| {
                                Some((
                                    o["topic"].as_str()?.to_string(),
                                    o["partition"].as_u64()? as u32,
                                    o["offset"].as_u64()?,
                                ))
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            });
    let committed = match committed {
        Ok(c) => c,
        Err(e) if e.code == crate::error::ErrorCode::GroupNotFound => Vec::new(),
        Err(e) => return OffsetFetchResponse::default().with_error_code(group_code(&e)),
    };
    let offset_of = |t: &str, p: i32| {
        committed
            .iter()
            .find(|(ct, cp, _)| ct == t && *cp as i32 == p)
            .map(|(_, _, o)| *o as i64)
    };
    let wanted: Vec<(String, Vec<i32>)> = match f.topics {
        Some(ts) => ts
            .into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect(),
        None => {
            let mut all: Vec<(String, Vec<i32>)> = Vec::new();
            for (t, part, _) in &committed {
                match all.iter_mut().find(|(n, _)| n == t) {
                    Some((_, ps)) => ps.push(*part as i32),
                    None => all.push((t.clone(), vec![*part as i32])),
                }
            }
            all
        }
    };
    let topics = wanted
        .into_iter()
        .map(|(t, parts)| {
            let allowed = p.allows(Operation::Read, Resource::Topic, &t);
            let partitions = parts
                .into_iter()
                .map(|i| {
                    let r = OffsetFetchResponsePartition::default()
                        .with_partition_index(i)
                        .with_metadata(Some(s("")));
                    if allowed {
                        r.with_committed_offset(offset_of(&t, i).unwrap_or(-1))
                    } else {
                        r.with_committed_offset(-1)
                            .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                    }
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(s(t)))
                .with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

async fn describe(shard: &Rc<Shard>, p: &Principal, group: GroupId) -> DescribedGroup {
    let name = group.0.to_string();
    let out = DescribedGroup::default().with_group_id(group);
    if !p.allows(Operation::Describe, Resource::Group, &name) {
        return out.with_error_code(GROUP_AUTHORIZATION_FAILED);
    }
    let r = match call(shard, &Principal::Anonymous, &name, ClassicOp::Describe).await {
        Ok(r) => r,
        Err(code) => return out.with_error_code(code),
    };
    let members = r
        .members
        .into_iter()
        .map(|(id_client, meta, assignment): (String, Bytes, Bytes)| {
            let (id, client) = id_client.split_once('\0').unwrap_or((&id_client, ""));
            DescribedGroupMember::default()
                .with_member_id(s(id))
                .with_client_id(s(client))
                .with_client_host(s(""))
                .with_member_metadata(meta)
                .with_member_assignment(assignment)
        })
        .collect();
    out.with_group_state(s(r.state))
        .with_protocol_type(s(r.protocol_type))
        .with_protocol_data(s(r.protocol))
        .with_members(members)
}
