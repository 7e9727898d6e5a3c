//! Produce and fetch.

use std::rc::Rc;
use std::time::Instant;

use base64::Engine;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;

use super::response::{self, Body};
use super::server::Conn;
use crate::auth::grants::{Operation, Resource};
use crate::auth::quota::Direction;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::ops::fetch::{Charger, FetchQuery};
use crate::ops::produce::Item;
use crate::producers::idempotence::ProducerFields;
use crate::shard::message::FetchedData;
use crate::shard::Shard;
use crate::topics::admin::lookup_synced;

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
    producer_id: Option<i64>,
    epoch: Option<i16>,
    sequence: Option<i32>,
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
    p: &Principal,
    topic: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    crate::listen::listener::test_panic_hook(topic);
    let started = Instant::now();
    p.require(Operation::Write, Resource::Topic, topic)?;
    let meta = lookup_synced(shard, topic).await?;
    let body = response::read_body(shard, req.into_body()).await?;
    metrics::counter!("es_http_bytes_in_total").increment(body.len() as u64);
    let produce: ProduceRequest = response::parse(&body)?;
    let enc = encoding(produce.encoding.as_deref())?;
    let mut items = Vec::with_capacity(produce.records.len());
    for (i, r) in produce.records.into_iter().enumerate() {
        let decode = |field: &str, s: String| -> Result<Vec<u8>, ApiError> {
            match enc {
                Encoding::Utf8 => Ok(s.into_bytes()),
                Encoding::Base64 => base64::engine::general_purpose::STANDARD
                    .decode(s.as_bytes())
                    .map_err(|e| ApiError::invalid(format!("records[{i}].{field} is not valid base64: {e}"))),
            }
        };
        let partition = match r.partition {
            Some(p) if p < 0 => {
                return Err(ApiError::invalid(format!(
                    "records[{i}].partition must be non-negative, not {p}"
                )))
            }
            Some(p) if p >= meta.partitions as i64 => {
                return Err(ApiError::partition_not_found(topic, p as u64, meta.partitions))
            }
            Some(p) => Some(p as u32),
            None => None,
        };
        items.push(Item {
            key: r.key.map(|k| decode("key", k)).transpose()?,
            value: decode("value", r.value)?,
            partition,
            timestamp_ms: r.timestamp,
        });
    }
    let producer = match (produce.producer_id, produce.epoch, produce.sequence) {
        (None, None, None) => None,
        (Some(producer_id), Some(epoch), Some(sequence)) => Some(ProducerFields {
            producer_id,
            epoch,
            sequence,
        }),
        _ => {
            return Err(ApiError::invalid(
                "an idempotent produce needs producer_id, epoch and sequence together",
            ))
        }
    };
    if let Some(f) = &producer {
        shard.producers.check_owner(f.producer_id, p)?;
    }
    let quotas = shard.config.quotas();
    let mut throttle = std::time::Duration::ZERO;
    let mut charge = |bytes| throttle = quotas.charge(p, Direction::Produce, bytes);
    let offsets = crate::ops::produce::produce(shard, &meta, items, producer, &mut charge).await?;
    let offsets: Vec<_> = offsets
        .into_iter()
        .map(|(p, o)| serde_json::json!({"partition": p, "offset": o}))
        .collect();
    metrics::histogram!("es_produce_duration_seconds").record(started.elapsed().as_secs_f64());
    let resp = response::json(StatusCode::OK, &serde_json::json!({ "offsets": offsets }));
    Ok(throttled(shard, resp, throttle).await)
}

/// `resp`, written after `throttle` (the key's quota: docs/security.md,
/// "Quotas") with `ES-Throttle-Ms`. hyper reads a connection's next
/// request only once this one is answered, so keep-alive reads pause
/// for as long.
async fn throttled(shard: &Shard, resp: Response<Body>, throttle: std::time::Duration) -> Response<Body> {
    if throttle.is_zero() {
        return resp;
    }
    crate::auth::quota::wait(shard, throttle).await;
    throttle_header(resp, throttle)
}

/// `resp` with `ES-Throttle-Ms` saying it was delayed by `throttle`, if
/// it was.
fn throttle_header(mut resp: Response<Body>, throttle: std::time::Duration) -> Response<Body> {
    if throttle.is_zero() {
        return resp;
    }
    let ms = throttle.as_millis().max(1).to_string();
    if let Ok(v) = hyper::header::HeaderValue::from_str(&ms) {
        resp.headers_mut().insert(THROTTLE_HEADER, v);
    }
    resp
}

/// The header that says a response was delayed by a quota, and by how
/// many milliseconds.
pub const THROTTLE_HEADER: &str = "es-throttle-ms";

/// Parses one query parameter as a non-negative integer.
fn number(name: &str, value: &str) -> Result<u64, ApiError> {
    value
        .parse::<u64>()
        .map_err(|_| ApiError::invalid(format!("{name} must be a non-negative integer, not {value:?}")))
}

/// A fetch answers with as many of the records read as fit its charge
/// (ops/fetch.rs: `max_bytes`, capped by `--fetch-bytes-max`, at least 64
/// KiB), at least one: JSON may be several times the records' bytes (escapes,
/// base64, the fields of each record), and a slow reader holds its body
/// until written. The body holds the charge, resized to its length, until
/// the connection has written it.
pub async fn fetch(
    shard: &Rc<Shard>,
    conn: &Conn,
    p: &Principal,
    topic: &str,
    partition: &str,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    crate::listen::listener::test_panic_hook(topic);
    let started = Instant::now();
    p.require(Operation::Read, Resource::Topic, topic)?;
    let meta = lookup_synced(shard, topic).await?;
    let partition = number("partition", partition)?;
    let mut q = FetchQuery::default();
    let mut enc = Encoding::Utf8;
    for pair in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "offset" => q.offset = Some(number(k, v)?),
            "max_records" => q.max_records = Some(number(k, v)?),
            "max_bytes" => q.max_bytes = Some(number(k, v)?),
            "wait_ms" => q.wait_ms = Some(number(k, v)?),
            "encoding" => enc = encoding(Some(v))?,
            other => return Err(ApiError::invalid(format!("unknown query parameter {other:?}"))),
        }
    }
    let charger = Charger {
        connection: None,
        listener: "http",
    };
    // A key in debt waits until it is paid, before anything is read.
    let quotas = shard.config.quotas();
    let waited = quotas.pay_debt(shard, p, Direction::Fetch).await;
    let (fetched, charge) = crate::ops::fetch::fetch(shard, &meta, partition, q, &charger).await?;
    let text = |what: &str, offset: u64, bytes: Vec<u8>| -> Result<String, ApiError> {
        match enc {
            Encoding::Base64 => Ok(base64::engine::general_purpose::STANDARD.encode(bytes)),
            Encoding::Utf8 => String::from_utf8(bytes).map_err(|_| {
                ApiError::new(ErrorCode::NotUtf8,
                    format!("the {what} of the record at offset {offset} is not UTF-8: fetch with encoding=base64"),
                )
            }),
        }
    };
    let FetchedData::Records(got) = fetched.data else {
        return Err(ApiError::internal("a records fetch answered with batches"));
    };
    let fits = charge.as_ref().map_or(usize::MAX, |c| c.bytes() as usize);
    // The body, `{"high_watermark":..,"next_offset":..,"records":[..]}`
    // (serde_json's key order), its records written one by one until the
    // next would not fit.
    let mut records = Vec::new();
    let (total, mut taken, mut last_taken) = (got.len(), 0, 0);
    // The stored bytes of the records answered: a batch header, then each
    // record's own.
    let mut stored = es_format::batch::HEADER_BYTES as u64;
    for r in got {
        let offset = r.offset.0;
        let record_stored = (es_format::batch::RECORD_OVERHEAD_BYTES
            + r.key.as_ref().map_or(0, Vec::len)
            + r.value.len()) as u64;
        let key = r.key.map(|k| text("key", offset, k)).transpose()?;
        let record = serde_json::json!({
            "offset": offset,
            "timestamp": r.timestamp_ms,
            "key": key,
            "value": text("value", offset, r.value)?,
        });
        let before = records.len();
        if before > 0 {
            records.push(b',');
        }
        serde_json::to_writer(&mut records, &record).expect("JSON values serialize");
        if taken > 0 && records.len() > fits {
            records.truncate(before);
            break;
        }
        taken += 1;
        last_taken = offset;
        stored += record_stored;
    }
    // Cut short: the next fetch starts after the last record sent.
    let next_offset = if taken == total {
        fetched.next_offset
    } else {
        last_taken + 1
    };
    let mut body = format!(
        "{{\"high_watermark\":{},\"next_offset\":{next_offset},\"records\":[",
        fetched.high_watermark
    )
    .into_bytes();
    body.reserve_exact(records.len() + 2);
    body.extend_from_slice(&records);
    body.extend_from_slice(b"]}");
    drop(records);
    if let Some(mut c) = charge {
        c.resize(body.len() as u64);
        conn.written.hold_until_written(body.len() as u64, c);
    }
    if taken > 0 {
        // Its throttle is paid by the key's next fetch, before it reads.
        quotas.charge(p, Direction::Fetch, stored);
    }
    metrics::histogram!("es_fetch_duration_seconds").record(started.elapsed().as_secs_f64());
    Ok(throttle_header(
        response::json_bytes(StatusCode::OK, body),
        waited,
    ))
}
