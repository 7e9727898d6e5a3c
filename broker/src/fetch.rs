//! Fetch, independent of the transport: the bounds on what a client may
//! ask, the charge of its answer, and the call to the partition's owning
//! shard.

use std::rc::Rc;

use crate::budget::{Budget, Charge};
use crate::error::ApiError;
use crate::message::{FetchArgs, FetchForm, Fetched, FetchedData, Op, Reply};
use crate::ops::WAIT_MS_MAX;
use crate::shard::Shard;
use crate::topic::TopicMeta;

/// Default and largest `max_records` of a fetch.
pub const FETCH_RECORDS_DEFAULT: u64 = 500;
pub const FETCH_RECORDS_MAX: u64 = 10_000;
/// Default `max_bytes` of a fetch (capped by --fetch-bytes-max).
pub const FETCH_BYTES_DEFAULT: u64 = 1 << 20;

/// What a client asked for, before checks; `None` means the default.
#[derive(Default)]
pub struct FetchQuery {
    pub offset: Option<u64>,
    pub max_records: Option<u64>,
    pub max_bytes: Option<u64>,
    pub wait_ms: Option<u64>,
    pub form: FetchForm,
}

/// A fetch's answer is charged at least this much before it is read:
/// storage reads at least one chunk of this size for a fetch, whatever its
/// `max_bytes` (es-storage's `segment::read_batches_limited`), and an
/// answer's buffers are slices of those reads.
pub const FETCH_CHARGE_BYTES_MIN: usize = 64 << 10;
/// A fetch whose first batch keeps being larger than what was charged for
/// it (the partition changes under it each time) gives up after this many
/// reads.
const FETCH_READS_MAX: usize = 4;

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
        let at_end = is_empty(&fetched) && fetched.start_offset == fetched.high_watermark;
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
