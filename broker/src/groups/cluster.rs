//! Consumer groups on a cluster node (the spec's §3.3): the coordinator of
//! every group is the node that leads the controller group (raft0), and
//! on it the group's shard (`placement::shard_of_group`) runs the group.
//! Every other node answers group requests with `not_coordinator` naming
//! that node's addresses (from the controller's node registry), or
//! `coordinator_not_available` while raft0 has no leader.
//!
//! Committed offsets live in raft0 (groups/offset_store.rs); shard 0 of
//! every node hands each group's shard the offsets raft0 applied
//! ([`follow`]), so the node that becomes the coordinator after a failover
//! already holds every commit. Members are not replicated: after a
//! failover they find their member id unknown at the new coordinator and
//! join again (a new generation there), starting from their commits.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use es_raft::controller::{ClusterState, Controller};

use crate::cluster::applied::next_pass;
use crate::error::ApiError;
use crate::groups::offset_store::{flatten, Adopted};
use crate::ops::produce::now_ms;
use crate::shard::message::{Op, Reply};
use crate::shard::placement::ShardId;
use crate::shard::Shard;

/// How soon shard 0 hands the groups' offsets out again after a shard did
/// not take them.
const RETRY: Duration = Duration::from_secs(1);

/// Whether this node coordinates groups now: always standalone; in a
/// cluster when it leads the controller group. Otherwise the error that
/// sends the client to the coordinator.
pub fn check(shard: &Shard) -> Result<(), ApiError> {
    if shard.raft.is_none() {
        return Ok(());
    }
    match shard.state.controller_leader() {
        Some(l) if l == shard.config.node_id => Ok(()),
        Some(l) => Err(ApiError::not_coordinator(shard.catalog.assignment().node(l))),
        None => Err(ApiError::coordinator_not_available()),
    }
}

/// Shard 0 of a cluster node: after each applied run of controller
/// entries, hands every group whose offsets changed to its shard, until
/// the broker stops. The first pass hands out every group (a restart
/// replays raft0 before this starts).
pub fn follow(shard: Rc<Shard>, controller: Controller) {
    glommio::spawn_local(async move {
        let mut rx = controller.applied();
        let mut held: Rc<ClusterState> = Rc::new(ClusterState::default());
        loop {
            rx.borrow_and_update();
            let (index, state) = (controller.applied_index(), controller.state());
            let done = hand_out(&shard, index, &held, &state).await;
            if done {
                held = state;
            }
            if !next_pass(&shard, &mut rx, done, RETRY).await {
                return;
            }
            if shard.is_shutting_down() {
                return;
            }
        }
    })
    .detach();
}

/// Sends each shard the groups of `now` that differ from `before`; `true`
/// once every shard took them.
async fn hand_out(shard: &Rc<Shard>, index: u64, before: &ClusterState, now: &ClusterState) -> bool {
    let mut per_shard: BTreeMap<ShardId, Vec<Adopted>> = BTreeMap::new();
    for (name, offsets) in &now.groups.0 {
        if before.groups.get(name) != Some(offsets) {
            per_shard
                .entry(shard.group_owner(name))
                .or_default()
                .push((name.clone(), Some(flatten(offsets))));
        }
    }
    for name in before.groups.0.keys() {
        if now.groups.get(name).is_none() {
            per_shard
                .entry(shard.group_owner(name))
                .or_default()
                .push((name.clone(), None));
        }
    }
    let calls = per_shard
        .into_iter()
        .map(|(s, groups)| shard.call(s, Op::AdoptOffsets { index, groups }));
    let mut done = true;
    for reply in futures::future::join_all(calls).await {
        if let Reply::Done(Err(e)) = reply {
            tracing::warn!(error = %e, "consumer group offsets not handed to a shard; again in a moment");
            done = false;
        }
    }
    done
}

/// `Op::AdoptOffsets`, on a group's shard.
pub fn adopt(shard: &Shard, index: u64, groups: Vec<Adopted>) {
    let now = now_ms();
    for (name, offsets) in groups {
        crate::groups::offset_store::adopt(&shard.groups, &name, index, offsets, now, false);
    }
}
