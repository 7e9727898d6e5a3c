//! Operations a shard runs for the partitions it owns (whoever received the
//! client's request), and the dispatch of forwarded operations.

use std::rc::Rc;
use std::time::{Duration, Instant};

use es_storage::{Offset, PartitionLog, ProducerStamp};
use futures::{FutureExt, StreamExt};

use crate::controller;
use crate::error::ApiError;
use crate::idempotence::{Check, ProducerFields};
use crate::message::{FetchArgs, FetchForm, Fetched, FetchedData, Op, PartitionState, Payload, Reply};
use crate::producer_snapshot::{self, PartitionProducers};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topic::{self, TopicConfig, TopicMeta};

/// Longest long-poll a fetch may ask for.
pub const WAIT_MS_MAX: u64 = 30_000;

/// Runs one operation on this shard (whichever shard's listener received
/// its request). Panics inside are caught and turned into an internal
/// error, logged and counted (`es_request_panics_total{listener="operation"}`),
/// so a bug hit by one request never takes the shard down.
pub async fn handle(shard: Rc<Shard>, op: Op) -> Reply {
    let kind = op_kind(&op);
    match std::panic::AssertUnwindSafe(run(shard, op)).catch_unwind().await {
        Ok(reply) => reply,
        Err(panic) => {
            crate::listener::panicked("operation", kind, panic.as_ref());
            Reply::Done(Err(ApiError::internal(format!(
                "{kind} failed unexpectedly (a bug; the broker log says more)"
            ))))
        }
    }
}

fn op_kind(op: &Op) -> &'static str {
    match op {
        Op::Produce { .. } => "produce",
        Op::Fetch(_) => "fetch",
        Op::Open { .. } => "open",
        Op::Remove { .. } => "remove",
        Op::Configure { .. } => "configure",
        Op::Describe { .. } => "describe",
        Op::CreateTopic(_) => "create_topic",
        Op::DeleteTopic(_) => "delete_topic",
        Op::PatchTopic { .. } => "patch_topic",
        Op::InitProducer(_) => "init_producer",
        Op::Producers(_) => "producers",
        Op::Group { .. } => "group",
        Op::ListGroups => "list_groups",
        Op::OffsetForTime { .. } => "offset_for_time",
        Op::AdoptConnection { .. } => "adopt_connection",
        Op::Series => "series",
    }
}

/// Every arm with an await runs boxed: the future of `handle` stays small
/// (it is spawned, and embedded in `Shard::call`, per request), and each
/// request allocates only the state of its own operation.
async fn run(shard: Rc<Shard>, op: Op) -> Reply {
    match op {
        Op::Produce {
            topic,
            partition,
            payload,
            producer,
        } => Reply::Produced(Box::pin(produce(&shard, &topic, partition, payload, producer)).await),
        Op::Fetch(args) => Reply::Fetched(Box::pin(fetch(&shard, args)).await),
        Op::Open { meta, partitions } => Reply::Done(Box::pin(open(&shard, &meta, &partitions)).await),
        Op::Remove { topic, partitions } => Reply::Done(Box::pin(remove(&shard, &topic, &partitions)).await),
        Op::Configure {
            topic,
            config,
            partitions,
        } => Reply::Done(configure(&shard, &topic, &config, &partitions)),
        Op::Describe { topic, partitions } => Reply::Described(describe(&shard, &topic, &partitions)),
        Op::CreateTopic(meta) => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Topic(Box::pin(controller::create_topic(&shard, meta)).await)
        }
        Op::DeleteTopic(name) => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Done(Box::pin(controller::delete_topic(&shard, &name)).await)
        }
        Op::Group { group, op } => {
            debug_assert_eq!(shard.group_owner(&group), shard.id, "routed to its coordinator");
            Reply::Json(Box::pin(crate::coordinator::run(&shard, &group, op)).await)
        }
        Op::Series => Reply::Series(Box::new(crate::metrics_live::snapshot(&shard))),
        Op::ListGroups => Reply::Json(Ok(
            serde_json::json!({"groups": crate::coordinator::list(&shard)}),
        )),
        Op::OffsetForTime {
            topic,
            partition,
            timestamp_ms,
        } => Reply::Json(Box::pin(offset_for_time(&shard, &topic, partition, timestamp_ms)).await),
        Op::AdoptConnection { socket, unhandled } => {
            Reply::Done(crate::binary::adopt(&shard, socket, unhandled))
        }
        Op::Producers(op) => crate::producer_expiry::on_shard(&shard, op),
        Op::InitProducer(existing) => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Producer(Box::pin(controller::init_producer(&shard, existing)).await)
        }
        Op::PatchTopic { topic, changes } => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Topic(Box::pin(controller::patch_topic(&shard, &topic, &changes)).await)
        }
    }
}

/// The log of a partition this shard owns.
fn log_of(shard: &Shard, topic: &str, partition: u32) -> Result<PartitionLog, ApiError> {
    debug_assert_eq!(shard.owner(topic, partition), shard.id, "routed to its owner");
    if let Some(owned) = shard.partitions.borrow().get(topic, partition) {
        return Ok(owned.log.clone());
    }
    match shard.catalog.get(topic) {
        None => Err(ApiError::topic_not_found(topic)),
        Some(meta) if partition >= meta.partitions => Err(ApiError::partition_not_found(
            topic,
            partition as u64,
            meta.partitions,
        )),
        Some(_) => Err(ApiError::unavailable(format!(
            "partition {topic}/{partition} is not open yet"
        ))),
    }
}

async fn produce(
    shard: &Rc<Shard>,
    topic: &str,
    partition: u32,
    payload: Payload,
    producer: Option<ProducerFields>,
) -> Result<u64, ApiError> {
    if shard.is_shutting_down() {
        return Err(ApiError::unavailable("broker is shutting down"));
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
    let known = shard.known_producers.borrow().check(f.producer_id, f.epoch);
    if let Err(e) = known {
        let opened = shard
            .state
            .ready_shards
            .load(std::sync::atomic::Ordering::Acquire);
        if e.code == "unknown_producer_id" && opened < shard.shards {
            return Err(ApiError::unavailable(
                "the broker is starting: producer state is still being loaded; retry",
            ));
        }
        return Err(e);
    }
    let key = (topic.to_string(), partition);
    let check = match shard.producers.borrow().get(&key) {
        Some(state) => state.table.check(f, count)?,
        // Open partitions have their producer state (both are inserted and
        // removed together, with no await between).
        None => {
            return Err(ApiError::unavailable(format!(
                "partition {topic}/{partition} is closing"
            )))
        }
    };
    let now_ms = crate::clock::now_ms();
    match check {
        Check::Duplicate(base) => {
            metrics::counter!("es_produce_duplicates_total").increment(1);
            if let Some(state) = shard.producers.borrow_mut().get_mut(&key) {
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
            // holds exactly the batches placed (producer_snapshot.rs).
            if let Some(state) = shard.producers.borrow_mut().get_mut(&key) {
                state.table.record(f, count, appended.base_offset.0, now_ms);
            }
            note_active(shard, f, now_ms);
            snapshot_if_rolled(shard, log, topic, partition, active);
            if let Err(e) = log.wait_durable(appended.next_offset).await {
                if let Some(state) = shard.producers.borrow_mut().get_mut(&key) {
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
    if let Some(t) = shard.producers.borrow_mut().get_mut(key) {
        t.table.forget(f, base);
    }
    Err(ApiError::unavailable(format!(
        "producer {} sequence {}: its earlier write was refused (no room on the disk, or no file descriptor) and not kept; retry",
        f.producer_id, f.sequence
    )))
}

/// The producer of `f` wrote here at `now_ms`; the other shards learn of
/// it when it is new here (known_producers.rs).
fn note_active(shard: &Rc<Shard>, f: ProducerFields, now_ms: i64) {
    let new = shard
        .known_producers
        .borrow_mut()
        .note(f.producer_id, f.epoch, now_ms);
    if new {
        crate::producer_expiry::tell_others(shard, vec![(f.producer_id, f.epoch, now_ms)]);
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
    if let Some(state) = shard.producers.borrow().get(&(topic.to_string(), partition)) {
        state.snapshots.take(&state.table, log, "roll");
    }
}

async fn offset_for_time(
    shard: &Shard,
    topic: &str,
    partition: u32,
    timestamp_ms: i64,
) -> Result<serde_json::Value, ApiError> {
    let log = log_of(shard, topic, partition)?;
    let hw = log.durable_offset();
    let found = log
        .offset_for_timestamp(timestamp_ms, hw)
        .await
        .map_err(ApiError::storage)?;
    Ok(serde_json::json!({"offset": found.unwrap_or(hw).0}))
}

async fn fetch(shard: &Shard, args: FetchArgs) -> Result<Fetched, ApiError> {
    let log = log_of(shard, &args.topic, args.partition)?;
    let start = log.log_start_offset().0;
    let mut hw = log.durable_offset().0;
    let offset = args.offset.unwrap_or(start);
    if offset < start || offset > hw {
        return Err(ApiError::new(
            hyper::StatusCode::RANGE_NOT_SATISFIABLE,
            "offset_out_of_range",
            format!("offset {offset} is out of range: log start offset {start}, high watermark {hw}"),
        ));
    }
    if offset == hw && args.wait_ms > 0 {
        let wait = Duration::from_millis(args.wait_ms.min(WAIT_MS_MAX));
        let arrived = log.wait_durable(Offset(offset + 1)).fuse();
        let timeout = glommio::timer::sleep(wait).fuse();
        let stopping = shard.shutdown.wait_for(1).fuse();
        futures::pin_mut!(arrived, timeout, stopping);
        futures::select! {
            _ = arrived => {},
            _ = timeout => {},
            _ = stopping => {},
        }
        hw = log.durable_offset().0;
    }
    if args.wait_only {
        let data = match args.form {
            FetchForm::Batches => FetchedData::Batches {
                parts: Vec::new(),
                count: 0,
            },
            FetchForm::Records => FetchedData::Records(Vec::new()),
        };
        return Ok(Fetched {
            data,
            start_offset: offset,
            next_offset: offset,
            high_watermark: hw,
            first_batch_bytes: None,
        });
    }
    let out_of_range = |offset: u64, log_start: u64| {
        ApiError::new(
            hyper::StatusCode::RANGE_NOT_SATISFIABLE,
            "offset_out_of_range",
            format!("offset {offset} is out of range: log start offset {log_start}, high watermark {hw}"),
        )
    };
    if args.form == FetchForm::Batches {
        let mut parts = Vec::new();
        let read = log
            .read_batches_limited(
                Offset(offset),
                args.max_bytes,
                args.max_records,
                Offset(hw),
                args.limit_bytes,
                &mut parts,
            )
            .await;
        return match read {
            Ok(read) => Ok(Fetched {
                data: FetchedData::Batches {
                    parts,
                    count: read.batches,
                },
                start_offset: offset,
                next_offset: read.next_offset.0,
                high_watermark: hw,
                first_batch_bytes: read.first_batch_bytes,
            }),
            // Retention moved the start while this fetch waited or read.
            Err(es_storage::StorageError::OffsetOutOfRange { offset, log_start }) => {
                Err(out_of_range(offset, log_start))
            }
            Err(e) => Err(ApiError::storage(e)),
        };
    }
    let limited = log
        .read_records_limited(Offset(offset), args.max_bytes, Offset(hw), args.limit_bytes)
        .await;
    let (read, first_batch_bytes) = match limited {
        Ok(l) => (l.read, l.first_batch_bytes),
        Err(es_storage::StorageError::OffsetOutOfRange { offset, log_start }) => {
            return Err(out_of_range(offset, log_start))
        }
        Err(e) => return Err(ApiError::storage(e)),
    };
    let mut records = read.records;
    // Past the gaps a compacted log leaves, unless max_records cut it short.
    let next_offset = if records.len() > args.max_records {
        records.truncate(args.max_records);
        records.last().map_or(offset, |r| r.offset.0 + 1)
    } else {
        read.next_offset.0
    };
    Ok(Fetched {
        data: FetchedData::Records(records),
        start_offset: offset,
        next_offset,
        high_watermark: hw,
        first_batch_bytes,
    })
}

/// Partitions a shard opens, or closes, at once: their file operations
/// (io_uring, the blocking pool) overlap instead of adding up, so a start
/// or a stop with thousands of partitions takes a fraction of the time one
/// by one would (docs/benchmarks.md); each holds a few descriptors for a
/// moment (`nofile::RESERVE_PER_SHARD`).
pub const OPEN_PARALLEL: usize = 32;

/// Opens (creating) partitions of `meta` that this shard owns, up to
/// [`OPEN_PARALLEL`] at once. Every one is tried; the first error is
/// returned.
pub async fn open(shard: &Rc<Shard>, meta: &TopicMeta, partitions: &[u32]) -> Result<(), ApiError> {
    let opened: Vec<Result<(), ApiError>> = futures::stream::iter(partitions.iter().copied())
        .map(|p| open_partition(shard, meta, p))
        .buffer_unordered(OPEN_PARALLEL)
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
    let cold = Some(crate::cleanup::cold_tier(&shard.config, &meta.name, p));
    let (log, report) = PartitionLog::open_with(&dir, meta.config.log_config(), shard.batcher.clone(), cold)
        .await
        .map_err(ApiError::storage)?;
    if !report.scanned.is_empty() {
        tracing::info!(topic = %meta.name, partition = p, scanned = report.scanned.len(), "recovered partition");
    }
    metrics::counter!("es_recovery_segments_scanned_total").increment(report.scanned.len() as u64);
    let loaded = async {
        let (table, loaded) =
            producer_snapshot::load(shard.data_dir(), &meta.name, p, &log, crate::clock::now_ms()).await?;
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
        let mut known = shard.known_producers.borrow_mut();
        table
            .producers()
            .filter(|&(id, epoch, active_ms)| known.note(id, epoch, active_ms))
            .collect()
    };
    shard
        .producers
        .borrow_mut()
        .insert((meta.name.clone(), p), PartitionProducers { table, snapshots });
    if let Err(e) = crate::producer_expiry::tell_others_and_wait(shard, new).await {
        // Those shards refuse the ids (unknown_producer_id): their
        // producers ask for new ones; nothing is lost.
        tracing::warn!(topic = %meta.name, partition = p, error = %e, "other shards were not told of this partition's producer ids");
    }
    Ok(())
}

/// Closes partitions of `topic` and deletes their files. Every partition is
/// closed whatever fails on another: none of them is left open (an open
/// partition of a topic the catalog no longer holds would be a ghost that
/// a later create of the name collides with). The first error is returned.
async fn remove(shard: &Shard, topic: &str, partitions: &[u32]) -> Result<(), ApiError> {
    let mut first_error = None;
    for &p in partitions {
        let log = shard.partitions.borrow_mut().remove(topic, p);
        let producers = shard.producers.borrow_mut().remove(&(topic.to_string(), p));
        if let Some(producers) = producers {
            // No snapshot lands in the directory about to be deleted.
            producers.snapshots.close().await;
        }
        if let Some(log) = log {
            // A poisoned log cannot close cleanly; it is being deleted anyway.
            let _ = log.close().await;
        }
        let dir = topic::partition_dir(shard.data_dir(), topic, p);
        let discarded = crate::trash::discard(shard.data_dir(), &dir, shard.id).await;
        let cold = crate::cleanup::cold_store(&shard.config)
            .delete_partition(&crate::cleanup::cold_key(topic, p))
            .await
            .map_err(ApiError::storage);
        if let Err(e) = discarded.and(cold) {
            tracing::error!(%topic, partition = p, error = %e, "a removed partition's files were not all deleted");
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn configure(shard: &Shard, topic: &str, config: &TopicConfig, partitions: &[u32]) -> Result<(), ApiError> {
    for &p in partitions {
        let log = log_of(shard, topic, p)?;
        log.set_config(config.log_config()).map_err(ApiError::storage)?;
    }
    Ok(())
}

fn describe(shard: &Shard, topic: &str, partitions: &[u32]) -> Result<Vec<PartitionState>, ApiError> {
    partitions
        .iter()
        .map(|&p| {
            let log = log_of(shard, topic, p)?;
            Ok(PartitionState {
                partition: p,
                log_start_offset: log.log_start_offset().0,
                high_watermark: log.durable_offset().0,
                hot_start_offset: log.hot_start_offset().0,
                cold_start_offset: log.cold_start_offset().map(|o| o.0),
            })
        })
        .collect()
}

/// Closes every partition this shard owns, up to [`OPEN_PARALLEL`] at
/// once: final fsync and sealed index, so the next start scans nothing (a
/// partition not written since it was opened has both already, and costs
/// no fsync). Returns how many did not close cleanly (each logged).
pub async fn close_all(shard: &Shard) -> usize {
    let logs = shard.partitions.borrow_mut().drain();
    let closed: Vec<bool> = futures::stream::iter(logs)
        .map(|(topic, p, log)| close_partition(shard, topic, p, log))
        .buffer_unordered(OPEN_PARALLEL)
        .collect()
        .await;
    let unclean = closed.into_iter().filter(|clean| !clean).count();
    if shard.id == CONTROLLER_SHARD {
        // The exact next producer id, so the next start goes on one by one.
        let registry = shard.producer_registry.borrow_mut().take();
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
    let producers = shard.producers.borrow_mut().remove(&(topic.clone(), p));
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
