//! Produce, independent of the transport: pick each record's partition
//! (explicit, key hash, or spread), group records by partition, append each
//! group as one batch on its owning shard in parallel, and answer offsets in
//! input order once every batch is fsynced. Then, on the owning shard, the
//! append itself (`append`): once per idempotent producer batch, acked when
//! durable.
//!
//! In cluster mode the append goes through the partition replica's Raft
//! group (`PartitionRaft::produce`): answered once committed on a
//! majority of its replicas and applied here. Only the leader takes it;
//! a request whose partitions are not all led here is refused whole
//! before anything is proposed (`not_leader` with `error.leaders`). An
//! idempotent batch is checked and written once by the group too
//! (`replicated_append`).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use es_storage::{Offset, PartitionLog, ProducerStamp, Record};
use futures::future::join_all;

use crate::error::{ApiError, ErrorCode};
use crate::producers::idempotence::{Check, ProducerFields};
use crate::shard::message::{Op, Payload, Reply};
use crate::shard::placement;
use crate::shard::Shard;
use crate::topics::topic::TopicMeta;

use super::log_of;

/// One record as a client sends it.
pub struct Item {
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    /// `None`: the broker picks (key hash, or spread when keyless).
    pub partition: Option<u32>,
    /// `None`: the broker's clock.
    pub timestamp_ms: Option<i64>,
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Appends `items` to `meta`'s topic; returns (partition, offset) per item,
/// in input order. If a partition fails, the error is returned (batches for
/// other partitions of the same request may have been written). `charge`
/// is told the stored bytes of the batches the records become (its key's
/// produce quota), once they are grouped and before any is appended.
pub async fn produce(
    shard: &Rc<Shard>,
    meta: &TopicMeta,
    items: Vec<Item>,
    producer: Option<ProducerFields>,
    charge: &mut dyn FnMut(u64),
) -> Result<Vec<(u32, u64)>, ApiError> {
    if items.is_empty() {
        return Err(ApiError::invalid("records must hold at least one record"));
    }
    let now = now_ms();
    // Keyless records of one request go to one partition, rotating per request.
    let spread = (shard.spread.get() % meta.partitions as u64) as u32;
    shard.spread.set(shard.spread.get().wrapping_add(1));
    let total = items.len();
    let mut by_partition: BTreeMap<u32, (Vec<usize>, Vec<Record>)> = BTreeMap::new();
    let mut spread_used = false;
    for (i, item) in items.into_iter().enumerate() {
        if item.key.is_none() && meta.config.is_compacted() {
            return Err(ApiError::invalid(format!(
                "records[{i}] has no key: topic {:?} is compacted (it keeps the latest record per key), so every record needs one",
                meta.name
            )));
        }
        let partition = match (item.partition, &item.key) {
            (Some(p), _) if p >= meta.partitions => {
                return Err(ApiError::partition_not_found(
                    &meta.name,
                    p as u64,
                    meta.partitions,
                ))
            }
            (Some(p), _) => p,
            (None, Some(k)) => placement::partition_for_key(k, meta.partitions),
            (None, None) => {
                spread_used = true;
                spread
            }
        };
        let group = by_partition.entry(partition).or_default();
        group.0.push(i);
        group.1.push(Record {
            key: item.key,
            value: item.value,
            timestamp_ms: item.timestamp_ms.unwrap_or(now),
        });
    }
    if producer.is_some() && spread_used {
        return Err(ApiError::invalid(
            "an idempotent produce must give each record a partition or a key: a retry must reach the same partition",
        ));
    }
    if producer.is_some() && by_partition.len() > 1 {
        return Err(ApiError::invalid(format!(
            "an idempotent produce writes one partition (its sequence is that partition's); these records go to partitions {:?}",
            by_partition.keys().collect::<Vec<_>>()
        )));
    }
    if shard.config.cluster.enabled() && by_partition.len() > 1 {
        let partitions: Vec<u32> = by_partition.keys().copied().collect();
        all_led_here(shard, &meta.name, &partitions).await?;
    }
    charge(
        by_partition
            .values()
            .map(|(_, records)| es_format::batch::encoded_len(records) as u64)
            .sum(),
    );
    let mut placed = Vec::with_capacity(by_partition.len());
    let mut calls = Vec::with_capacity(by_partition.len());
    for (p, (indexes, records)) in by_partition {
        placed.push((p, indexes));
        let op = Op::Produce {
            topic: meta.name.clone(),
            partition: p,
            payload: Payload::Records(records),
            producer,
        };
        calls.push(shard.call(shard.owner(&meta.name, p), op));
    }
    // One partition (the common case) needs no join.
    let replies = if calls.len() == 1 {
        vec![calls.pop().expect("one call").await]
    } else {
        join_all(calls).await
    };
    let mut offsets = vec![(0u32, 0u64); total];
    for ((p, indexes), reply) in placed.into_iter().zip(replies) {
        match reply {
            Reply::Produced(Ok(base)) => {
                for (k, i) in indexes.into_iter().enumerate() {
                    offsets[i] = (p, base + k as u64);
                }
            }
            Reply::Produced(Err(e)) | Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    Ok(offsets)
}

// On the shard that owns the partition.

/// Appends a batch to a partition this shard owns and answers its base
/// offset once it is durable (a retry of an idempotent batch: the
/// original base offset).
pub(super) async fn append(
    shard: &Rc<Shard>,
    topic: &str,
    partition: u32,
    payload: Payload,
    producer: Option<ProducerFields>,
) -> Result<u64, ApiError> {
    if shard.is_shutting_down() {
        return Err(ApiError::unavailable("broker is shutting down"));
    }
    if shard.config.cluster.enabled() {
        return replicated_append(shard, topic, partition, payload, producer).await;
    }
    let log = log_of(shard, topic, partition)?;
    let started = Instant::now();
    let count = payload.count();
    let appended = match producer {
        None => {
            let active = log.active_base();
            let appended = match payload {
                Payload::Records(records) => log.append_placed(&records, ProducerStamp::NONE),
                Payload::Batch(batch, early) => log.append_batch_placed(batch, early),
            }
            .map_err(ApiError::storage)?;
            snapshot_if_rolled(shard, &log, topic, partition, active);
            log.wait_durable(appended.next_offset)
                .await
                .map_err(ApiError::storage)?;
            appended
        }
        Some(f) => match idempotent_append(shard, &log, topic, partition, payload, f).await? {
            Ok(appended) => appended,
            Err(duplicate_base) => return Ok(duplicate_base),
        },
    };
    shard.hot.append_duration.record(started.elapsed().as_secs_f64());
    shard.hot.records_appended.increment(count);
    Ok(appended.base_offset.0)
}

/// Refuses, before anything is proposed, a produce to `partitions` of
/// `topic` that this node does not lead every one of: `not_leader` with
/// each partition's leader (`error.leaders`).
async fn all_led_here(shard: &Rc<Shard>, topic: &str, partitions: &[u32]) -> Result<(), ApiError> {
    let me = shard.config.node_id;
    let calls = partitions.iter().map(|&p| {
        shard.call(
            shard.owner(topic, p),
            Op::Leader {
                topic: topic.to_string(),
                partition: p,
            },
        )
    });
    let replies = join_all(calls).await;
    let assignment = shard.catalog.assignment();
    let mut leaders = BTreeMap::new();
    let mut all_here = true;
    for (&p, reply) in partitions.iter().zip(replies) {
        let leader = match reply {
            Reply::Json(Ok(v)) => match (v["hosted"].as_bool(), v["leader"].as_u64()) {
                (Some(true), l) => l,
                // No replica here: its preferred leader.
                _ => assignment
                    .replicas(topic, p)
                    .and_then(|r| r.replicas.first().copied()),
            },
            Reply::Json(Err(e)) | Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        };
        all_here &= leader == Some(me);
        leaders.insert(p, leader.and_then(|id| assignment.node(id)));
    }
    if all_here {
        return Ok(());
    }
    Err(ApiError::not_leader_of(leaders))
}

/// `Op::Leader`, on the partition's shard: whether this node holds a
/// replica, and the leader that replica knows (itself when it leads).
pub(super) fn leader_here(shard: &Shard, topic: &str, partition: u32) -> serde_json::Value {
    match shard.partitions.borrow().replica(topic, partition) {
        Some(r) if r.is_leader() => serde_json::json!({"hosted": true, "leader": r.node_id()}),
        Some(r) => serde_json::json!({"hosted": true, "leader": r.leader()}),
        None => serde_json::json!({"hosted": false, "leader": null}),
    }
}

/// Cluster mode: appends through the replica's Raft group; answers the
/// base offset once the batch is committed on a majority and applied
/// here (the spec's §2.4 for the failures).
///
/// An idempotent batch carries its producer stamp in its header into
/// `PartitionRaft::produce`: the id and epoch are checked here first,
/// against the controller's registry (producers/cluster.rs), and the
/// sequence by the partition's group against its replicated window, so a
/// retry is answered with the first write's base offset, on whichever
/// replica leads by then, and written once.
async fn replicated_append(
    shard: &Rc<Shard>,
    topic: &str,
    partition: u32,
    payload: Payload,
    producer: Option<ProducerFields>,
) -> Result<u64, ApiError> {
    let (_log, raft) = super::replica_of(shard, topic, partition)?;
    let stamp = match producer {
        None => ProducerStamp::NONE,
        Some(f) => {
            if f.producer_id < 0 || f.epoch < 0 || f.sequence < 0 {
                return Err(ApiError::invalid(
                    "producer_id, epoch and sequence must be non-negative",
                ));
            }
            crate::producers::cluster::check(shard, f).await?;
            ProducerStamp {
                producer_id: f.producer_id,
                epoch: f.epoch,
                base_sequence: f.sequence,
            }
        }
    };
    let started = Instant::now();
    let count = payload.count();
    let batch = match payload {
        Payload::Records(records) => {
            let mut out = Vec::new();
            es_storage::batch::encode(Offset(0), &records, stamp, &mut out);
            es_storage::BatchBuf::from(out)
        }
        // The producer built it: an idempotent one carries the same stamp
        // in its header. An early write never starts in cluster mode
        // (listen/binary/early.rs).
        Payload::Batch(batch, _) => batch,
    };
    let base = raft.produce(batch).await.map_err(|e| match e {
        es_raft::ProduceError::NotLeader { leader } => super::not_leader(shard, leader),
        es_raft::ProduceError::LeaderNotAvailable(why) => ApiError::leader_not_available(format!(
            "{topic}/{partition}: {why}; nothing was written: retry after a backoff"
        )),
        es_raft::ProduceError::OutcomeUnknown(why) => ApiError::outcome_unknown(format!(
            "{topic}/{partition}: the records were proposed but whether they are committed is unknown ({why})"
        )),
        es_raft::ProduceError::Invalid(why) => ApiError::invalid(why),
        es_raft::ProduceError::Refused(r) => crate::topics::controller::refused(r),
    })?;
    shard.hot.append_duration.record(started.elapsed().as_secs_f64());
    shard.hot.records_appended.increment(count);
    Ok(base)
}

/// Appends a producer's batch once: a retry of a batch in the window gets
/// its original base offset (`Ok(Err(base))`) once that batch is durable;
/// a new batch is placed and recorded before anything else runs on the
/// shard, so pipelined batches of one producer see each other.
async fn idempotent_append(
    shard: &Rc<Shard>,
    log: &PartitionLog,
    topic: &str,
    partition: u32,
    payload: Payload,
    f: ProducerFields,
) -> Result<Result<es_storage::Appended, u64>, ApiError> {
    let count = payload.count() as u32;
    if f.producer_id < 0 || f.epoch < 0 || f.sequence < 0 {
        return Err(ApiError::invalid(
            "producer_id, epoch and sequence must be non-negative",
        ));
    }
    // Every shard learns each issued id and epoch before POST /v1/producers
    // answers, so an id or epoch the registry never issued is refused here,
    // as is an id that expired. Until every shard has opened its
    // partitions, this shard may not have heard of an id that wrote
    // elsewhere: not refused for good, asked again.
    let known = shard.producers.known.borrow().check(f.producer_id, f.epoch);
    if let Err(e) = known {
        let opened = shard
            .state
            .ready_shards
            .load(std::sync::atomic::Ordering::Acquire);
        if e.code == ErrorCode::UnknownProducerId && opened < shard.shards {
            return Err(ApiError::unavailable(
                "the broker is starting: producer state is still being loaded; retry",
            ));
        }
        return Err(e);
    }
    let key = (topic.to_string(), partition);
    let check = match shard.producers.partitions.borrow().get(&key) {
        Some(state) => state.table.check(f, count)?,
        // Open partitions have their producer state (both are inserted and
        // removed together, with no await between).
        None => {
            return Err(ApiError::unavailable(format!(
                "partition {topic}/{partition} is closing"
            )))
        }
    };
    let now_ms = crate::operate::clock::now_ms();
    match check {
        Check::Duplicate(base) => {
            metrics::counter!("es_produce_duplicates_total").increment(1);
            if let Some(state) = shard.producers.partitions.borrow_mut().get_mut(&key) {
                state.table.touch(f.producer_id, now_ms);
            }
            note_active(shard, f, now_ms);
            log.wait_durable(Offset(base + count as u64))
                .await
                .map_err(ApiError::storage)?;
            if log.rewinds() > 0 {
                confirm_duplicate(shard, log, &key, f, base).await?;
            }
            Ok(Err(base))
        }
        Check::Append => {
            let stamp = ProducerStamp {
                producer_id: f.producer_id,
                epoch: f.epoch,
                base_sequence: f.sequence,
            };
            let active = log.active_base();
            let appended = match payload {
                Payload::Records(records) => log.append_placed(&records, stamp),
                // The batch carries the same stamp in its header.
                Payload::Batch(batch, early) => log.append_batch_placed(batch, early),
            }
            .map_err(ApiError::storage)?;
            // Placed and recorded with no await between: the table always
            // holds exactly the batches placed (producers/snapshot.rs).
            if let Some(state) = shard.producers.partitions.borrow_mut().get_mut(&key) {
                state.table.record(f, count, appended.base_offset.0, now_ms);
            }
            note_active(shard, f, now_ms);
            snapshot_if_rolled(shard, log, topic, partition, active);
            if let Err(e) = log.wait_durable(appended.next_offset).await {
                if let Some(state) = shard.producers.partitions.borrow_mut().get_mut(&key) {
                    state.table.forget(f, appended.base_offset.0);
                }
                return Err(ApiError::storage(e));
            }
            Ok(Ok(appended))
        }
    }
}

/// A retry found its batch recorded at `base`, now durable; but the log
/// went back at least once (a write found no room: `PartitionLog::rewinds`),
/// and the write recorded there may be one that was refused, whose offsets
/// went to other batches before its appender forgot it. So a batch holding
/// offset `base` must be this producer's: if another one is, the record is
/// forgotten and the retry answered `unavailable`, so that the next one
/// writes it. (None at all: compaction removed it whole, it was ours.)
async fn confirm_duplicate(
    shard: &Shard,
    log: &PartitionLog,
    key: &(String, u32),
    f: ProducerFields,
    base: u64,
) -> Result<(), ApiError> {
    let batches = log
        .read_batches(Offset(base), 1, log.durable_offset())
        .await
        .map_err(ApiError::storage)?;
    let taken = batches.first().is_some_and(|b| {
        let h = &b.header;
        let holds = h.base_offset.0 <= base && base < h.next_offset().0;
        let ours = h.base_offset == Offset(base)
            && h.producer.producer_id == f.producer_id
            && h.producer.epoch == f.epoch
            && h.producer.base_sequence == f.sequence;
        holds && !ours
    });
    if !taken {
        return Ok(());
    }
    if let Some(t) = shard.producers.partitions.borrow_mut().get_mut(key) {
        t.table.forget(f, base);
    }
    Err(ApiError::unavailable(format!(
        "producer {} sequence {}: its earlier write was refused (no room on the disk, or no file descriptor) and not kept; retry",
        f.producer_id, f.sequence
    )))
}

/// The producer of `f` wrote here at `now_ms`; the other shards learn of
/// it when it is new here (producers/known.rs).
fn note_active(shard: &Rc<Shard>, f: ProducerFields, now_ms: i64) {
    let new = shard
        .producers
        .known
        .borrow_mut()
        .note(f.producer_id, f.epoch, now_ms);
    if new {
        crate::producers::expiry::tell_others(shard, vec![(f.producer_id, f.epoch, now_ms)]);
    }
}

/// After a batch was placed (and recorded) with no await since
/// `active_before` was read: if it started a new segment, snapshots the
/// partition's producer state, so that a restart after a crash scans only
/// the batches since.
fn snapshot_if_rolled(shard: &Shard, log: &PartitionLog, topic: &str, partition: u32, active_before: Offset) {
    if log.active_base() == active_before {
        return;
    }
    if let Some(state) = shard
        .producers
        .partitions
        .borrow()
        .get(&(topic.to_string(), partition))
    {
        state.snapshots.take(&state.table, log, "roll");
    }
}
