//! A partition's life on its shard: opened (recovered, its producer state
//! loaded), closed at shutdown (its producer state saved), removed with
//! its topic (its files discarded, cold copies deleted). In cluster mode a
//! partition is opened as this node's replica (`open_replica`): its log,
//! then its Raft group over it, whose metadata lives in
//! `<data-dir>/raft/<topic>/<partition>/`.

use std::rc::Rc;

use es_storage::PartitionLog;
use futures::StreamExt;

use crate::error::ApiError;
use crate::limits::OPEN_PARALLEL_PARTITIONS;
use crate::producers::snapshot::{self as producer_snapshot, PartitionProducers};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topics::topic::{self, TopicMeta};

/// Opens (creating) partitions of `meta` that this shard owns, up to
/// [`OPEN_PARALLEL_PARTITIONS`] at once. Every one is tried; the first
/// error is returned.
pub async fn open(shard: &Rc<Shard>, meta: &TopicMeta, partitions: &[u32]) -> Result<(), ApiError> {
    let opened: Vec<Result<(), ApiError>> = futures::stream::iter(partitions.iter().copied())
        .map(|p| open_partition(shard, meta, p))
        .buffer_unordered(OPEN_PARALLEL_PARTITIONS)
        .collect()
        .await;
    opened.into_iter().collect()
}

/// Opens partition `p` of `meta`, which this shard owns. A partition open
/// already is refused (`internal`), before its directory is touched:
/// opening it again would put a second log on its files.
pub async fn open_partition(shard: &Rc<Shard>, meta: &TopicMeta, p: u32) -> Result<(), ApiError> {
    debug_assert_eq!(shard.owner(&meta.name, p), shard.id, "opened on its owner");
    if shard.partitions.borrow().contains(&meta.name, p) {
        return Err(ApiError::internal(format!(
            "partition {}/{p} is open already",
            meta.name
        )));
    }
    let dir = topic::partition_dir(shard.data_dir(), &meta.name, p);
    let cold = Some(crate::topics::cleanup::cold_tier(&shard.config, &meta.name, p));
    let (log, report) = PartitionLog::open_with(&dir, meta.config.log_config(), shard.batcher.clone(), cold)
        .await
        .map_err(ApiError::storage)?;
    if !report.scanned.is_empty() {
        tracing::info!(topic = %meta.name, partition = p, scanned = report.scanned.len(), "recovered partition");
    }
    metrics::counter!("es_recovery_segments_scanned_total").increment(report.scanned.len() as u64);
    let loaded = async {
        let (table, loaded) = producer_snapshot::load(
            shard.data_dir(),
            &meta.name,
            p,
            &log,
            crate::operate::clock::now_ms(),
        )
        .await?;
        metrics::counter!("es_recovery_producer_batches_scanned_total").increment(loaded.batches_scanned);
        if loaded.batches_scanned > 0 {
            tracing::info!(
                topic = %meta.name,
                partition = p,
                from_offset = loaded.scanned_from,
                batches = loaded.batches_scanned,
                "producer state rebuilt from the batches after its snapshot"
            );
        }
        let snapshots =
            producer_snapshot::save_opened(shard.data_dir(), &meta.name, p, &table, &log, &loaded).await?;
        Ok::<_, ApiError>((table, snapshots))
    }
    .await;
    let (table, snapshots) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            // Not served: closed, not left open behind no catalog entry.
            let _ = log.close().await;
            return Err(e);
        }
    };
    let inserted = shard.partitions.borrow_mut().insert(&meta.name, p, log);
    if let Err(taken) = inserted {
        // Opened meanwhile by another operation: this copy goes.
        let _ = taken.log.close().await;
        return Err(ApiError::internal(taken.to_string()));
    }
    let new: Vec<(i64, i16, i64)> = {
        let mut known = shard.producers.known.borrow_mut();
        table
            .producers()
            .filter(|&(id, epoch, active_ms)| known.note(id, epoch, active_ms))
            .collect()
    };
    shard
        .producers
        .partitions
        .borrow_mut()
        .insert((meta.name.clone(), p), PartitionProducers { table, snapshots });
    if let Err(e) = crate::producers::expiry::tell_others_and_wait(shard, new).await {
        // Those shards refuse the ids (unknown_producer_id): their
        // producers ask for new ones; nothing is lost.
        tracing::warn!(topic = %meta.name, partition = p, error = %e, "other shards were not told of this partition's producer ids");
    }
    Ok(())
}

/// A replica's Raft metadata directory: `<data-dir>/raft/<topic>/<p>`.
pub fn raft_dir(shard: &Shard, topic: &str, partition: u32) -> std::path::PathBuf {
    shard
        .data_dir()
        .join("raft")
        .join(topic)
        .join(partition.to_string())
}

/// A partition group's settings, from the broker's cluster flags.
pub fn group_config(shard: &Shard) -> es_raft::GroupConfig {
    let c = &shard.config.cluster;
    es_raft::GroupConfig {
        heartbeat_ms: c.raft_heartbeat_ms,
        election_timeout_ms: c.raft_election_timeout_ms,
        append_bytes_max: c.raft_append_bytes_max,
        entry_bytes_max: c.raft_entry_bytes_max,
        proposals_in_flight: c.raft_proposals_in_flight,
        produce_timeout_ms: c.produce_timeout_ms,
        replica_lag_ms: c.replica_lag_ms,
        snapshot_chunk_bytes: c.raft_snapshot_chunk_bytes,
        recovery_bytes_per_sec: c.raft_recovery_bytes_per_sec,
        ..es_raft::GroupConfig::default()
    }
}

/// What produce checks a replicated partition's batches against.
pub fn batch_rules(config: &crate::topics::topic::TopicConfig) -> es_raft::BatchRules {
    es_raft::BatchRules {
        batch_bytes_max: config.log_config().batch_bytes_max,
        compacted: config.is_compacted(),
    }
}

/// Opens this node's replica of partition `p` of `meta` (cluster mode):
/// its log, recovered, then its Raft group over it. A replica open
/// already is left as it is. Idempotent produce is not replicated yet, so
/// no producer state is loaded.
pub async fn open_replica(
    shard: &Rc<Shard>,
    meta: &TopicMeta,
    p: u32,
    group: u64,
    replicas: &[u64],
    initialize: bool,
) -> Result<(), ApiError> {
    debug_assert_eq!(shard.owner(&meta.name, p), shard.id, "opened on its owner");
    let Some(t) = shard.raft.clone() else {
        return Err(ApiError::internal("a replica opened on a standalone broker"));
    };
    if shard.partitions.borrow().contains(&meta.name, p) {
        return Ok(());
    }
    let dir = topic::partition_dir(shard.data_dir(), &meta.name, p);
    let (log, report) = PartitionLog::open(&dir, meta.config.log_config(), shard.batcher.clone())
        .await
        .map_err(ApiError::storage)?;
    if !report.scanned.is_empty() {
        tracing::info!(topic = %meta.name, partition = p, scanned = report.scanned.len(), "recovered partition");
    }
    metrics::counter!("es_recovery_segments_scanned_total").increment(report.scanned.len() as u64);
    let rdir = raft_dir(shard, &meta.name, p);
    if let Err(e) = es_storage::create_dir_all(&rdir).await {
        let _ = log.close().await;
        return Err(ApiError::storage(e));
    }
    let members = initialize
        .then(|| es_raft::Initialize::from_replicas(replicas))
        .flatten();
    let opened = es_raft::PartitionRaft::open(
        shard.config.node_id,
        group,
        log.clone(),
        &rdir,
        members,
        &t.network,
        &t.registry,
        &group_config(shard),
    )
    .await;
    let raft = match opened {
        Ok(r) => r,
        Err(e) => {
            let _ = log.close().await;
            return Err(ApiError::internal(format!(
                "opening the replica of {}/{p}: {e}",
                meta.name
            )));
        }
    };
    raft.set_batch_rules(batch_rules(&meta.config));
    crate::cluster::replica_observer::observe(&raft);
    let inserted = shard
        .partitions
        .borrow_mut()
        .insert_replica(&meta.name, p, log, Some(raft.clone()));
    if let Err(taken) = inserted {
        raft.shutdown().await;
        let _ = taken.log.close().await;
        return Ok(());
    }
    tracing::info!(topic = %meta.name, partition = p, group, ?replicas, initialize, "replica opened");
    Ok(())
}

/// Closes partitions of `topic` and deletes their files. Every partition is
/// closed whatever fails on another: none of them is left open (an open
/// partition of a topic the catalog no longer holds would be a ghost that
/// a later create of the name collides with). The first error is returned.
pub(super) async fn remove(shard: &Shard, topic: &str, partitions: &[u32]) -> Result<(), ApiError> {
    let mut first_error = None;
    for &p in partitions {
        let owned = shard.partitions.borrow_mut().remove(topic, p);
        let producers = shard
            .producers
            .partitions
            .borrow_mut()
            .remove(&(topic.to_string(), p));
        if let Some(producers) = producers {
            // No snapshot lands in the directory about to be deleted.
            producers.snapshots.close().await;
        }
        if let Some(owned) = owned {
            if let Some(raft) = &owned.raft {
                raft.shutdown().await;
                if let Some(t) = &shard.raft {
                    t.retired.retire(raft.stats());
                }
            }
            // A poisoned log cannot close cleanly; it is being deleted anyway.
            let _ = owned.log.close().await;
        }
        let dir = topic::partition_dir(shard.data_dir(), topic, p);
        let mut discarded = crate::topics::trash::discard(shard.data_dir(), &dir, shard.id).await;
        if shard.config.cluster.enabled() {
            let rdir = raft_dir(shard, topic, p);
            let raft = crate::topics::trash::discard(shard.data_dir(), &rdir, shard.id).await;
            discarded = discarded.and(raft);
        }
        let cold = crate::topics::cleanup::cold_store(&shard.config)
            .delete_partition(&crate::topics::cleanup::cold_key(topic, p))
            .await
            .map_err(ApiError::storage);
        if let Err(e) = discarded.and(cold) {
            tracing::error!(%topic, partition = p, error = %e, "a removed partition's files were not all deleted");
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Closes every partition this shard owns, up to
/// [`OPEN_PARALLEL_PARTITIONS`] at once: final fsync and sealed index, so
/// the next start scans nothing (a partition not written since it was
/// opened has both already, and costs no fsync). Returns how many did not
/// close cleanly (each logged).
pub async fn close_all(shard: &Shard) -> usize {
    let owned = shard.partitions.borrow_mut().drain();
    let closed: Vec<bool> = futures::stream::iter(owned)
        .map(|(topic, p, owned)| async move {
            // The group first: it stops writing to the log.
            if let Some(raft) = &owned.raft {
                raft.shutdown().await;
            }
            close_partition(shard, topic, p, owned.log).await
        })
        .buffer_unordered(OPEN_PARALLEL_PARTITIONS)
        .collect()
        .await;
    let unclean = closed.into_iter().filter(|clean| !clean).count();
    if shard.id == CONTROLLER_SHARD {
        // The exact next producer id, so the next start goes on one by one.
        let registry = shard.producers.registry.borrow_mut().take();
        if let Some(mut registry) = registry {
            if let Err(e) = registry.close(shard.data_dir()).await {
                tracing::warn!(error = %e, "producer id registry not closed; the next start skips the rest of its block");
            }
        }
    }
    unclean
}

/// Closes one partition at shutdown; `false` if it did not close cleanly.
async fn close_partition(shard: &Shard, topic: String, p: u32, log: PartitionLog) -> bool {
    if let Err(e) = log.close().await {
        tracing::error!(%topic, partition = p, error = %e, "partition did not close cleanly");
        return false;
    }
    let producers = shard
        .producers
        .partitions
        .borrow_mut()
        .remove(&(topic.clone(), p));
    if let Some(producers) = producers {
        if log.appended_since_open() {
            // Every placed batch is durable now: the snapshot covers the log.
            if let Err(e) = producers.snapshots.save_closed(&producers.table, &log).await {
                tracing::warn!(%topic, partition = p, error = %e, "producer snapshot not saved; the next start rescans");
            }
        } else {
            // The one saved at open (or none needed) still covers it.
            producers.snapshots.close().await;
        }
    }
    true
}
