//! Topic create, delete and config changes. They run on the controller
//! shard (shard 0), one at a time, and are the only writers of the catalog.
//!
//! Crash safety: a topic exists once its `meta.json` is renamed into place.
//! Create writes it only after clearing what the broker itself left in the
//! directory, refusing records no create wrote (`topic::clear_for_create`),
//! then opens the partitions (a crash in between reopens them, empty, at
//! start). Delete first renames `meta.json` to `meta.json.deleted`, so a
//! crash mid-delete never brings the topic back and the next start (or
//! create) finishes it.
//!
//! A client cannot cut one of these in half: `Shard::call` runs them to
//! their end in a task of their own, whether or not the client still waits
//! for the answer. Each keeps the catalog and the disk in step when a step
//! fails: `meta.json` is the commit point and the catalog follows it, and
//! no partition stays open without a catalog entry (a failed create closes
//! every partition it opened; `Op::Remove` closes every one it names).
//!
//! In cluster mode a create, delete or config change is proposed to the
//! controller group instead (forwarded to its leader from any node), and
//! answered once this node caught up with the leader and its reconciler
//! (cluster/reconciler.rs) made the change here: the reconciler is then
//! the one writer of `meta.json` and the catalog, on every node alike.

use std::collections::BTreeMap;
use std::rc::Rc;

use es_raft::controller::{refusal, ControllerCommand, ControllerError, Refusal};
use futures::future::join_all;

use crate::error::{ApiError, ErrorCode};
use crate::shard::message::{Op, ProducerOp, Reply};
use crate::shard::placement::ShardId;
use crate::shard::Shard;
use crate::topics::topic::{self, TopicMeta};

/// Partitions of a topic grouped by the shard that owns them.
pub fn by_owner(shard: &Shard, topic: &str, partitions: u32) -> BTreeMap<ShardId, Vec<u32>> {
    let mut out: BTreeMap<ShardId, Vec<u32>> = BTreeMap::new();
    for p in 0..partitions {
        out.entry(shard.owner(topic, p)).or_default().push(p);
    }
    out
}

/// Sends each shard that owns partitions of `meta` the op `op` makes of
/// its partitions, at once: the replies, in shard order.
pub async fn ask_owners(shard: &Rc<Shard>, meta: &TopicMeta, op: impl Fn(Vec<u32>) -> Op) -> Vec<Reply> {
    let calls = by_owner(shard, &meta.name, meta.partitions)
        .into_iter()
        .map(|(owner, partitions)| shard.call(owner, op(partitions)));
    join_all(calls).await
}

/// A controller request's failure as the broker's error: never proposed
/// (`NotLeader`, `Unavailable`) is `leader_not_available`, proposed with
/// no known outcome is `outcome_unknown`, a stopped controller
/// `unavailable`.
pub fn controller_error(e: ControllerError) -> ApiError {
    match e {
        ControllerError::NotLeader { .. } | ControllerError::Unavailable(_) => {
            ApiError::leader_not_available(format!(
                "the cluster's controller cannot take the change now ({e}); nothing was changed: retry"
            ))
        }
        ControllerError::OutcomeUnknown(_) => ApiError::outcome_unknown(format!(
            "the change was proposed to the cluster's controller but its outcome is unknown ({e}): \
             look at the topic before retrying"
        )),
        ControllerError::Fatal(_) => ApiError::unavailable(format!("{e}")),
    }
}

/// A raft refusal (the controller's, or a partition's idempotent window)
/// as the broker's error: the same on every node.
pub fn refused(r: Refusal) -> ApiError {
    let code = match r.code.as_str() {
        refusal::TOPIC_EXISTS => ErrorCode::TopicExists,
        refusal::TOPIC_NOT_FOUND => ErrorCode::TopicNotFound,
        refusal::REPLICATION_FACTOR_TOO_LARGE => ErrorCode::ReplicationFactorTooLarge,
        refusal::PARTITION_NOT_FOUND => ErrorCode::PartitionNotFound,
        refusal::GROUP_NOT_FOUND => ErrorCode::GroupNotFound,
        refusal::TOO_MANY_GROUPS => ErrorCode::TooManyGroups,
        refusal::UNKNOWN_PRODUCER_ID => ErrorCode::UnknownProducerId,
        refusal::NOT_OWNER => ErrorCode::NotOwner,
        refusal::PRODUCER_FENCED => ErrorCode::ProducerFenced,
        refusal::OUT_OF_ORDER_SEQUENCE => ErrorCode::OutOfOrderSequence,
        refusal::DUPLICATE_SEQUENCE => ErrorCode::DuplicateSequence,
        _ => ErrorCode::InvalidRequest,
    };
    ApiError::new(code, r.message)
}

/// Proposes `cmd` to the controller (forwarded to its leader from any
/// node) and waits until this node's catalog shows the outcome; the
/// command's result.
async fn propose(shard: &Rc<Shard>, cmd: ControllerCommand) -> Result<serde_json::Value, ApiError> {
    let c = crate::cluster::reconciler::controller(shard)?;
    let v = c.propose(cmd).await.map_err(controller_error)?.map_err(refused)?;
    // Applied on the leader; here once this node caught up with it.
    crate::cluster::reconciler::read_barrier(shard).await?;
    Ok(v)
}

/// Cluster mode: a create through the controller. `meta.replication_factor`
/// 0 asks for the default (`--default-replication-factor`, else three or
/// every node when fewer).
async fn create_replicated(shard: &Rc<Shard>, meta: TopicMeta) -> Result<TopicMeta, ApiError> {
    let held = partition_count(shard);
    let max = shard.config.partitions_max as u64;
    if held + meta.partitions as u64 > max {
        return Err(too_many_partitions(&meta, held, max));
    }
    let rf = match meta.replication_factor {
        0 => shard.config.cluster.default_replication_factor,
        n => Some(n),
    };
    let cmd = ControllerCommand::CreateTopic {
        name: meta.name.clone(),
        meta: serde_json::to_value(&meta).map_err(|e| ApiError::internal(e.to_string()))?,
        partitions: meta.partitions,
        replication_factor: rf,
    };
    propose(shard, cmd).await?;
    shard
        .catalog
        .get(&meta.name)
        .map(|m| (*m).clone())
        .ok_or_else(|| ApiError::topic_not_found(&meta.name))
}

/// Partitions of every topic in the catalog.
fn partition_count(shard: &Shard) -> u64 {
    shard
        .catalog
        .snapshot()
        .values()
        .map(|m| m.partitions as u64)
        .sum()
}

/// A create of `meta` would take the broker's `held` partitions past
/// `--partitions-max`.
fn too_many_partitions(meta: &TopicMeta, held: u64, max: u64) -> ApiError {
    ApiError::new(
        ErrorCode::TooManyPartitions,
        format!(
            "topic {:?} with {} partitions would bring the broker to {} partitions, past its {max} \
             (--partitions-max; it holds {held}): delete topics no longer used, or raise the limit \
             (each partition takes up to 3 file descriptors)",
            meta.name,
            meta.partitions,
            held + meta.partitions as u64,
        ),
    )
}

/// Sends one operation per owning shard, in parallel, and fails if any does.
async fn on_owners(
    shard: &Rc<Shard>,
    topic: &str,
    partitions: u32,
    make: impl Fn(Vec<u32>) -> Op,
) -> Result<(), ApiError> {
    let calls = by_owner(shard, topic, partitions)
        .into_iter()
        .map(|(owner, ps)| shard.call(owner, make(ps)));
    for reply in join_all(calls).await {
        match reply {
            Reply::Done(Ok(())) => {}
            Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    Ok(())
}

pub async fn create_topic(shard: &Rc<Shard>, meta: TopicMeta) -> Result<TopicMeta, ApiError> {
    let _guard = shard.controller_lock.acquire_permit(1).await;
    if shard.config.cluster.enabled() {
        return create_replicated(shard, meta).await;
    }
    if shard.catalog.get(&meta.name).is_some() {
        return Err(ApiError::new(
            ErrorCode::TopicExists,
            format!("topic {:?} already exists", meta.name),
        ));
    }
    let held = partition_count(shard);
    let max = shard.config.partitions_max as u64;
    if held + meta.partitions as u64 > max {
        return Err(too_many_partitions(&meta, held, max));
    }
    topic::clear_for_create(shard.data_dir(), &meta.name).await?;
    // Cold segments a crash in the middle of deleting an earlier topic of
    // this name left behind.
    let cold = crate::topics::cleanup::cold_store(&shard.config);
    for p in 0..meta.partitions {
        cold.delete_partition(&crate::topics::cleanup::cold_key(&meta.name, p))
            .await
            .map_err(ApiError::storage)?;
    }
    crate::producers::snapshot::remove_topic(shard.data_dir(), &meta.name).await?;
    topic::write_meta(shard.data_dir(), &meta).await?;
    let opened = on_owners(shard, &meta.name, meta.partitions, |partitions| Op::Open {
        meta: meta.clone(),
        partitions,
    })
    .await;
    if let Err(e) = opened {
        tracing::error!(topic = %meta.name, error = %e, "create failed; removing the topic");
        if let Err(undo) = discard(shard, &meta.name, meta.partitions).await {
            tracing::error!(topic = %meta.name, error = %undo, "a failed create was not all undone; the next start or create of the name finishes it");
        }
        return Err(e);
    }
    shard.catalog.put(meta.clone());
    tracing::info!(topic = %meta.name, partitions = meta.partitions, "topic created");
    crate::operate::nofile::check(&shard.config, partition_count(shard));
    Ok(meta)
}

pub async fn delete_topic(shard: &Rc<Shard>, name: &str) -> Result<(), ApiError> {
    let _guard = shard.controller_lock.acquire_permit(1).await;
    if shard.config.cluster.enabled() {
        let cmd = ControllerCommand::DeleteTopic {
            name: name.to_string(),
        };
        return propose(shard, cmd).await.map(|_| ());
    }
    let meta = shard
        .catalog
        .get(name)
        .ok_or_else(|| ApiError::topic_not_found(name))?;
    discard(shard, name, meta.partitions).await?;
    tracing::info!(topic = %name, "topic deleted");
    crate::operate::nofile::check(&shard.config, partition_count(shard));
    Ok(())
}

/// Deletes topic `name` of `partitions` partitions. Marking it deleted on
/// disk is the commit point: an error before it changes nothing; from it
/// on, the topic is gone from the catalog at once and after a restart, and
/// every partition is closed (even where another fails) before its
/// directory and producer snapshots go.
async fn discard(shard: &Rc<Shard>, name: &str, partitions: u32) -> Result<(), ApiError> {
    topic::mark_deleted(shard.data_dir(), name).await?;
    shard.catalog.remove(name);
    on_owners(shard, name, partitions, |partitions| Op::Remove {
        topic: name.to_string(),
        partitions,
    })
    .await?;
    crate::topics::fsops::remove_dir_all(&topic::topic_dir(shard.data_dir(), name)).await?;
    crate::producers::snapshot::remove_topic(shard.data_dir(), name).await?;
    Ok(())
}

/// A new producer id, or the next epoch of `existing`.
/// `caller` owns a new id; an existing one takes its owner or an admin
/// (an id without owner, issued while auth was disabled, is claimed by
/// the first key that re-initializes it), else `not_owner` and the epoch
/// stays as it was.
pub async fn init_producer(
    shard: &Rc<Shard>,
    existing: Option<i64>,
    caller: &crate::auth::Principal,
) -> Result<(i64, i16), ApiError> {
    if shard.config.cluster.enabled() {
        // The controller group issues ids on a cluster node; no lock: it
        // orders them itself.
        return crate::producers::cluster::init(shard, existing, caller).await;
    }
    let _guard = shard.controller_lock.acquire_permit(1).await;
    let mut registry = take_registry(shard).await?;
    let now_ms = crate::operate::clock::now_ms();
    let owner: Option<std::sync::Arc<str>> = caller.id().map(std::sync::Arc::from);
    let result = match existing {
        None => registry
            .issue_owned(shard.data_dir(), owner.clone())
            .await
            .map(|id| (id, 0)),
        Some(id) if !registry.may_use(id, caller) => Err(crate::producers::ids::not_owner(id, caller)),
        Some(id) => {
            // An id with no epoch past 0 in the registry is live if some
            // shard holds state for it (it wrote lately).
            let shards_know = if registry.has_epoch(id) {
                Ok(None)
            } else {
                epoch_on_shards(shard, id).await
            };
            match shards_know {
                Ok(known) => registry
                    .next_epoch(shard.data_dir(), id, known, now_ms, owner.clone())
                    .await
                    .map(|epoch| (id, epoch)),
                Err(e) => Err(e),
            }
        }
    };
    let (id, epoch) = match result {
        Ok(issued) => issued,
        Err(e) => {
            *shard.producers.registry.borrow_mut() = Some(registry);
            return Err(e);
        }
    };
    let owner = registry.owner(id);
    *shard.producers.registry.borrow_mut() = Some(registry);
    // Every shard learns the id, and fences the older epochs, before the
    // answer.
    on_every_shard(
        shard,
        ProducerOp::Issued {
            producer_id: id,
            epoch,
            at_ms: now_ms,
            owner,
        },
    )
    .await?;
    Ok((id, epoch))
}

/// The producer id registry, taken out of its slot (put it back with
/// `*shard.producers.registry.borrow_mut() = Some(..)`): loaded at first use,
/// once the broker is ready, and then its floors told to every shard. Under
/// the controller lock.
pub async fn take_registry(shard: &Rc<Shard>) -> Result<crate::producers::ids::Registry, ApiError> {
    let loaded = shard.producers.registry.borrow_mut().take();
    if let Some(r) = loaded {
        return Ok(r);
    }
    let registry = crate::producers::ids::Registry::load(shard).await?;
    let floors = registry.floors();
    let told = on_every_shard(shard, ProducerOp::Floors(floors)).await;
    // Loaded whatever the shards answered: a floor only moves up, and the
    // next load would find the same.
    match told {
        Ok(()) => Ok(registry),
        Err(e) => {
            *shard.producers.registry.borrow_mut() = Some(registry);
            Err(e)
        }
    }
}

/// The newest epoch any shard holds for `id`.
async fn epoch_on_shards(shard: &Rc<Shard>, id: i64) -> Result<Option<i16>, ApiError> {
    let calls = (0..shard.shards).map(|s| shard.call(s, Op::Producers(ProducerOp::Epoch(id))));
    let mut newest = None;
    for reply in join_all(calls).await {
        match reply {
            Reply::Epoch(e) => newest = newest.max(e),
            Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    Ok(newest)
}

/// Runs `op` on every shard; the first error, if any.
pub async fn on_every_shard(shard: &Rc<Shard>, op: ProducerOp) -> Result<(), ApiError> {
    let calls = (0..shard.shards).map(|s| shard.call(s, Op::Producers(op.clone())));
    for reply in join_all(calls).await {
        if let Reply::Done(Err(e)) = reply {
            return Err(e);
        }
    }
    Ok(())
}

pub async fn patch_topic(
    shard: &Rc<Shard>,
    name: &str,
    changes: &serde_json::Map<String, serde_json::Value>,
) -> Result<TopicMeta, ApiError> {
    let _guard = shard.controller_lock.acquire_permit(1).await;
    let current = shard
        .catalog
        .get(name)
        .ok_or_else(|| ApiError::topic_not_found(name))?;
    let mut next = (*current).clone();
    next.config = current.config.patched(changes)?;
    if shard.config.cluster.enabled() {
        let mut proposed = next.clone();
        proposed.created_index = None;
        let cmd = ControllerCommand::PatchTopic {
            name: name.to_string(),
            meta: serde_json::to_value(&proposed).map_err(|e| ApiError::internal(e.to_string()))?,
        };
        propose(shard, cmd).await?;
        return shard
            .catalog
            .get(name)
            .map(|m| (*m).clone())
            .ok_or_else(|| ApiError::topic_not_found(name));
    }
    topic::write_meta(shard.data_dir(), &next).await?;
    // The catalog follows `meta.json` at once: a restart would read the
    // new config whatever happens next.
    shard.catalog.put(next.clone());
    on_owners(shard, name, next.partitions, |partitions| Op::Configure {
        topic: name.to_string(),
        config: next.config.clone(),
        partitions,
    })
    .await?;
    Ok(next)
}
