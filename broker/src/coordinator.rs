//! The group coordinator: runs group operations on the shard that owns the
//! group (`placement::shard_of_group`), keeps committed offsets durable in
//! `<data-dir>/groups/<group>.json` (atomic, fsynced before the reply), and
//! expires members whose session timed out.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::assignor::TopicPartition;
use crate::error::ApiError;
use crate::group::{Group, SESSION_TIMEOUT_MS_DEFAULT, SESSION_TIMEOUT_MS_MAX, SESSION_TIMEOUT_MS_MIN};
use crate::shard::Shard;

/// How often a shard looks for members whose session timed out.
pub const EXPIRY_CHECK_MS: u64 = 50;

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
}

#[derive(Serialize, Deserialize)]
struct GroupFile {
    name: String,
    offsets: Vec<CommittedOffset>,
}

#[derive(Serialize, Deserialize)]
struct CommittedOffset {
    topic: String,
    partition: u32,
    offset: u64,
}

fn groups_dir(shard: &Shard) -> PathBuf {
    shard.data_dir().join("groups")
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

fn new_member_id(shard: &Shard) -> String {
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

pub async fn run(shard: &Rc<Shard>, name: &str, op: GroupOp) -> Result<serde_json::Value, ApiError> {
    crate::topic::validate_group_name(name)?;
    let now = Instant::now();
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
            let id = new_member_id(shard);
            let mut groups = shard.groups.borrow_mut();
            let g = groups.entry(name.to_string()).or_insert_with(|| Group::new(name));
            g.join(
                id.clone(),
                topics,
                Duration::from_millis(timeout_ms),
                &partitions,
                now,
            )?;
            let m = g.member(&id)?;
            Ok(serde_json::json!({
                "member_id": id,
                "generation": g.generation,
                "session_timeout_ms": timeout_ms,
                "assignments": assignment_json(&m.assignment),
            }))
        }
        GroupOp::Heartbeat { member_id } => {
            let mut groups = shard.groups.borrow_mut();
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
            let mut groups = shard.groups.borrow_mut();
            let g = groups.get_mut(name).ok_or_else(|| group_not_found(name))?;
            let partitions = current_partitions(shard, &g.topics);
            g.leave(&member_id, &partitions)?;
            Ok(serde_json::json!({"member_id": member_id, "left": true, "generation": g.generation}))
        }
        GroupOp::Commit { member, offsets } => commit(shard, name, member, offsets).await,
        GroupOp::Commits => {
            let groups = shard.groups.borrow();
            let g = groups.get(name).ok_or_else(|| group_not_found(name))?;
            Ok(serde_json::json!({"group": name, "offsets": committed_json(g)}))
        }
        GroupOp::Describe => {
            let groups = shard.groups.borrow();
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
            Ok(serde_json::json!({
                "name": name,
                "generation": g.generation,
                "topics": g.topics,
                "members": members,
                "offsets": committed_json(g),
            }))
        }
        GroupOp::Delete => {
            let lock = group_lock(shard, name);
            let _guard = lock.acquire_permit(1).await;
            {
                let groups = shard.groups.borrow();
                let g = groups.get(name).ok_or_else(|| group_not_found(name))?;
                if !g.members.is_empty() {
                    return Err(ApiError::new(
                        hyper::StatusCode::CONFLICT,
                        "group_not_empty",
                        format!(
                            "group {name:?} has {} members; it can be deleted once empty",
                            g.members.len()
                        ),
                    ));
                }
            }
            let path = groups_dir(shard).join(format!("{name}.json"));
            match glommio::io::remove(&path).await.map_err(std::io::Error::from) {
                Ok(()) => es_storage::sync_dir(&groups_dir(shard))
                    .await
                    .map_err(ApiError::storage)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(ApiError::internal(format!("removing {}: {e}", path.display()))),
            }
            shard.groups.borrow_mut().remove(name);
            Ok(serde_json::json!({"name": name, "deleted": true}))
        }
    }
}

fn committed_json(g: &Group) -> serde_json::Value {
    g.committed
        .iter()
        .map(|((t, p), o)| serde_json::json!({"topic": t, "partition": p, "offset": o}))
        .collect()
}

fn group_not_found(name: &str) -> ApiError {
    ApiError::new(
        hyper::StatusCode::NOT_FOUND,
        "group_not_found",
        format!("group {name:?} does not exist"),
    )
}

fn group_lock(shard: &Shard, name: &str) -> Rc<glommio::sync::Semaphore> {
    shard
        .group_locks
        .borrow_mut()
        .entry(name.to_string())
        .or_insert_with(|| Rc::new(glommio::sync::Semaphore::new(1)))
        .clone()
}

/// Validates, writes the group file with the new offsets (durable), then
/// applies them: a commit that was answered survives kill -9.
async fn commit(
    shard: &Rc<Shard>,
    name: &str,
    member: Option<(String, u64)>,
    offsets: Vec<(TopicPartition, u64)>,
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
    let lock = group_lock(shard, name);
    let _guard = lock.acquire_permit(1).await;
    let file = {
        let groups = shard.groups.borrow();
        let fresh = Group::new(name);
        let g = match (groups.get(name), &member) {
            (Some(g), _) => g,
            (None, Some(_)) => return Err(group_not_found(name)),
            // A member-less commit creates the group, once it is durable.
            (None, None) => &fresh,
        };
        g.check_commit(member.as_ref().map(|(m, gen)| (m.as_str(), *gen)), &offsets)?;
        let mut next = g.committed.clone();
        next.extend(offsets.iter().cloned());
        GroupFile {
            name: name.to_string(),
            offsets: next
                .iter()
                .map(|((t, p), o)| CommittedOffset {
                    topic: t.clone(),
                    partition: *p,
                    offset: *o,
                })
                .collect(),
        }
    };
    let bytes = serde_json::to_vec_pretty(&file).expect("group file serializes");
    crate::fsops::write_atomic(&groups_dir(shard), &format!("{name}.json"), bytes).await?;
    let mut groups = shard.groups.borrow_mut();
    let g = groups.entry(name.to_string()).or_insert_with(|| Group::new(name));
    g.committed.extend(offsets);
    Ok(serde_json::json!({"group": name, "offsets": committed_json(g)}))
}

/// Summaries of the groups this shard coordinates.
pub fn list(shard: &Shard) -> Vec<serde_json::Value> {
    shard
        .groups
        .borrow()
        .values()
        .map(|g| {
            serde_json::json!({
                "name": g.name,
                "members": g.members.len(),
                "generation": g.generation,
                "topics": g.topics,
            })
        })
        .collect()
}

/// Loads the committed offsets of the groups this shard owns, at start-up.
pub async fn load(shard: &Shard) -> Result<(), ApiError> {
    let dir = groups_dir(shard);
    let d = dir.clone();
    let names = glommio::executor()
        .spawn_blocking(move || -> std::io::Result<Vec<String>> {
            let listing = std::fs::read_dir(&d); // blocking-ok: on the blocking pool
            match listing {
                Ok(entries) => entries
                    .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| ApiError::internal(format!("listing {}: {e}", dir.display())))?;
    for file in names {
        let Some(name) = file.strip_suffix(".json") else {
            continue;
        };
        if crate::topic::validate_group_name(name).is_err() || shard.group_owner(name) != shard.id {
            continue;
        }
        let path = dir.join(&file);
        let Some(bytes) = crate::fsops::read_small(&path).await? else {
            continue;
        };
        match serde_json::from_slice::<GroupFile>(&bytes) {
            Ok(f) if f.name == name => {
                let mut g = Group::new(name);
                g.committed = f
                    .offsets
                    .into_iter()
                    .map(|o| ((o.topic, o.partition), o.offset))
                    .collect();
                shard.groups.borrow_mut().insert(name.to_string(), g);
            }
            Ok(_) | Err(_) => tracing::warn!(path = %path.display(), "unreadable group file skipped"),
        }
    }
    Ok(())
}

/// Expires members whose session timed out, on every group of this shard.
pub async fn expire_loop(shard: Rc<Shard>) {
    while !shard.is_shutting_down() {
        glommio::timer::sleep(Duration::from_millis(EXPIRY_CHECK_MS)).await;
        let now = Instant::now();
        let mut groups = shard.groups.borrow_mut();
        for g in groups.values_mut() {
            if g.members.is_empty() {
                continue;
            }
            let partitions = current_partitions(&shard, &g.topics);
            let expired = g.expire(now, &partitions);
            if !expired.is_empty() {
                tracing::info!(group = %g.name, ?expired, generation = g.generation, "members expired; rebalanced");
            }
        }
    }
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
