//! `OffsetStore`: where a group's committed offsets are made durable before
//! a commit is answered (the spec's §3.3), the one seam between the
//! coordinator and its storage:
//!
//! - `Log`, a standalone broker: the shard's groups log (store.rs), the
//!   record fdatasynced, then applied to the groups in memory. Today's
//!   code path and file format, unchanged.
//! - `Controller`, a cluster node: the controller group (raft0). A commit
//!   is a `CommitOffsets` proposal sent to shard 0, answered once raft0
//!   committed and applied it (so it is fsynced on a majority of nodes and
//!   survives the loss of any minority of them); a deletion a `DeleteGroup`.
//!   The groups in memory take the offsets raft0 applied, never more
//!   ([`adopt`]): on the coordinator from the proposal's answer,
//!   on every node from the applied state (groups/cluster.rs `follow`), so
//!   a node that becomes the coordinator already holds every commit.
//!
//! Owners (docs/security.md) and the membership records that time offset
//! retention after a restart stay in the node's memory in cluster mode.

use std::rc::Rc;

use es_raft::controller::Committed as ControllerCommitted;

use crate::error::ApiError;
use crate::groups::assignor::TopicPartition;
use crate::groups::group::Group;
use crate::groups::store::GroupStore;
use crate::shard::message::{GroupOffsetsOp, Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};

/// A group's offsets as the controller holds them: `(topic, partition,
/// offset)`, sorted.
pub type Offsets = Vec<(String, u32, u64)>;

/// A group's offsets as applied by the controller (`None`: deleted).
pub type Adopted = (String, Option<Offsets>);

/// Where `shard`'s groups keep their offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetStore {
    Log,
    Controller,
}

impl OffsetStore {
    pub fn of(shard: &Shard) -> OffsetStore {
        if shard.raft.is_some() {
            OffsetStore::Controller
        } else {
            OffsetStore::Log
        }
    }

    /// Makes `offsets` of `group` durable, then applies them in memory.
    /// `members`: the group has members now; `reserved`: a place in
    /// `--groups-max` was reserved for the group this commit creates;
    /// `owner`: the owner to record with it.
    pub async fn commit(
        self,
        shard: &Rc<Shard>,
        group: &str,
        at_ms: i64,
        members: bool,
        offsets: Vec<(TopicPartition, u64)>,
        (reserved, owner): (bool, Option<Rc<str>>),
    ) -> Result<(), ApiError> {
        match self {
            OffsetStore::Log => {
                shard
                    .groups
                    .append_commit(group, at_ms, members, offsets, (reserved, owner))
                    .await
            }
            OffsetStore::Controller => {
                let (index, held) = on_controller(
                    shard,
                    GroupOffsetsOp::Commit {
                        group: group.to_string(),
                        offsets,
                    },
                )
                .await?;
                adopt(&shard.groups, group, index, Some(held), at_ms, reserved);
                if owner.is_some() {
                    if let Some(g) = shard.groups.groups_mut().get_mut(group) {
                        g.owner = owner;
                    }
                }
                Ok(())
            }
        }
    }

    /// Deletes `group`'s offsets (and the group, without members).
    pub async fn delete(self, shard: &Rc<Shard>, group: &str, at_ms: i64) -> Result<(), ApiError> {
        match self {
            OffsetStore::Log => shard.groups.append_delete(group, at_ms).await,
            OffsetStore::Controller => {
                let (index, _) = on_controller(
                    shard,
                    GroupOffsetsOp::Delete {
                        group: group.to_string(),
                    },
                )
                .await?;
                adopt(&shard.groups, group, index, None, at_ms, false);
                Ok(())
            }
        }
    }
}

/// Cluster mode: sets `group`'s offsets to what the controller group
/// holds for it as of its log index `index` (`None`: none, the group
/// was deleted there). Ignored if the group already holds a newer
/// index. `reserved`: a place in `--groups-max` was reserved for it
/// (a commit that created it); `at_ms` starts its retention when the
/// offsets changed. Memory never runs ahead of the controller: this is
/// only called with what it applied.
pub fn adopt(
    store: &GroupStore,
    group: &str,
    index: u64,
    offsets: Option<Offsets>,
    at_ms: i64,
    reserved: bool,
) {
    let mut groups = store.groups_mut();
    let exists = groups.contains_key(group);
    if reserved && exists {
        store.count().release();
    }
    let Some(offsets) = offsets else {
        let remove = match groups.get_mut(group) {
            Some(g) if g.controller_index <= index => {
                g.controller_index = index;
                g.committed.clear();
                g.members.is_empty()
            }
            _ => false,
        };
        if remove {
            groups.remove(group);
            store.count().release();
        } else if reserved && !exists {
            store.count().release();
        }
        return;
    };
    if !exists {
        if !reserved {
            store.count().add();
        }
        let g = Group::new(group);
        groups.insert(g.name.clone(), g);
    }
    let Some(g) = groups.get_mut(group) else { return };
    if g.controller_index > index {
        return;
    }
    g.controller_index = index;
    let mut next = crate::groups::committed::Committed::default();
    for (t, p, o) in offsets {
        next.set(&t, p, o);
    }
    if next != g.committed {
        g.committed = next;
        g.idle_since_ms = g.idle_since_ms.max(at_ms);
    }
    if g.is_vacant() {
        groups.remove(group);
        store.count().release();
    }
}

/// `op` run by the controller group, from the group's shard: the
/// controller's log index it was applied at (or a later one) and the
/// group's offsets it answered.
async fn on_controller(shard: &Rc<Shard>, op: GroupOffsetsOp) -> Result<(u64, Offsets), ApiError> {
    match shard.call(CONTROLLER_SHARD, Op::GroupOffsets(op)).await {
        Reply::Offsets(r) => r,
        Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}

/// `Op::GroupOffsets`, on shard 0: proposes the change to the controller
/// group and answers once it is applied, with the index applied here by
/// then and the group's offsets as the controller answered them.
pub async fn run_on_controller(shard: &Rc<Shard>, op: GroupOffsetsOp) -> Result<(u64, Offsets), ApiError> {
    use crate::topics::controller::{controller_error, refused};
    let c = crate::cluster::reconciler::controller(shard)?;
    let answer = match op {
        GroupOffsetsOp::Commit { group, offsets } => c.commit_offsets(&group, offsets).await,
        GroupOffsetsOp::Delete { group } => c.delete_group(&group).await,
    }
    .map_err(controller_error)?
    .map_err(refused)?;
    // Applied on the controller's leader; forwarded there (this node lost
    // the lead meanwhile), here once this node caught up.
    if !c.is_leader() {
        c.read_barrier().await.map_err(controller_error)?;
    }
    Ok((c.applied_index(), offsets_of(&answer)))
}

/// The `[{"topic", "partition", "offset"}]` of a controller answer.
fn offsets_of(answer: &serde_json::Value) -> Offsets {
    answer["offsets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| {
            Some((
                o["topic"].as_str()?.to_string(),
                u32::try_from(o["partition"].as_u64()?).ok()?,
                o["offset"].as_u64()?,
            ))
        })
        .collect()
}

/// A group's offsets as the controller's state holds them, flattened.
pub fn flatten(c: &ControllerCommitted) -> Offsets {
    c.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |(p, o)| (t.clone(), *p, *o)))
        .collect()
}
