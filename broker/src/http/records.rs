//! Produce and fetch.

use std::rc::Rc;
use std::time::Instant;

use base64::Engine;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;

use super::response::{self, Body};
use crate::admin::lookup;
use crate::error::ApiError;
use crate::fetch::FetchQuery;
use crate::idempotence::ProducerFields;
use crate::message::FetchedData;
use crate::produce::Item;
use crate::shard::Shard;

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
    topic: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    crate::listener::test_panic_hook(topic);
    let started = Instant::now();
    let meta = lookup(shard, topic)?;
    let body = response::read_body(req.into_body(), shard.config.http_body_bytes_max).await?;
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
    let offsets = crate::produce::produce(shard, &meta, items, producer).await?;
    let offsets: Vec<_> = offsets
        .into_iter()
        .map(|(p, o)| serde_json::json!({"partition": p, "offset": o}))
        .collect();
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
    crate::listener::test_panic_hook(topic);
    let started = Instant::now();
    let meta = lookup(shard, topic)?;
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
    let fetched = crate::fetch::fetch(shard, &meta, partition, q).await?;
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
    let FetchedData::Records(got) = fetched.data else {
        return Err(ApiError::internal("a records fetch answered with batches"));
    };
    let mut records = Vec::with_capacity(got.len());
    for r in got {
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
