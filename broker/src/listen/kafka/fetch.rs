//! Fetch and ListOffsets. A Fetch reads each partition through
//! `ops::fetch` (the es fetch path: its bounds, its charge, reads of whole
//! checked batches), converts the stored batches to uncompressed v2
//! batches (records.rs), and long-polls: when nothing was found anywhere,
//! it waits up to `max_wait_ms` on every partition at once and answers as
//! soon as one has records. No fetch sessions (`session_id` 0: clients
//! send full fetches); no transactions (`last_stable_offset` is the high
//! watermark). ListOffsets answers the log start (-2), the high watermark
//! (-1), the first record with the largest timestamp (-3), or the first
//! record at or after a timestamp, with that record's timestamp.
//!
//! In a cluster a Fetch is served by any replica up to the high watermark
//! it knows (committed records only; Kafka clients fetch from the leader,
//! as `preferred_read_replica` is always -1); a node without a replica
//! answers NOT_LEADER_OR_FOLLOWER. ListOffsets is answered by the
//! partition's leader only (others: NOT_LEADER_OR_FOLLOWER, or
//! LEADER_NOT_AVAILABLE during an election).

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::*;

use super::connection::Answer;
use super::fetch_response::{self, PartitionOut, TopicOut};
use super::handler::{
    code, partition_code, INVALID_REQUEST, NOT_LEADER_OR_FOLLOWER, TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
};
use super::metadata::LEADER_NOT_AVAILABLE;
use crate::auth::grants::{Operation, Resource};
use crate::auth::quota::Direction;
use crate::auth::Principal;
use crate::limits::{FETCH_RECORDS_MAX, WAIT_MS_MAX};
use crate::ops::fetch::{Charger, FetchQuery};
use crate::shard::message::{FetchForm, FetchedData, Op, Reply};
use crate::shard::Shard;
use crate::topics::admin;

/// One partition's answer.
struct Part {
    error: i16,
    high_watermark: i64,
    log_start: i64,
    /// The stored batches read, and their bytes once in Kafka's form.
    batches: Vec<Bytes>,
    records_len: usize,
    compacted: bool,
    /// Its read's charge of the shard's budget, held until written.
    charge: Option<crate::shard::budget::Charge>,
}

impl Part {
    fn error(code: i16) -> Part {
        Part {
            error: code,
            high_watermark: -1,
            log_start: -1,
            batches: Vec::new(),
            records_len: 0,
            compacted: false,
            charge: None,
        }
    }
}

pub async fn fetch(
    shard: &Rc<Shard>,
    p: &Principal,
    req: FetchRequest,
    version: i16,
    cid: i32,
) -> (Answer, Duration) {
    let quotas = shard.config.quotas();
    let throttle = quotas.pay_debt(shard, p, Direction::Fetch).await;
    let max_bytes = (req.max_bytes.max(1) as usize).min(shard.config.fetch_bytes_max);
    // Every partition's read is charged at once: their share of
    // `max_bytes` (at least the smallest charge), so that one fetch of
    // many partitions never asks more of the shard's budget than it has.
    let count: usize = req.topics.iter().map(|t| t.partitions.len()).sum();
    let share = (max_bytes / count.max(1)).max(crate::limits::FETCH_CHARGE_BYTES_MIN);
    let wanted: Vec<(String, i32, i64, usize)> = req
        .topics
        .iter()
        .flat_map(|t| {
            let name = t.topic.0.to_string();
            t.partitions.iter().map(move |fp| {
                let bytes = (fp.partition_max_bytes.max(1) as usize).min(share);
                (name.clone(), fp.partition, fp.fetch_offset, bytes)
            })
        })
        .collect();
    let mut parts: Vec<Part> = join_all(
        wanted
            .iter()
            .map(|(t, pi, off, b)| read(shard, p, t, *pi, *off, *b, 0)),
    )
    .await;
    let empty = parts.iter().all(|x| x.error == 0 && x.records_len == 0);
    let wait_ms = (req.max_wait_ms.max(0) as u64).min(WAIT_MS_MAX);
    if empty && wait_ms > 0 && !parts.is_empty() {
        // Long-poll every partition at once; the first with records answers.
        let mut polls: FuturesUnordered<_> = wanted
            .iter()
            .enumerate()
            .map(|(i, (t, pi, off, b))| async move { (i, read(shard, p, t, *pi, *off, *b, wait_ms).await) })
            .collect();
        while let Some((i, part)) = polls.next().await {
            let found = part.records_len > 0 || part.error != 0;
            parts[i] = part;
            if found {
                break;
            }
        }
    }
    // Over `max_bytes` in all: later partitions' records wait for the next fetch.
    let mut total = 0usize;
    for part in parts.iter_mut() {
        if total > 0 && total + part.records_len > max_bytes {
            part.batches.clear();
            part.records_len = 0;
        }
        total += part.records_len;
    }
    if total > 0 {
        quotas.charge(p, Direction::Fetch, total as u64);
    }
    let mut topics: Vec<TopicOut> = Vec::new();
    let mut charges = Vec::new();
    for ((topic, partition, ..), mut part) in wanted.into_iter().zip(parts) {
        charges.extend(part.charge.take());
        let out = PartitionOut {
            index: partition,
            error: part.error,
            high_watermark: part.high_watermark,
            log_start: part.log_start,
            batches: part.batches,
            records_len: part.records_len,
            compacted: part.compacted,
        };
        match topics.last_mut() {
            Some(last) if last.name == topic => last.partitions.push(out),
            _ => topics.push(TopicOut {
                name: topic,
                partitions: vec![out],
            }),
        }
    }
    let throttle_ms = throttle.as_millis().min(i32::MAX as u128) as i32;
    let mut out = match fetch_response::encode(version, cid, throttle_ms, &topics) {
        Ok(bytes) => Answer::bytes(bytes),
        Err(e) => {
            tracing::error!(error = %e, "a Kafka fetch response did not encode; closing the connection");
            Answer::closing(None)
        }
    };
    out.charges = charges;
    (out, Duration::ZERO)
}

/// Reads one partition from `offset`, about `bytes` at most, waiting up to
/// `wait_ms` at the high watermark: the stored batches, measured in
/// Kafka's form (converted when the response is written).
async fn read(
    shard: &Rc<Shard>,
    p: &Principal,
    topic: &str,
    partition: i32,
    offset: i64,
    bytes: usize,
    wait_ms: u64,
) -> Part {
    if !p.allows(Operation::Read, Resource::Topic, topic) {
        return Part::error(TOPIC_AUTHORIZATION_FAILED);
    }
    let meta = match admin::lookup_synced(shard, topic).await {
        Ok(m) => m,
        Err(e) => return Part::error(code(&e)),
    };
    if partition < 0 || partition as u32 >= meta.partitions {
        return Part::error(UNKNOWN_TOPIC_OR_PARTITION);
    }
    if offset < 0 {
        return Part::error(crate::error::ErrorCode::OffsetOutOfRange.kafka());
    }
    let q = FetchQuery {
        offset: Some(offset as u64),
        max_records: Some(FETCH_RECORDS_MAX),
        max_bytes: Some(bytes as u64),
        wait_ms: Some(wait_ms),
        form: FetchForm::Batches,
    };
    let charger = Charger {
        connection: None,
        listener: "kafka",
    };
    let (fetched, charge) = match crate::ops::fetch::fetch(shard, &meta, partition as u64, q, &charger).await
    {
        Ok(f) => f,
        Err(e) => return Part::error(partition_code(shard, &e)),
    };
    let FetchedData::Batches { parts, .. } = fetched.data else {
        return Part::error(-1);
    };
    let compacted = meta.config.is_compacted();
    let mut records_len = 0;
    for b in &parts {
        match super::records::kafka_len(b, compacted) {
            Ok(n) => records_len += n,
            Err(e) => {
                tracing::error!(topic, partition, error = %e, "a stored batch did not convert to Kafka's format");
                return Part::error(-1);
            }
        }
    }
    Part {
        error: 0,
        high_watermark: fetched.high_watermark as i64,
        log_start: fetched.log_start_offset as i64,
        batches: parts,
        records_len,
        compacted,
        charge,
    }
}

/// A partition's log start offset and high watermark. In a cluster, on
/// its leader only: a follower or a node without a replica answers
/// NOT_LEADER_OR_FOLLOWER, a replica that knows no leader
/// LEADER_NOT_AVAILABLE (a follower's high watermark may lag the
/// leader's, and Kafka clients ask the leader).
async fn bounds(shard: &Rc<Shard>, topic: &str, partition: u32) -> Result<(i64, i64), i16> {
    let op = Op::Describe {
        topic: topic.to_string(),
        partitions: vec![partition],
    };
    let state = match shard.call(shard.owner(topic, partition), op).await {
        Reply::Described(Ok(states)) => states.into_iter().next(),
        Reply::Described(Err(e)) | Reply::Done(Err(e)) => return Err(partition_code(shard, &e)),
        _ => return Err(-1),
    };
    let Some(state) = state else {
        // In a cluster: no replica here.
        return Err(NOT_LEADER_OR_FOLLOWER);
    };
    if shard.config.cluster.enabled() {
        leads(shard.config.node_id, state.replica.as_ref())?;
    }
    Ok((state.log_start_offset as i64, state.high_watermark as i64))
}

/// In a cluster: whether this node's (`me`) replica, if any, leads its
/// partition, as a Kafka error when it does not.
fn leads(me: u64, replica: Option<&crate::shard::message::ReplicaState>) -> Result<(), i16> {
    match replica {
        Some(r) if r.leader == Some(me) => Ok(()),
        Some(r) if r.leader.is_none() => Err(LEADER_NOT_AVAILABLE),
        _ => Err(NOT_LEADER_OR_FOLLOWER),
    }
}

/// In a cluster: `Ok` when this node leads `partition`, else its Kafka
/// error (see [`bounds`]).
async fn leader_here(shard: &Rc<Shard>, topic: &str, partition: u32) -> Result<(), i16> {
    if !shard.config.cluster.enabled() {
        return Ok(());
    }
    bounds(shard, topic, partition).await.map(drop)
}

pub async fn list_offsets(shard: &Rc<Shard>, p: &Principal, req: ListOffsetsRequest) -> ListOffsetsResponse {
    let mut topics = Vec::new();
    for t in req.topics {
        let topic = t.name.0.to_string();
        let mut parts = Vec::new();
        for lp in t.partitions {
            let (error, offset, timestamp) =
                match offset_for(shard, p, &topic, lp.partition_index, lp.timestamp).await {
                    Ok((o, ts)) => (0, o, ts),
                    Err(c) => (c, -1, -1),
                };
            parts.push(
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(lp.partition_index)
                    .with_error_code(error)
                    .with_offset(offset)
                    .with_timestamp(timestamp),
            );
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// The offset and timestamp a ListOffsets timestamp asks for: -2 the log
/// start, -1 the high watermark (timestamp -1 for both, as Kafka answers),
/// -3 the first record with the largest timestamp (KIP-734), else the
/// first record at or after the timestamp; offset and timestamp -1 when
/// there is no such record.
async fn offset_for(
    shard: &Rc<Shard>,
    p: &Principal,
    topic: &str,
    partition: i32,
    ts: i64,
) -> Result<(i64, i64), i16> {
    if !p.allows(Operation::Describe, Resource::Topic, topic) {
        return Err(TOPIC_AUTHORIZATION_FAILED);
    }
    let meta = admin::lookup_synced(shard, topic).await.map_err(|e| code(&e))?;
    if partition < 0 || partition as u32 >= meta.partitions {
        return Err(UNKNOWN_TOPIC_OR_PARTITION);
    }
    let partition = partition as u32;
    let op = match ts {
        -2 | -1 => {
            let (start, hw) = bounds(shard, topic, partition).await?;
            return Ok((if ts == -2 { start } else { hw }, -1));
        }
        MAX_TIMESTAMP => Op::MaxTimestamp {
            topic: topic.to_string(),
            partition,
        },
        t if t < 0 => return Err(INVALID_REQUEST),
        t => Op::OffsetForTime {
            topic: topic.to_string(),
            partition,
            timestamp_ms: t,
        },
    };
    leader_here(shard, topic, partition).await?;
    match shard.call(shard.owner(topic, partition), op).await {
        Reply::Json(Ok(v)) => Ok(match v.get("timestamp").and_then(|t| t.as_i64()) {
            Some(found) => (v["offset"].as_i64().unwrap_or(-1), found),
            None => (-1, -1),
        }),
        Reply::Json(Err(e)) | Reply::Done(Err(e)) => Err(partition_code(shard, &e)),
        _ => Err(-1),
    }
}

/// ListOffsets' "max timestamp" (KIP-734, v7+).
const MAX_TIMESTAMP: i64 = -3;
