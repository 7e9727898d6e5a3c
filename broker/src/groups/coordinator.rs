//! The group coordinator: runs group operations on the shard that owns the
//! group (`placement::shard_of_group`) — in a cluster on the controller
//! leader's node only (groups/cluster.rs) — keeps committed offsets
//! durable through its `OffsetStore` (the shard's groups log standalone,
//! the controller group in a cluster: durable before the reply),
//! expires members whose session timed out, and, on the cleanup tick, the
//! offsets of groups left empty for `--group-offsets-retention-ms`.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::groups::assignor::TopicPartition;
use crate::groups::group::Group;
use crate::groups::offset_store::OffsetStore;
use crate::limits::{
    EXPIRE_BATCH_GROUPS, EXPIRY_CHECK_MS, SESSION_TIMEOUT_MS_DEFAULT, SESSION_TIMEOUT_MS_MAX,
    SESSION_TIMEOUT_MS_MIN,
};
use crate::ops::produce::now_ms;
use crate::shard::Shard;

/// A group operation, run on the group's shard.
#[derive(Debug)]
pub enum GroupOp {
    Join {
        topics: Vec<String>,
        session_timeout_ms: Option<u64>,
    },
    Heartbeat {
        member_id: String,
    },
    Leave {
        member_id: String,
    },
    Commit {
        member: Option<(String, u64)>,
        offsets: Vec<(TopicPartition, u64)>,
    },
    Commits,
    Describe,
    Delete,
    /// Hands the group to another key (admin only).
    SetOwner {
        owner: String,
    },
}

/// Ownership (docs/security.md): `caller` may use a group that is its own,
/// or any as an admin; a group without owner (new, or made while auth was
/// disabled) becomes the caller's: `Ok(Some(id))` is the owner to record.
/// With auth disabled nothing is owned or checked.
fn owner_check(g: Option<&Group>, caller: &Principal, name: &str) -> Result<Option<Rc<str>>, ApiError> {
    let Some(id) = caller.id() else { return Ok(None) };
    match g.and_then(|g| g.owner.as_deref()) {
        Some(o) if o == id || caller.is_admin() => Ok(None),
        Some(_) => Err(ApiError::new(
            ErrorCode::NotOwner,
            format!("group {name:?} belongs to another key than {id}: use that key, or an admin's"),
        )),
        None => Ok(Some(Rc::from(id))),
    }
}

/// Partitions of `topics`; every topic must exist.
fn partitions_of(shard: &Shard, topics: &[String]) -> Result<BTreeSet<TopicPartition>, ApiError> {
    let mut out = BTreeSet::new();
    for t in topics {
        let meta = shard.catalog.get(t).ok_or_else(|| ApiError::topic_not_found(t))?;
        out.extend((0..meta.partitions).map(|p| (t.clone(), p)));
    }
    Ok(out)
}

/// The partitions a group consumes now (topics deleted since are skipped).
fn current_partitions(shard: &Shard, topics: &[String]) -> BTreeSet<TopicPartition> {
    topics
        .iter()
        .filter_map(|t| shard.catalog.get(t).map(|m| (t.clone(), m.partitions)))
        .flat_map(|(t, n)| (0..n).map(move |p| (t.clone(), p)))
        .collect()
}

fn assignment_json(assignment: &BTreeSet<TopicPartition>) -> serde_json::Value {
    assignment
        .iter()
        .map(|(t, p)| serde_json::json!({"topic": t, "partition": p}))
        .collect()
}

pub fn new_member_id(shard: &Shard) -> String {
    let n = shard.member_seq.get();
    shard.member_seq.set(n + 1);
    format!("m-{:x}-{}-{n}", shard.started_nanos, shard.id)
}

/// A partition's lag for a group: records from the committed offset to the
/// high watermark. Without a commit (or with one below the log start) a
/// consumer would start at the log start at best; never below 0.
pub fn lag(log_start: u64, high_watermark: u64, committed: Option<u64>) -> u64 {
    high_watermark.saturating_sub(committed.unwrap_or(log_start).max(log_start))
}

pub async fn run(
    shard: &Rc<Shard>,
    name: &str,
    op: GroupOp,
    caller: &Principal,
) -> Result<serde_json::Value, ApiError> {
    crate::topics::topic::validate_group_name(name)?;
    crate::groups::cluster::check(shard)?;
    let now = Instant::now();
    let store = &shard.groups;
    match op {
        GroupOp::Join {
            topics,
            session_timeout_ms,
        } => {
            let timeout_ms = session_timeout_ms.unwrap_or(SESSION_TIMEOUT_MS_DEFAULT);
            if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&timeout_ms) {
                return Err(ApiError::invalid(format!(
                    "session_timeout_ms must be in {SESSION_TIMEOUT_MS_MIN}..={SESSION_TIMEOUT_MS_MAX}"
                )));
            }
            if topics.is_empty() {
                return Err(ApiError::invalid("topics must name at least one topic"));
            }
            let partitions = partitions_of(shard, &topics)?;
            if shard.classic_groups.has_members(name) {
                return Err(crate::groups::classic::inconsistent_protocol(name, "Kafka"));
            }
            let id = new_member_id(shard);
            let (joined, first_with_offsets) = {
                let claim = owner_check(store.groups().get(name), caller, name)?;
                let mut g = store.get_or_create(name)?;
                if claim.is_some() {
                    g.owner = claim;
                }
                let first = g.members.is_empty() && !g.committed.is_empty();
                let joined = g
                    .join(
                        id.clone(),
                        topics,
                        Duration::from_millis(timeout_ms),
                        &partitions,
                        now,
                    )
                    .and_then(|()| {
                        let m = g.member(&id)?;
                        Ok(serde_json::json!({
                            "member_id": id,
                            "generation": g.generation,
                            "session_timeout_ms": timeout_ms,
                            "assignments": assignment_json(&m.assignment),
                        }))
                    });
                (joined, first)
            };
            match &joined {
                Ok(_) if first_with_offsets && OffsetStore::of(shard) == OffsetStore::Log => {
                    store.append_members(name, now_ms(), true)
                }
                Ok(_) => {}
                // A group created for this join holds nothing.
                Err(_) => store.forget_if_vacant(name),
            }
            joined
        }
        GroupOp::Heartbeat { member_id } => {
            let mut groups = store.groups_mut();
            let g = groups.get_mut(name).ok_or_else(|| group_not_found(name))?;
            g.heartbeat(&member_id, now)?;
            let m = g.member(&member_id)?;
            Ok(serde_json::json!({
                "member_id": member_id,
                "generation": g.generation,
                "assignments": assignment_json(&m.assignment),
            }))
        }
        GroupOp::Leave { member_id } => {
            let reply = {
                let mut groups = store.groups_mut();
                let g = groups.get_mut(name).ok_or_else(|| group_not_found(name))?;
                let partitions = current_partitions(shard, &g.topics);
                g.leave(&member_id, &partitions)?;
                serde_json::json!({"member_id": member_id, "left": true, "generation": g.generation})
            };
            emptied(shard, name);
            Ok(reply)
        }
        GroupOp::Commit { member, offsets } => commit(shard, name, member, offsets, caller).await,
        GroupOp::SetOwner { owner } => {
            let _lock = store.lock(name).await;
            if !store.groups().contains_key(name) {
                return Err(group_not_found(name));
            }
            let owner: Rc<str> = Rc::from(owner.as_str());
            if OffsetStore::of(shard) == OffsetStore::Controller {
                return Err(ApiError::invalid(
                    "a group's owner cannot be changed in cluster mode yet (owners are not replicated)",
                ));
            }
            // An empty commit that carries the owner: durable, then applied.
            store
                .append_commit(name, now_ms(), false, Vec::new(), (false, Some(owner.clone())))
                .await?;
            if let Some(g) = store.groups_mut().get_mut(name) {
                (g.owner, g.owner_durable) = (Some(owner.clone()), true);
            }
            Ok(serde_json::json!({"name": name, "owner": &*owner}))
        }
        GroupOp::Commits => {
            let groups = store.groups();
            let g = groups.get(name).ok_or_else(|| group_not_found(name))?;
            Ok(serde_json::json!({"group": name, "offsets": committed_json(g)}))
        }
        GroupOp::Describe => {
            let groups = store.groups();
            let g = groups.get(name).ok_or_else(|| group_not_found(name))?;
            let members: Vec<_> = g
                .members
                .iter()
                .map(|(id, m)| {
                    serde_json::json!({
                        "member_id": id,
                        "session_timeout_ms": m.session_timeout.as_millis() as u64,
                        "assignments": assignment_json(&m.assignment),
                    })
                })
                .collect();
            let mut described = serde_json::json!({
                "name": name,
                "generation": g.generation,
                "topics": g.topics,
                "members": members,
                "offsets": committed_json(g),
            });
            // Only groups with an owner (auth on) say it.
            if let Some(owner) = &g.owner {
                described["owner"] = serde_json::Value::from(&**owner);
            }
            Ok(described)
        }
        GroupOp::Delete => {
            let _lock = store.lock(name).await;
            {
                let groups = store.groups();
                let g = groups.get(name).ok_or_else(|| group_not_found(name))?;
                owner_check(Some(g), caller, name)?;
                if !g.members.is_empty() {
                    return Err(ApiError::new(
                        ErrorCode::GroupNotEmpty,
                        format!(
                            "group {name:?} has {} members; it can be deleted once empty",
                            g.members.len()
                        ),
                    ));
                }
            }
            OffsetStore::of(shard).delete(shard, name, now_ms()).await?;
            Ok(serde_json::json!({"name": name, "deleted": true}))
        }
    }
}

/// After `name` may have lost its last member: a group with offsets
/// starts its retention now (and says so in the log); one without is
/// forgotten.
fn emptied(shard: &Rc<Shard>, name: &str) {
    let store = &shard.groups;
    let offsets = {
        let mut groups = store.groups_mut();
        match groups.get_mut(name) {
            Some(g) if g.members.is_empty() => {
                g.idle_since_ms = g.idle_since_ms.max(now_ms());
                !g.committed.is_empty()
            }
            _ => return,
        }
    };
    if offsets {
        if OffsetStore::of(shard) == OffsetStore::Log {
            store.append_members(name, now_ms(), false);
        }
    } else {
        store.forget_if_vacant(name);
    }
}

fn committed_json(g: &Group) -> serde_json::Value {
    g.committed
        .iter()
        .map(|(t, p, o)| serde_json::json!({"topic": t, "partition": p, "offset": o}))
        .collect()
}

fn group_not_found(name: &str) -> ApiError {
    ApiError::new(ErrorCode::GroupNotFound, format!("group {name:?} does not exist"))
}

/// Validates, appends the new offsets to the groups log and waits for them
/// to be durable (and applied): a commit that was answered survives kill -9.
pub async fn commit(
    shard: &Rc<Shard>,
    name: &str,
    member: Option<(String, u64)>,
    offsets: Vec<(TopicPartition, u64)>,
    caller: &Principal,
) -> Result<serde_json::Value, ApiError> {
    if offsets.is_empty() {
        return Err(ApiError::invalid("offsets must hold at least one offset"));
    }
    for ((t, p), _) in &offsets {
        let meta = shard.catalog.get(t).ok_or_else(|| ApiError::topic_not_found(t))?;
        if *p >= meta.partitions {
            return Err(ApiError::partition_not_found(t, *p as u64, meta.partitions));
        }
    }
    let store = &shard.groups;
    let _lock = store.lock(name).await;
    let (creates, members, owner) = {
        let groups = store.groups();
        let claim = owner_check(groups.get(name), caller, name)?;
        match (groups.get(name), &member) {
            (Some(g), _) => {
                g.check_commit(member.as_ref().map(|(m, gen)| (m.as_str(), *gen)), &offsets)?;
                // An owner only in memory (set by a join) is written now.
                let unwritten = g.owner.clone().filter(|_| !g.owner_durable);
                (false, !g.members.is_empty(), claim.or(unwritten))
            }
            (None, Some(_)) => return Err(group_not_found(name)),
            // A member-less commit creates the group, once it is durable.
            (None, None) => (true, false, claim),
        }
    };
    if creates {
        store.count().reserve(name)?;
    }
    if let Err(e) = OffsetStore::of(shard)
        .commit(shard, name, now_ms(), members, offsets, (creates, owner.clone()))
        .await
    {
        // Not applied: the place reserved for the group is free again.
        if creates {
            store.count().release();
        }
        return Err(e);
    }
    if owner.is_some() {
        if let Some(g) = store.groups_mut().get_mut(name) {
            g.owner_durable = true;
        }
    }
    let groups = store.groups();
    let g = groups
        .get(name)
        .ok_or_else(|| ApiError::internal(format!("group {name:?} gone right after its commit")))?;
    Ok(serde_json::json!({"group": name, "offsets": committed_json(g)}))
}

/// Summaries of the groups this shard coordinates.
pub fn list(shard: &Shard) -> Result<Vec<serde_json::Value>, ApiError> {
    crate::groups::cluster::check(shard)?;
    let mut out: Vec<serde_json::Value> = shard
        .groups
        .groups()
        .values()
        .map(|g| {
            serde_json::json!({
                "name": &*g.name,
                "members": g.members.len(),
                "generation": g.generation,
                "topics": g.topics,
            })
        })
        .collect();
    // Kafka groups: their members, with their commits if any.
    for (name, members, generation) in shard.classic_groups.names() {
        let es = shard.groups.groups().get(name.as_str()).map(|g| g.topics.clone());
        out.retain(|g| g["name"] != name.as_str());
        out.push(serde_json::json!({
            "name": name,
            "members": members,
            "generation": generation,
            "topics": es.unwrap_or_default(),
            "protocol": "kafka",
        }));
    }
    Ok(out)
}

/// Expires members whose session timed out, on every group of this shard.
pub async fn expire_loop(shard: Rc<Shard>) {
    while !shard.is_shutting_down() {
        glommio::timer::sleep(Duration::from_millis(EXPIRY_CHECK_MS)).await;
        let now = Instant::now();
        let mut emptied_now = Vec::new();
        {
            let mut groups = shard.groups.groups_mut();
            for g in groups.values_mut() {
                if g.members.is_empty() {
                    continue;
                }
                let partitions = current_partitions(&shard, &g.topics);
                let expired = g.expire(now, &partitions);
                if !expired.is_empty() {
                    tracing::info!(group = %g.name, ?expired, generation = g.generation, "members expired; rebalanced");
                    if g.members.is_empty() {
                        emptied_now.push(g.name.clone());
                    }
                }
            }
        }
        for name in emptied_now {
            emptied(&shard, &name);
        }
        crate::groups::classic::expire(&shard, now);
    }
}

/// A group and the partitions of its offsets that no longer exist.
type Pruned = (Rc<str>, Vec<TopicPartition>);

/// The offsets work of a cleanup tick at `now_ms` (ms since the Unix
/// epoch): the groups left without members for longer than
/// `--group-offsets-retention-ms` are deleted, and offsets of partitions
/// that no longer exist (a topic deleted) are dropped from the others.
/// Returns how many groups expired.
///
/// In a cluster only the coordinator expires groups, counting each
/// group's idle time from when this node became the coordinator at the
/// earliest (members and their last activity are not replicated); the
/// controller group drops a deleted topic's offsets itself.
pub async fn clean_offsets(shard: &Rc<Shard>, now_ms: i64) -> usize {
    let retention_ms = shard.config.group_offsets_retention_ms;
    let store = OffsetStore::of(shard);
    let since = &shard.groups.coordinating_since_ms;
    if store == OffsetStore::Controller {
        if crate::groups::cluster::check(shard).is_err() {
            since.set(None);
            return 0;
        }
        if since.get().is_none() {
            since.set(Some(now_ms));
        }
    }
    let floor = since.get().unwrap_or(i64::MIN);
    let retention = i64::try_from(retention_ms).unwrap_or(i64::MAX);
    let expired_at =
        |g: &Group| g.offsets_expired(now_ms, retention_ms) && now_ms.saturating_sub(floor) > retention;
    let topics = shard.catalog.snapshot();
    let exists = |t: &str, p: u32| topics.get(t).is_some_and(|m| p < m.partitions);
    let (expired, pruned): (Vec<Rc<str>>, Vec<Pruned>) = {
        let groups = shard.groups.groups();
        let expired = groups
            .values()
            .filter(|g| !g.committed.is_empty() && expired_at(g))
            .map(|g| g.name.clone())
            .collect::<Vec<_>>();
        let pruned = groups
            .values()
            .filter(|_| store == OffsetStore::Log)
            .filter(|g| !g.offsets_expired(now_ms, retention_ms))
            .filter_map(|g| {
                let gone: Vec<TopicPartition> = g
                    .committed
                    .iter()
                    .filter(|(t, p, _)| !exists(t, *p))
                    .map(|(t, p, _)| (t.to_string(), p))
                    .collect();
                (!gone.is_empty()).then(|| (g.name.clone(), gone))
            })
            .collect();
        (expired, pruned)
    };
    let mut done = 0;
    for batch in expired.chunks(EXPIRE_BATCH_GROUPS) {
        let mut pending = Vec::with_capacity(batch.len());
        for name in batch {
            let lock = shard.groups.lock(name).await;
            // Checked again under the lock: a member may have joined, or a
            // commit come, since the list was made.
            let still = shard
                .groups
                .groups()
                .get(&**name)
                .is_some_and(|g| !g.committed.is_empty() && expired_at(g));
            if still {
                // Standalone, appended now: one fsync for the whole batch.
                let deleted: futures::future::LocalBoxFuture<'_, Result<(), ApiError>> = match store {
                    OffsetStore::Log => Box::pin(shard.groups.append_delete(name, now_ms)),
                    OffsetStore::Controller => Box::pin(store.delete(shard, name, now_ms)),
                };
                pending.push((name.clone(), lock, deleted));
            }
        }
        for (name, lock, appended) in pending {
            match appended.await {
                Ok(()) => {
                    done += 1;
                    tracing::info!(group = %name, retention_ms, "consumer group offsets expired: the group had no members for the retention");
                }
                Err(e) => {
                    tracing::warn!(group = %name, error = %e, "expiring a group's offsets failed; tried again at the next cleanup")
                }
            }
            drop(lock);
        }
    }
    if done > 0 {
        metrics::counter!("es_group_offsets_expired_total").increment(done as u64);
    }
    for (name, gone) in pruned {
        let _lock = shard.groups.lock(&name).await;
        // Checked again under the lock: a topic may have come back.
        let topics = shard.catalog.snapshot();
        let gone: Vec<TopicPartition> = gone
            .into_iter()
            .filter(|(t, p)| topics.get(t).is_none_or(|m| *p >= m.partitions))
            .collect();
        if gone.is_empty() {
            continue;
        }
        if let Err(e) = shard.groups.append_prune(&name, gone).await {
            tracing::warn!(group = %name, error = %e, "dropping the offsets of deleted partitions failed; tried again at the next cleanup");
        }
    }
    shard.groups.shrink();
    done
}

/// Offsets with member info parsed from a commit body.
pub fn parse_offsets(v: &serde_json::Value) -> Result<Vec<(TopicPartition, u64)>, ApiError> {
    let arr = v
        .get("offsets")
        .and_then(|o| o.as_array())
        .ok_or_else(|| ApiError::invalid("offsets must be an array of {topic, partition, offset}"))?;
    arr.iter()
        .map(|o| {
            let topic = o.get("topic").and_then(|t| t.as_str());
            let partition = o
                .get("partition")
                .and_then(|p| p.as_u64())
                .filter(|p| *p <= u32::MAX as u64);
            let offset = o.get("offset").and_then(|x| x.as_u64());
            match (topic, partition, offset) {
                (Some(t), Some(p), Some(off)) => Ok(((t.to_string(), p as u32), off)),
                _ => Err(ApiError::invalid(
                    "each offset needs a string topic and non-negative integer partition and offset",
                )),
            }
        })
        .collect()
}
