//! Produce: each partition's Kafka record batches become one es batch
//! (records.rs), appended on the partition's shard as the binary
//! ProduceBatch is (`Op::Produce` with a batch payload), idempotently when
//! the batch carries a producer id (es's producer ids and windows of 5,
//! Kafka's `max.in.flight` <= 5). Every partition is checked (grant,
//! topic, partition, records) before any is appended, and answered on
//! its own; one bad record refuses its partition's batch whole. The
//! answer waits for each batch to be fsynced; acks=0 gets none.
//!
//! In a cluster each partition's batch goes through its replica's Raft
//! group (ops/produce.rs `replicated_append`): answered once committed on
//! a majority, whatever `acks` says (1 and all alike; 0 still gets no
//! answer). A partition this node does not lead is refused on its own
//! with NOT_LEADER_OR_FOLLOWER (nothing proposed), a leaderless one with
//! LEADER_NOT_AVAILABLE, one whose outcome is unknown (proposed, then
//! leadership lost) with REQUEST_TIMED_OUT: clients refresh their
//! metadata and retry each, an idempotent producer with the same
//! sequence (written once).

use std::rc::Rc;
use std::time::Duration;

use futures::future::join_all;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;

use super::codec::s;
use super::connection::Answer;
use super::handler::{answer, partition_code, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION};
use super::records;
use crate::auth::grants::{Operation, Resource};
use crate::auth::quota::Direction;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::producers::idempotence::ProducerFields;
use crate::shard::message::{Op, Payload, Reply};
use crate::shard::Shard;
use crate::topics::admin;

/// One partition's outcome: error code, message, base offset.
type Outcome = (i16, Option<String>, i64);
/// A topic's partitions in request order, each with its outcome once known.
type TopicSlots = (TopicName, Vec<(i32, Option<Outcome>)>);

pub async fn produce(
    shard: &Rc<Shard>,
    p: &Principal,
    req: ProduceRequest,
    version: i16,
    cid: i32,
) -> (Answer, Duration) {
    if req.transactional_id.is_some() {
        // Transactional produce: every partition refused.
        let responses = req
            .topic_data
            .into_iter()
            .map(|t| {
                let parts = t
                    .partition_data
                    .iter()
                    .map(|pd| {
                        partition_response(
                            pd.index,
                            (
                                super::handler::INVALID_REQUEST,
                                Some("transactions are not supported".into()),
                                -1,
                            ),
                        )
                    })
                    .collect();
                TopicProduceResponse::default()
                    .with_name(t.name)
                    .with_partition_responses(parts)
            })
            .collect();
        let body = ProduceResponse::default().with_responses(responses);
        return (answer(ApiKey::Produce, version, cid, &body), Duration::ZERO);
    }
    let limit = shard.config.frame_bytes_max;
    let quotas = shard.config.quotas();
    let mut throttle = Duration::ZERO;
    // Checked and converted first; appended together after.
    let mut slots: Vec<TopicSlots> = Vec::new();
    let mut appends = Vec::new();
    for t in req.topic_data {
        let name = t.name.0.to_string();
        let mut parts = Vec::with_capacity(t.partition_data.len());
        for pd in t.partition_data {
            let index = pd.index;
            match prepare(shard, p, &name, pd, limit).await {
                Ok((owner, partition, converted)) => {
                    throttle =
                        throttle.max(quotas.charge(p, Direction::Produce, converted.batch.len() as u64));
                    let at = (slots.len(), parts.len());
                    parts.push((index, None));
                    appends.push((at, append(shard, name.clone(), owner, partition, converted)));
                }
                Err(outcome) => parts.push((index, Some(outcome))),
            }
        }
        slots.push((t.name, parts));
    }
    let (places, calls): (Vec<_>, Vec<_>) = appends.into_iter().unzip();
    for ((ti, pi), outcome) in places.into_iter().zip(join_all(calls).await) {
        slots[ti].1[pi].1 = Some(outcome);
    }
    if req.acks == 0 {
        return (Answer::none(), throttle);
    }
    let responses = slots
        .into_iter()
        .map(|(name, parts)| {
            let parts = parts
                .into_iter()
                .map(|(i, o)| partition_response(i, o.unwrap_or((-1, None, -1))))
                .collect();
            TopicProduceResponse::default()
                .with_name(name)
                .with_partition_responses(parts)
        })
        .collect();
    let body = ProduceResponse::default()
        .with_responses(responses)
        .with_throttle_time_ms(throttle.as_millis().min(i32::MAX as u128) as i32);
    (answer(ApiKey::Produce, version, cid, &body), throttle)
}

fn partition_response(index: i32, (error, message, base): Outcome) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error)
        .with_error_message(message.map(s))
        .with_base_offset(base)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

/// Checks one partition's produce and converts its records: where it
/// goes and the es batch, or its refusal.
async fn prepare(
    shard: &Rc<Shard>,
    p: &Principal,
    topic: &str,
    pd: produce_request::PartitionProduceData,
    limit: usize,
) -> Result<(usize, u32, records::Converted), Outcome> {
    let refuse = |e: ApiError| (partition_code(shard, &e), Some(e.message), -1);
    if !p.allows(Operation::Write, Resource::Topic, topic) {
        let e = p.require(Operation::Write, Resource::Topic, topic).unwrap_err();
        return Err((TOPIC_AUTHORIZATION_FAILED, Some(e.message), -1));
    }
    crate::listen::listener::test_panic_hook(topic);
    let meta = admin::lookup_synced(shard, topic).await.map_err(refuse)?;
    if pd.index < 0 || pd.index as u32 >= meta.partitions {
        return Err((
            UNKNOWN_TOPIC_OR_PARTITION,
            Some(format!("topic {topic:?} has partitions 0..{}", meta.partitions)),
            -1,
        ));
    }
    let partition = pd.index as u32;
    let bytes = pd.records.unwrap_or_default();
    let owner = shard.owner(topic, partition);
    let converted = records::to_es(
        &bytes,
        meta.config.is_compacted(),
        limit,
        in_page(shard, owner, topic, partition, bytes.len()),
    )
    .map_err(|r| (r.code, Some(r.message), -1))?;
    if let Some((id, ..)) = converted.producer {
        shard
            .producers
            .check_owner(id, p)
            .map_err(|e| (super::handler::cluster_code(&e), Some(e.message), -1))?;
    }
    Ok((owner, partition, converted))
}

/// Where in its page the partition's log is expected to end when a batch
/// of about `len` bytes is placed: the converted batch is built there, so
/// that it is written as it lies. Known only for a partition of this
/// shard, standalone; 0 otherwise (the batch is then copied once more, as
/// any batch placed elsewhere than expected; in a cluster the replica's
/// Raft log places it).
fn in_page(shard: &Shard, owner: usize, topic: &str, partition: u32, len: usize) -> usize {
    if owner != shard.id || shard.config.cluster.enabled() {
        return 0;
    }
    shard
        .partitions
        .borrow()
        .get(topic, partition)
        .map_or(0, |o| o.log.next_in_page_offset(len))
}

/// Appends one converted batch on its shard: its base offset once
/// durable, or the error.
async fn append(
    shard: &Rc<Shard>,
    topic: String,
    owner: usize,
    partition: u32,
    c: records::Converted,
) -> Outcome {
    let producer = c.producer.map(|(producer_id, epoch, sequence)| ProducerFields {
        producer_id,
        epoch,
        sequence,
    });
    let op = Op::Produce {
        topic,
        partition,
        payload: Payload::Batch(c.batch, None),
        producer,
    };
    match shard.call(owner, op).await {
        Reply::Produced(Ok(base)) => (0, None, base as i64),
        Reply::Produced(Err(e)) | Reply::Done(Err(e)) => (partition_code(shard, &e), Some(e.message), -1),
        other => (-1, Some(format!("unexpected reply {other:?}")), -1),
    }
}
