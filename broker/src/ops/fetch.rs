//! Fetch, independent of the transport: the bounds on what a client may
//! ask, the charge of its answer, and the call to the partition's owning
//! shard. Then, on the owning shard, the read itself (`read`, with its
//! long poll) and the offset for a timestamp.

use std::rc::Rc;
use std::time::Duration;

use es_storage::Offset;
use futures::FutureExt;

use crate::error::{ApiError, ErrorCode};
use crate::shard::budget::{Budget, Charge};
use crate::shard::message::{FetchArgs, FetchForm, Fetched, FetchedData, Op, Reply};
use crate::shard::Shard;
use crate::topics::topic::TopicMeta;

use super::log_of;
use crate::limits::{
    FETCH_BYTES_DEFAULT, FETCH_CHARGE_BYTES_MIN, FETCH_READS_MAX, FETCH_RECORDS_DEFAULT, FETCH_RECORDS_MAX,
    WAIT_MS_MAX,
};

/// What a client asked for, before checks; `None` means the default.
#[derive(Default)]
pub struct FetchQuery {
    pub offset: Option<u64>,
    pub max_records: Option<u64>,
    pub max_bytes: Option<u64>,
    pub wait_ms: Option<u64>,
    pub form: FetchForm,
}

/// Where a fetch's answer is charged: the connection's budget, where it
/// has one (binary: `--response-connection-bytes`), and always its shard's
/// (`--request-shard-bytes`); `listener` labels the waits.
pub struct Charger<'a> {
    pub connection: Option<&'a Rc<Budget>>,
    pub listener: &'static str,
}

/// Checks a fetch against the limits and runs it on the owning shard, its
/// answer charged (`charger`) before it is read; the answer and that
/// charge, which the caller holds until the answer is written (none when
/// a long-poll ended with nothing).
///
/// The charge is `max_bytes` (capped by `--fetch-bytes-max`, at least
/// `FETCH_CHARGE_BYTES_MIN`), and the read never takes more than what was
/// charged; a first batch larger than that is read once a charge of its
/// size is granted. A long-poll holds no charge while it waits: it reads
/// at once, and only when it found nothing at the high watermark does it
/// give its charge back, wait uncharged, and charge again to read what
/// arrived.
pub async fn fetch(
    shard: &Rc<Shard>,
    meta: &TopicMeta,
    partition: u64,
    q: FetchQuery,
    charger: &Charger<'_>,
) -> Result<(Fetched, Option<Charge>), ApiError> {
    let mut args = checked(shard, meta, partition, q)?;
    let wait_ms = std::mem::take(&mut args.wait_ms);
    let mut want = args.max_bytes.max(FETCH_CHARGE_BYTES_MIN);
    let mut waited = false;
    for _ in 0..FETCH_READS_MAX {
        let charge = charge(shard, charger, want).await;
        args.limit_bytes = want;
        let fetched = call(shard, &args).await?;
        if let Some(len) = fetched.first_batch_bytes {
            want = len;
            continue;
        }
        // At or past the high watermark (a follower, or a new leader, may
        // be behind what a client read elsewhere: §2.2's fourth row).
        let at_end = is_empty(&fetched) && fetched.start_offset >= fetched.high_watermark;
        if !at_end || wait_ms == 0 || waited {
            return Ok((fetched, Some(charge)));
        }
        drop(charge);
        let wait = FetchArgs {
            offset: Some(fetched.start_offset),
            wait_ms,
            wait_only: true,
            ..args.clone()
        };
        let waited_for = call(shard, &wait).await?;
        if waited_for.high_watermark <= fetched.start_offset {
            return Ok((waited_for, None));
        }
        waited = true;
        args.offset = Some(fetched.start_offset);
    }
    Err(ApiError::unavailable(format!(
        "partition {partition} of topic {:?} changed under each of {FETCH_READS_MAX} reads; fetch again",
        meta.name
    )))
}

/// `bytes` of the charger's budgets, in turn; a wait is counted
/// (`es_request_budget_waits_total{listener}`).
async fn charge(shard: &Shard, charger: &Charger<'_>, bytes: usize) -> Charge {
    let budget = &shard.request_budget;
    if let Some(c) = Charge::try_take(charger.connection, budget, bytes as u64) {
        return c;
    }
    metrics::counter!("es_request_budget_waits_total", "listener" => charger.listener).increment(1);
    Charge::take(charger.connection, budget, bytes as u64).await
}

fn is_empty(f: &Fetched) -> bool {
    match &f.data {
        FetchedData::Records(r) => r.is_empty(),
        FetchedData::Batches { count, .. } => *count == 0,
    }
}

/// Checks a fetch against the limits: the arguments for its shard.
fn checked(shard: &Shard, meta: &TopicMeta, partition: u64, q: FetchQuery) -> Result<FetchArgs, ApiError> {
    if partition >= meta.partitions as u64 {
        return Err(ApiError::partition_not_found(
            &meta.name,
            partition,
            meta.partitions,
        ));
    }
    let max_records = q.max_records.unwrap_or(FETCH_RECORDS_DEFAULT);
    if max_records == 0 || max_records > FETCH_RECORDS_MAX {
        return Err(ApiError::invalid(format!(
            "max_records must be in 1..={FETCH_RECORDS_MAX}"
        )));
    }
    let max_bytes = q.max_bytes.unwrap_or(FETCH_BYTES_DEFAULT);
    if max_bytes == 0 {
        return Err(ApiError::invalid("max_bytes must be positive"));
    }
    let wait_ms = q.wait_ms.unwrap_or(0);
    if wait_ms > WAIT_MS_MAX {
        return Err(ApiError::invalid(format!(
            "wait_ms must be at most {WAIT_MS_MAX}"
        )));
    }
    let max_bytes = max_bytes.min(shard.config.fetch_bytes_max as u64) as usize;
    Ok(FetchArgs {
        topic: meta.name.clone(),
        partition: partition as u32,
        offset: q.offset,
        max_records: max_records as usize,
        max_bytes,
        limit_bytes: max_bytes,
        wait_ms,
        form: q.form,
        wait_only: false,
    })
}

/// Runs `args` on the partition's shard.
async fn call(shard: &Rc<Shard>, args: &FetchArgs) -> Result<Fetched, ApiError> {
    match shard
        .call(shard.owner(&args.topic, args.partition), Op::Fetch(args.clone()))
        .await
    {
        Reply::Fetched(Ok(f)) => Ok(f),
        Reply::Fetched(Err(e)) | Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}

// On the shard that owns the partition.

/// The log a time lookup reads: standalone, the partition's; in cluster
/// mode, this node's replica's, read up to its high watermark (committed
/// entries only, as a fetch from it), or `not_leader` naming the leader
/// where this node holds none (`leader_not_available` while it opens).
fn lookup_log(shard: &Shard, topic: &str, partition: u32) -> Result<es_storage::PartitionLog, ApiError> {
    if shard.config.cluster.enabled() {
        Ok(super::replica_of(shard, topic, partition)?.0)
    } else {
        log_of(shard, topic, partition)
    }
}

/// The first offset at or after `timestamp_ms` of a partition this shard
/// owns (the high watermark when none is).
pub(super) async fn offset_for_time(
    shard: &Shard,
    topic: &str,
    partition: u32,
    timestamp_ms: i64,
) -> Result<serde_json::Value, ApiError> {
    let log = lookup_log(shard, topic, partition)?;
    let hw = log.committed_offset();
    let found = log
        .record_for_timestamp(timestamp_ms, hw)
        .await
        .map_err(ApiError::storage)?;
    Ok(match found {
        Some((offset, timestamp)) => serde_json::json!({"offset": offset.0, "timestamp": timestamp}),
        None => serde_json::json!({"offset": hw.0, "timestamp": null}),
    })
}

/// The first record with the largest timestamp of a partition this shard
/// owns, among the records it serves (standalone: durable ones; in
/// cluster mode, this node's replica's committed ones: `lookup_log`):
/// `{"offset", "timestamp"}`, both null when it holds none. When that
/// timestamp's record is written but not yet durable (committed), waits
/// for it (`KAFKA_MAX_TIMESTAMP_ROUNDS` rounds at most, each up to
/// `WAIT_MS_MAX`; a replicated suffix cut meanwhile is looked at again),
/// then answers `unavailable`.
pub(super) async fn max_timestamp(
    shard: &Shard,
    topic: &str,
    partition: u32,
) -> Result<serde_json::Value, ApiError> {
    let log = lookup_log(shard, topic, partition)?;
    for _ in 0..crate::limits::KAFKA_MAX_TIMESTAMP_ROUNDS {
        // A standalone log's committed offset is its durable one.
        let hw = log.committed_offset();
        if let Some((offset, timestamp)) = log.max_timestamp_record(hw).await.map_err(ApiError::storage)? {
            return Ok(serde_json::json!({"offset": offset.0, "timestamp": timestamp}));
        }
        let end = log.next_offset();
        if end <= hw {
            return Ok(serde_json::json!({"offset": null, "timestamp": null}));
        }
        let durable = async {
            match log.wait_committed(end).await {
                Err(es_storage::StorageError::Truncated { .. }) => Ok(()),
                other => other,
            }
        }
        .fuse();
        let guard = glommio::timer::sleep(Duration::from_millis(WAIT_MS_MAX)).fuse();
        let stopping = shard.shutdown.wait_for(1).fuse();
        futures::pin_mut!(durable, guard, stopping);
        futures::select! {
            r = durable => r.map_err(ApiError::storage)?,
            _ = guard => break,
            _ = stopping => break,
        }
    }
    Err(ApiError::new(
        ErrorCode::Unavailable,
        format!("{topic}/{partition}: its newest timestamp's record is not durable yet"),
    ))
}

/// Reads what `args` asks of a partition this shard owns, waiting up to
/// its `wait_ms` for records past the high watermark: `committed_offset`
/// (a standalone log's durable offset; a replicated log's committed
/// mark, never past what is written).
///
/// In cluster mode any replica serves, up to the high watermark it knows
/// (committed entries only); an offset past its high watermark but within
/// what it has written waits (long-poll) and answers empty, as at the
/// high watermark; past what it has written, a leader answers
/// `offset_out_of_range` and a follower `not_leader` (it cannot judge);
/// a node without a replica `not_leader` (the spec's §2.2).
pub(super) async fn read(shard: &Shard, args: FetchArgs) -> Result<Fetched, ApiError> {
    let (log, replica) = if shard.config.cluster.enabled() {
        let (log, raft) = super::replica_of(shard, &args.topic, args.partition)?;
        (log, Some(raft))
    } else {
        (log_of(shard, &args.topic, args.partition)?, None)
    };
    let start = log.log_start_offset().0;
    let mut hw = log.committed_offset().0;
    let offset = args.offset.unwrap_or(start);
    let out_of_range = offset < start
        || match &replica {
            None => offset > hw,
            Some(raft) => {
                let end = log.next_offset().0.max(hw);
                if offset > end && !raft.is_leader() {
                    return Err(super::not_leader(shard, raft.leader()));
                }
                offset > end
            }
        };
    if out_of_range {
        return Err(ApiError::new(
            ErrorCode::OffsetOutOfRange,
            format!("offset {offset} is out of range: log start offset {start}, high watermark {hw}"),
        ));
    }
    if offset >= hw && args.wait_ms > 0 {
        let wait = Duration::from_millis(args.wait_ms.min(WAIT_MS_MAX));
        let arrived = log.wait_committed(Offset(offset + 1)).fuse();
        let timeout = glommio::timer::sleep(wait).fuse();
        let stopping = shard.shutdown.wait_for(1).fuse();
        futures::pin_mut!(arrived, timeout, stopping);
        futures::select! {
            _ = arrived => {},
            _ = timeout => {},
            _ = stopping => {},
        }
        hw = log.committed_offset().0;
    }
    if args.wait_only || (replica.is_some() && offset >= hw) {
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
            log_start_offset: start,
            first_batch_bytes: None,
        });
    }
    let out_of_range = |offset: u64, log_start: u64| {
        ApiError::new(
            ErrorCode::OffsetOutOfRange,
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
                log_start_offset: start,
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
        log_start_offset: start,
        first_batch_bytes,
    })
}
