//! Kafka requests to es operations: the dispatch by API and ApiVersions
//! here, the rest in a file per noun (metadata, produce, fetch, topics,
//! groups). Each answers a Kafka response with per-topic and
//! per-partition error codes from the broker's ErrorCode table (its
//! `kafka` column, error.rs); `throttle_time_ms` carries the quota's
//! delay.

use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::Encodable;

use super::codec::{self, Body, Req};
use super::connection::{Answer, Conn};
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

/// NOT_LEADER_OR_FOLLOWER.
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// The Kafka code of an error about a topic.
pub fn code(e: &ApiError) -> i16 {
    e.code.kafka()
}

/// The Kafka code of an error about one partition: in a cluster, a
/// partition this node cannot serve now (`unavailable`: closing, shutting
/// down) is NOT_LEADER_OR_FOLLOWER, which clients answer by asking for
/// metadata again and retrying, where standalone it is
/// KAFKA_STORAGE_ERROR.
pub fn partition_code(shard: &Shard, e: &ApiError) -> i16 {
    if shard.config.cluster.enabled() && e.code == ErrorCode::Unavailable {
        return NOT_LEADER_OR_FOLLOWER;
    }
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
        Body::Metadata(m) => {
            let body = Box::pin(super::metadata::metadata(shard, &principal, m, v)).await;
            (answer(key, v, cid, &body), Duration::ZERO)
        }
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
        Body::DescribeConfigs(d) => {
            let body = Box::pin(super::topics::describe_configs(shard, &principal, d)).await;
            (answer(key, v, cid, &body), Duration::ZERO)
        }
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
