//! The reconciler, on shard 0 of a cluster node: after every applied run
//! of controller entries it makes this node match the controller's state
//! (Redpanda's controller_backend; the spec's §3.2):
//!
//! - every topic of the state is in the catalog, with its `meta.json` on
//!   disk (so a restart serves it at once), whether or not this node holds
//!   a replica of it: a node without one still knows the topic and
//!   answers `not_leader`;
//! - every partition assigned to this node is open on its owning shard as
//!   a replica (`Op::OpenReplica`): its log, then its Raft group, started
//!   (`initialize`) only when the `CreateTopic` was applied live, after
//!   this node's start; replays open the group as it is on disk;
//! - a topic the state no longer holds is deleted here (its replicas shut
//!   down, their logs closed, their directories and Raft metadata moved to
//!   the trash) — but only once the state is at or past the index that
//!   created it (`TopicMeta::created_index`), so a controller log being
//!   replayed after a restart never deletes a topic it has not replayed
//!   yet;
//! - the assignment (replicas, node addresses) is published to every
//!   shard (`Catalog::set_assignment`).
//!
//! A step that fails (a disk error opening a replica) is logged and tried
//! again at the next change, or after `RETRY` at the latest.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::{Duration, Instant};

use es_raft::controller::{AppliedState, ClusterState, Controller};

use crate::cluster::applied::next_pass;
use crate::cluster::assignment::Assignment;
use crate::error::ApiError;
use crate::shard::message::{Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topics::topic::{self, TopicMeta};

/// How soon a reconcile that left something undone runs again.
const RETRY: Duration = Duration::from_secs(1);
/// How long a controller change applied here may take to show in the
/// catalog (the reconciler's pass after it) before a request waiting for
/// it gives up.
const PUBLISH_WAIT: Duration = Duration::from_secs(10);
/// How often a request waiting for the catalog looks again.
const PUBLISH_POLL: Duration = Duration::from_millis(5);

/// What the reconciler has done on this node.
#[derive(Default)]
struct Local {
    /// Replicas opened: (topic, partition, created index).
    opened: BTreeSet<(String, u32, u64)>,
}

/// Starts the reconciler of a cluster node (shard 0).
pub fn spawn(shard: Rc<Shard>, controller: Controller) {
    glommio::spawn_local(run(shard, controller)).detach();
}

async fn run(shard: Rc<Shard>, controller: Controller) {
    // Entries applied by now were applied before this start: their topics'
    // groups exist on disk (or will come from their leader); later ones
    // are live.
    let start_index = controller.applied_index();
    let mut rx = controller.applied();
    let mut local = Local::default();
    loop {
        let applied: AppliedState = rx.borrow_and_update().clone();
        let done = reconcile(&shard, applied.index, &applied.state, start_index, &mut local).await;
        if shard.is_shutting_down() {
            return;
        }
        if !next_pass(&shard, &mut rx, done, RETRY).await {
            return;
        }
    }
}

/// The broker's metadata of a topic record: its `meta` as the proposer
/// sent it, with the assignment's replication factor and the index that
/// created it.
fn meta_of(record: &es_raft::controller::TopicRecord) -> Result<TopicMeta, String> {
    let mut meta: TopicMeta = serde_json::from_value(record.meta.clone()).map_err(|e| {
        format!(
            "topic {:?}: its metadata in the controller is not the broker's: {e}",
            record.name
        )
    })?;
    meta.name = record.name.clone();
    meta.partitions = record.partitions.len() as u32;
    meta.replication_factor = record.partitions.first().map_or(0, |a| a.replicas.len() as u32);
    meta.created_index = Some(record.created_index);
    Ok(meta)
}

/// One pass; `true` when nothing was left undone.
async fn reconcile(
    shard: &Rc<Shard>,
    index: u64,
    state: &ClusterState,
    start_index: u64,
    local: &mut Local,
) -> bool {
    let me = shard.config.node_id;
    let mut done = true;
    // Deleted topics, and older topics of a name created again.
    for (name, meta) in shard.catalog.snapshot().iter() {
        let gone = match (state.topics.get(name), meta.created_index) {
            (None, Some(c)) => index >= c,
            (Some(r), Some(c)) => c < r.created_index,
            (_, None) => {
                tracing::warn!(topic = %name, "a topic without a controller index in a cluster node's data dir; left alone");
                false
            }
        };
        if gone {
            if let Err(e) = delete_local(shard, name, meta.partitions).await {
                tracing::error!(topic = %name, error = %e, "deleting a topic here failed; trying again");
                done = false;
            }
            local.opened.retain(|(t, _, _)| t != name);
        }
    }
    // Topics of the state: in the catalog and on disk, replicas open.
    publish_opening(shard, state, local);
    for (name, record) in &state.topics {
        let meta = match meta_of(record) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(error = %e, "a topic of the controller is not served");
                continue;
            }
        };
        let known = shard.catalog.get(name);
        if known.as_deref() != Some(&meta) {
            if let Err(e) = publish(shard, &meta, known.as_deref()).await {
                tracing::error!(topic = %name, error = %e, "a topic's metadata was not written here; trying again");
                done = false;
                continue;
            }
        }
        for (p, a) in record.partitions.iter().enumerate() {
            let p = p as u32;
            let key = (name.clone(), p, record.created_index);
            if !a.replicas.contains(&me) || local.opened.contains(&key) {
                continue;
            }
            let op = Op::OpenReplica {
                meta: meta.clone(),
                partition: p,
                group: a.group,
                replicas: a.replicas.clone(),
                initialize: record.created_index > start_index,
            };
            match shard.call(shard.owner(name, p), op).await {
                Reply::Done(Ok(())) => {
                    local.opened.insert(key);
                }
                Reply::Done(Err(e)) => {
                    tracing::error!(topic = %name, partition = p, error = %e, "opening a replica failed; trying again");
                    done = false;
                }
                other => {
                    tracing::error!(topic = %name, partition = p, reply = ?other, "unexpected reply opening a replica");
                    done = false;
                }
            }
        }
    }
    shard.catalog.set_assignment(Assignment::of(index, state));
    publish_opening(shard, state, local);
    done
}

/// Publishes how many replicas assigned to this node are not open yet
/// (`BrokerState::replicas_opening`: `/ready` waits for 0).
fn publish_opening(shard: &Shard, state: &ClusterState, local: &Local) {
    let me = shard.config.node_id;
    let opening = state
        .topics
        .iter()
        .flat_map(|(name, record)| {
            record.partitions.iter().enumerate().filter(move |(p, a)| {
                a.replicas.contains(&me)
                    && !local
                        .opened
                        .contains(&(name.clone(), *p as u32, record.created_index))
            })
        })
        .count();
    shard
        .state
        .replicas_opening
        .store(opening, std::sync::atomic::Ordering::Release);
}

/// Writes `meta.json` of a topic new or changed here and puts it in the
/// catalog; a config change reaches the open replicas.
async fn publish(shard: &Rc<Shard>, meta: &TopicMeta, known: Option<&TopicMeta>) -> Result<(), ApiError> {
    let data_dir = shard.data_dir();
    if known.is_none() {
        // A new topic here: what an earlier topic of the name left goes
        // (a delete cut short, a group's Raft metadata).
        topic::clear_for_create(data_dir, &meta.name).await?;
        crate::topics::fsops::remove_dir_all(&data_dir.join("raft").join(&meta.name)).await?;
    }
    topic::write_meta(data_dir, meta).await?;
    shard.catalog.put(meta.clone());
    if let Some(old) = known {
        if old.config != meta.config {
            let calls = crate::topics::controller::by_owner(shard, &meta.name, meta.partitions)
                .into_iter()
                .map(|(owner, partitions)| {
                    shard.call(
                        owner,
                        Op::Configure {
                            topic: meta.name.clone(),
                            config: meta.config.clone(),
                            partitions,
                        },
                    )
                });
            for reply in futures::future::join_all(calls).await {
                if let Reply::Done(Err(e)) = reply {
                    return Err(e);
                }
            }
        }
    } else {
        tracing::info!(topic = %meta.name, partitions = meta.partitions, rf = meta.replication_factor, "topic created");
    }
    Ok(())
}

/// Deletes topic `name` here: marked deleted on disk (the commit point, as
/// a standalone delete), out of the catalog, its replicas shut down and
/// their files (log and Raft metadata) moved to the trash.
async fn delete_local(shard: &Rc<Shard>, name: &str, partitions: u32) -> Result<(), ApiError> {
    topic::mark_deleted(shard.data_dir(), name).await?;
    shard.catalog.remove(name);
    let calls = crate::topics::controller::by_owner(shard, name, partitions)
        .into_iter()
        .map(|(owner, partitions)| {
            shard.call(
                owner,
                Op::Remove {
                    topic: name.to_string(),
                    partitions,
                },
            )
        });
    for reply in futures::future::join_all(calls).await {
        if let Reply::Done(Err(e)) = reply {
            return Err(e);
        }
    }
    crate::topics::fsops::remove_dir_all(&topic::topic_dir(shard.data_dir(), name)).await?;
    crate::topics::fsops::remove_dir_all(&shard.data_dir().join("raft").join(name)).await?;
    tracing::info!(topic = %name, "topic deleted");
    Ok(())
}

/// The controller on this node (shard 0).
pub fn controller(shard: &Shard) -> Result<Controller, ApiError> {
    shard
        .raft
        .as_ref()
        .and_then(|t| t.controller.borrow().clone())
        .ok_or_else(|| ApiError::leader_not_available("the controller group is not open yet"))
}

/// Waits until the catalog shows the controller's state at `index` or
/// later (the reconciler published it), bounded by [`PUBLISH_WAIT`].
pub async fn wait_published(shard: &Shard, index: u64) -> Result<(), ApiError> {
    let deadline = Instant::now() + PUBLISH_WAIT;
    while shard.catalog.assignment().applied_index < index {
        if Instant::now() >= deadline || shard.is_shutting_down() {
            return Err(ApiError::leader_not_available(format!(
                "this node has not applied the controller's entry {index} yet; retry"
            )));
        }
        glommio::timer::sleep(PUBLISH_POLL).await;
    }
    Ok(())
}

/// `Op::ReadBarrier`, on shard 0: this node applies every controller entry
/// committed when it was asked (the spec's read barrier, bounded), then
/// waits for the catalog to show it.
pub async fn read_barrier(shard: &Rc<Shard>) -> Result<(), ApiError> {
    debug_assert_eq!(shard.id, CONTROLLER_SHARD);
    let c = controller(shard)?;
    c.read_barrier()
        .await
        .map_err(crate::topics::controller::controller_error)?;
    wait_published(shard, c.applied_index()).await
}
