//! Produce and fetch.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use futures::future::join_all;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;

use super::response::{self, Body};
use super::topics::lookup;
use crate::error::ApiError;
use crate::message::{FetchArgs, Op, Reply};
use crate::ops::WAIT_MS_MAX;
use crate::placement;
use crate::shard::Shard;
use es_storage::Record;

/// Default and largest `max_records` of a fetch.
pub const FETCH_RECORDS_DEFAULT: usize = 500;
pub const FETCH_RECORDS_MAX: usize = 10_000;
/// Default `max_bytes` of a fetch (capped by --fetch-bytes-max).
pub const FETCH_BYTES_DEFAULT: usize = 1 << 20;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Base64,
}

fn encoding(s: Option<&str>) -> Result<Encoding, ApiError> {
    match s {
        None | Some("utf8") => Ok(Encoding::Utf8),
        Some("base64") => Ok(Encoding::Base64),
        Some(other) => Err(ApiError::invalid(format!(
            "encoding must be \"utf8\" or \"base64\", not {other:?}"
        ))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProduceRequest {
    records: Vec<ProduceRecord>,
    encoding: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProduceRecord {
    key: Option<String>,
    value: String,
    partition: Option<i64>,
    timestamp: Option<i64>,
}

pub async fn produce(
    shard: &Rc<Shard>,
    topic: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let started = Instant::now();
    let meta = lookup(shard, topic)?;
    let body = response::read_body(req.into_body(), shard.config.http_body_bytes_max).await?;
    metrics::counter!("es_http_bytes_in_total").increment(body.len() as u64);
    let produce: ProduceRequest = response::parse(&body)?;
    let enc = encoding(produce.encoding.as_deref())?;
    if produce.records.is_empty() {
        return Err(ApiError::invalid("records must hold at least one record"));
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    // Keyless records of one request go to one partition, rotating per request.
    let spread = (shard.spread.get() % meta.partitions as u64) as u32;
    shard.spread.set(shard.spread.get().wrapping_add(1));
    let mut by_partition: BTreeMap<u32, Vec<(usize, Record)>> = BTreeMap::new();
    for (i, r) in produce.records.into_iter().enumerate() {
        let decode = |field: &str, s: String| -> Result<Vec<u8>, ApiError> {
            match enc {
                Encoding::Utf8 => Ok(s.into_bytes()),
                Encoding::Base64 => base64::engine::general_purpose::STANDARD
                    .decode(s.as_bytes())
                    .map_err(|e| ApiError::invalid(format!("records[{i}].{field} is not valid base64: {e}"))),
            }
        };
        let key = r.key.map(|k| decode("key", k)).transpose()?;
        let value = decode("value", r.value)?;
        let partition = match (r.partition, &key) {
            (Some(p), _) if p < 0 => {
                return Err(ApiError::invalid(format!(
                    "records[{i}].partition must be non-negative, not {p}"
                )))
            }
            (Some(p), _) if p >= meta.partitions as i64 => {
                return Err(ApiError::partition_not_found(topic, p as u64, meta.partitions))
            }
            (Some(p), _) => p as u32,
            (None, Some(k)) => placement::partition_for_key(k, meta.partitions),
            (None, None) => spread,
        };
        let record = Record {
            key,
            value,
            timestamp_ms: r.timestamp.unwrap_or(now_ms),
        };
        by_partition.entry(partition).or_default().push((i, record));
    }
    let total: usize = by_partition.values().map(Vec::len).sum();
    let mut placed: Vec<(u32, Vec<usize>)> = Vec::new();
    let calls = by_partition.into_iter().map(|(p, items)| {
        let (indexes, records): (Vec<usize>, Vec<Record>) = items.into_iter().unzip();
        placed.push((p, indexes));
        let op = Op::Produce {
            topic: topic.to_string(),
            partition: p,
            records,
        };
        shard.call(shard.owner(topic, p), op)
    });
    let replies = join_all(calls.collect::<Vec<_>>()).await;
    let mut offsets = vec![serde_json::Value::Null; total];
    let mut failure = None;
    for ((p, indexes), reply) in placed.into_iter().zip(replies) {
        match reply {
            Reply::Produced(Ok(base)) => {
                for (k, i) in indexes.into_iter().enumerate() {
                    offsets[i] = serde_json::json!({"partition": p, "offset": base + k as u64});
                }
            }
            Reply::Produced(Err(e)) | Reply::Done(Err(e)) => failure = Some(e),
            other => failure = Some(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    metrics::histogram!("es_produce_duration_seconds").record(started.elapsed().as_secs_f64());
    Ok(response::json(
        StatusCode::OK,
        &serde_json::json!({ "offsets": offsets }),
    ))
}

/// Parses one query parameter as a non-negative integer.
fn number(name: &str, value: &str) -> Result<u64, ApiError> {
    value
        .parse::<u64>()
        .map_err(|_| ApiError::invalid(format!("{name} must be a non-negative integer, not {value:?}")))
}

pub async fn fetch(
    shard: &Rc<Shard>,
    topic: &str,
    partition: &str,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let started = Instant::now();
    let meta = lookup(shard, topic)?;
    let partition = number("partition", partition)?;
    if partition >= meta.partitions as u64 {
        return Err(ApiError::partition_not_found(topic, partition, meta.partitions));
    }
    let partition = partition as u32;
    let mut args = FetchArgs {
        topic: topic.to_string(),
        partition,
        offset: None,
        max_records: FETCH_RECORDS_DEFAULT,
        max_bytes: FETCH_BYTES_DEFAULT.min(shard.config.fetch_bytes_max),
        wait_ms: 0,
    };
    let mut enc = Encoding::Utf8;
    for pair in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "offset" => args.offset = Some(number(k, v)?),
            "max_records" => {
                let n = number(k, v)?;
                if n == 0 || n > FETCH_RECORDS_MAX as u64 {
                    return Err(ApiError::invalid(format!(
                        "max_records must be in 1..={FETCH_RECORDS_MAX}"
                    )));
                }
                args.max_records = n as usize;
            }
            "max_bytes" => {
                let n = number(k, v)?;
                if n == 0 {
                    return Err(ApiError::invalid("max_bytes must be positive"));
                }
                args.max_bytes = (n.min(shard.config.fetch_bytes_max as u64)) as usize;
            }
            "wait_ms" => {
                let n = number(k, v)?;
                if n > WAIT_MS_MAX {
                    return Err(ApiError::invalid(format!(
                        "wait_ms must be at most {WAIT_MS_MAX}"
                    )));
                }
                args.wait_ms = n;
            }
            "encoding" => enc = encoding(Some(v))?,
            other => return Err(ApiError::invalid(format!("unknown query parameter {other:?}"))),
        }
    }
    let fetched = match shard.call(shard.owner(topic, partition), Op::Fetch(args)).await {
        Reply::Fetched(Ok(f)) => f,
        Reply::Fetched(Err(e)) | Reply::Done(Err(e)) => return Err(e),
        other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    };
    let text = |what: &str, offset: u64, bytes: Vec<u8>| -> Result<String, ApiError> {
        match enc {
            Encoding::Base64 => Ok(base64::engine::general_purpose::STANDARD.encode(bytes)),
            Encoding::Utf8 => String::from_utf8(bytes).map_err(|_| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "not_utf8",
                    format!("the {what} of the record at offset {offset} is not UTF-8: fetch with encoding=base64"),
                )
            }),
        }
    };
    let mut records = Vec::with_capacity(fetched.records.len());
    for r in fetched.records {
        let key = r.key.map(|k| text("key", r.offset.0, k)).transpose()?;
        records.push(serde_json::json!({
            "offset": r.offset.0,
            "timestamp": r.timestamp_ms,
            "key": key,
            "value": text("value", r.offset.0, r.value)?,
        }));
    }
    let body = serde_json::json!({
        "records": records,
        "next_offset": fetched.next_offset,
        "high_watermark": fetched.high_watermark,
    });
    metrics::histogram!("es_fetch_duration_seconds").record(started.elapsed().as_secs_f64());
    Ok(response::json(StatusCode::OK, &body))
}
