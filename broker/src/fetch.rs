//! Fetch, independent of the transport: the bounds on what a client may
//! ask, and the call to the partition's owning shard.

use std::rc::Rc;

use crate::error::ApiError;
use crate::message::{FetchArgs, FetchForm, Fetched, Op, Reply};
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

/// Checks a fetch against the limits and runs it on the owning shard.
pub async fn fetch(
    shard: &Rc<Shard>,
    meta: &TopicMeta,
    partition: u64,
    q: FetchQuery,
) -> Result<Fetched, ApiError> {
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
    let partition = partition as u32;
    let args = FetchArgs {
        topic: meta.name.clone(),
        partition,
        offset: q.offset,
        max_records: max_records as usize,
        max_bytes: max_bytes.min(shard.config.fetch_bytes_max as u64) as usize,
        wait_ms,
        form: q.form,
    };
    match shard
        .call(shard.owner(&meta.name, partition), Op::Fetch(args))
        .await
    {
        Reply::Fetched(Ok(f)) => Ok(f),
        Reply::Fetched(Err(e)) | Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}
