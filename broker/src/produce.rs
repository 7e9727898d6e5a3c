//! Produce, independent of the transport: pick each record's partition
//! (explicit, key hash, or spread), group records by partition, append each
//! group as one batch on its owning shard in parallel, and answer offsets in
//! input order once every batch is fsynced.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use es_storage::Record;
use futures::future::join_all;

use crate::error::ApiError;
use crate::idempotence::ProducerFields;
use crate::message::{Op, Payload, Reply};
use crate::placement;
use crate::shard::Shard;
use crate::topic::TopicMeta;

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
/// other partitions of the same request may have been written).
pub async fn produce(
    shard: &Rc<Shard>,
    meta: &TopicMeta,
    items: Vec<Item>,
    producer: Option<ProducerFields>,
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
