//! Kafka requests to es operations: the dispatch by API, ApiVersions and
//! Metadata here, the rest in a file per noun (produce, fetch, topics,
//! groups). Each answers a Kafka response with per-topic and
//! per-partition error codes from the broker's ErrorCode table (its
//! `kafka` column, error.rs); `throttle_time_ms` carries the quota's
//! delay.

use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Encodable;

use super::codec::{self, s, Body, Req};
use super::connection::{Answer, Conn};
use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::shard::Shard;

/// UNKNOWN_TOPIC_OR_PARTITION.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// TOPIC_AUTHORIZATION_FAILED.
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// GROUP_AUTHORIZATION_FAILED.
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
/// CLUSTER_AUTHORIZATION_FAILED.
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
/// INVALID_REQUEST.
pub const INVALID_REQUEST: i16 = 42;

/// The Kafka code of an error about a topic.
pub fn code(e: &ApiError) -> i16 {
    e.code.kafka()
}

/// The Kafka code of an error about a group: its authorization failures
/// are the group's.
pub fn group_code(e: &ApiError) -> i16 {
    match e.code {
        ErrorCode::Forbidden | ErrorCode::NotOwner => GROUP_AUTHORIZATION_FAILED,
        _ => e.code.kafka(),
    }
}

/// The Kafka code of an error about the cluster (producer ids).
pub fn cluster_code(e: &ApiError) -> i16 {
    match e.code {
        ErrorCode::Forbidden | ErrorCode::NotOwner => CLUSTER_AUTHORIZATION_FAILED,
        _ => e.code.kafka(),
    }
}

/// Frames `body` as the answer to `req`; a response that does not encode
/// (a bug) closes the connection.
pub fn answer<R: Encodable>(key: ApiKey, version: i16, cid: i32, body: &R) -> Answer {
    match codec::frame(key, version, cid, body) {
        Ok(bytes) => Answer::bytes(bytes),
        Err(e) => {
            tracing::error!(error = %e, "a Kafka response did not encode; closing the connection");
            Answer::closing(None)
        }
    }
}

/// Runs one request: its answer, and how long its key's quota delays it.
pub async fn handle(shard: &Rc<Shard>, conn: &Rc<Conn>, req: Req) -> (Answer, Duration) {
    let principal = conn.principal.borrow().clone();
    let (key, v, cid) = (req.key, req.version, req.correlation_id);
    let started = std::time::Instant::now();
    let out = match req.body {
        Body::ApiVersions(a) => {
            tracing::debug!(software = %a.client_software_name.as_str(), version = %a.client_software_version.as_str(), "a Kafka client");
            let body = ApiVersionsResponse::default().with_api_keys(codec::api_keys());
            (answer(key, v, cid, &body), Duration::ZERO)
        }
        Body::Metadata(m) => (
            answer(key, v, cid, &metadata(shard, &principal, m, v)),
            Duration::ZERO,
        ),
        Body::Produce(p) => Box::pin(super::produce::produce(shard, &principal, p, v, cid)).await,
        Body::Fetch(f) => Box::pin(super::fetch::fetch(shard, &principal, f, v, cid)).await,
        Body::ListOffsets(l) => {
            let body = Box::pin(super::fetch::list_offsets(shard, &principal, l)).await;
            (answer(key, v, cid, &body), Duration::ZERO)
        }
        Body::CreateTopics(c) => {
            let body = Box::pin(super::topics::create(shard, &principal, c, v)).await;
            (answer(key, v, cid, &body), Duration::ZERO)
        }
        Body::DeleteTopics(d) => {
            let body = Box::pin(super::topics::delete(shard, &principal, d)).await;
            (answer(key, v, cid, &body), Duration::ZERO)
        }
        Body::DescribeConfigs(d) => (
            answer(
                key,
                v,
                cid,
                &super::topics::describe_configs(shard, &principal, d),
            ),
            Duration::ZERO,
        ),
        Body::InitProducerId(i) => {
            let body = Box::pin(super::topics::init_producer_id(shard, &principal, i)).await;
            (answer(key, v, cid, &body), Duration::ZERO)
        }
        body => (
            Box::pin(super::groups::handle(
                shard,
                &principal,
                body,
                (key, v, cid),
                req.client_id,
            ))
            .await,
            Duration::ZERO,
        ),
    };
    metrics::counter!("es_kafka_requests_total", "api" => api_name(key)).increment(1);
    metrics::histogram!("es_kafka_request_duration_seconds", "api" => api_name(key))
        .record(started.elapsed().as_secs_f64());
    out
}

fn api_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Produce => "produce",
        ApiKey::Fetch => "fetch",
        ApiKey::ListOffsets => "list_offsets",
        ApiKey::Metadata => "metadata",
        ApiKey::OffsetCommit => "offset_commit",
        ApiKey::OffsetFetch => "offset_fetch",
        ApiKey::FindCoordinator => "find_coordinator",
        ApiKey::JoinGroup => "join_group",
        ApiKey::Heartbeat => "heartbeat",
        ApiKey::LeaveGroup => "leave_group",
        ApiKey::SyncGroup => "sync_group",
        ApiKey::DescribeGroups => "describe_groups",
        ApiKey::ListGroups => "list_groups",
        ApiKey::ApiVersions => "api_versions",
        ApiKey::CreateTopics => "create_topics",
        ApiKey::DeleteTopics => "delete_topics",
        ApiKey::InitProducerId => "init_producer_id",
        ApiKey::DescribeConfigs => "describe_configs",
        _ => "other",
    }
}

/// This broker as Metadata and FindCoordinator name it: node id, host,
/// port (the advertised address).
pub fn this_broker(shard: &Shard) -> (i32, String, i32) {
    let (host, port) = shard
        .config
        .kafka
        .advertised()
        .unwrap_or_else(|| ("127.0.0.1".into(), 9092));
    (shard.config.node_id as i32, host, port)
}

fn metadata(shard: &Shard, p: &Principal, req: MetadataRequest, version: i16) -> MetadataResponse {
    let (node, host, port) = this_broker(shard);
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(node))
        .with_host(s(host))
        .with_port(port);
    let catalog = shard.catalog.snapshot();
    let all = req.topics.as_ref().is_none_or(|t| version == 0 && t.is_empty());
    let names: Vec<String> = if all {
        catalog
            .values()
            .filter(|m| p.allows(Operation::Describe, Resource::Topic, &m.name))
            .map(|m| m.name.clone())
            .collect()
    } else {
        req.topics
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| t.name.map(|n| n.0.to_string()))
            .collect()
    };
    let topics = names
        .into_iter()
        .map(|name| {
            let t = MetadataResponseTopic::default()
                .with_name(Some(TopicName(s(name.as_str()))))
                .with_is_internal(name.starts_with('_'));
            if !p.allows(Operation::Describe, Resource::Topic, &name) {
                return t.with_error_code(TOPIC_AUTHORIZATION_FAILED);
            }
            let Some(meta) = catalog.get(&name) else {
                return t.with_error_code(UNKNOWN_TOPIC_OR_PARTITION);
            };
            let partitions = (0..meta.partitions as i32)
                .map(|i| {
                    MetadataResponsePartition::default()
                        .with_partition_index(i)
                        .with_leader_id(BrokerId(node))
                        .with_leader_epoch(0)
                        .with_replica_nodes(vec![BrokerId(node)])
                        .with_isr_nodes(vec![BrokerId(node)])
                })
                .collect();
            t.with_partitions(partitions)
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_cluster_id(Some(s(shard.config.kafka.cluster_id.as_str())))
        .with_controller_id(BrokerId(node))
        .with_topics(topics)
}
