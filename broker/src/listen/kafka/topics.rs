//! CreateTopics, DeleteTopics, DescribeConfigs and InitProducerId: the es
//! topic and producer-id operations (topics/admin.rs,
//! producers/admin.rs) with their grants and validation, Kafka's config
//! names mapped to es's (`retention.ms` is `retention_ms`, ...).

use std::rc::Rc;

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::*;

use super::codec::s;
use super::handler::{cluster_code, code, INVALID_REQUEST, TOPIC_AUTHORIZATION_FAILED};
use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::limits::TOPIC_PARTITIONS_MAX;
use crate::shard::Shard;
use crate::topics::admin;
use crate::topics::topic::{self, TopicConfig};

/// INVALID_PARTITIONS.
const INVALID_PARTITIONS: i16 = 37;
/// INVALID_REPLICATION_FACTOR.
const INVALID_REPLICATION_FACTOR: i16 = 38;
/// INVALID_CONFIG.
const INVALID_CONFIG: i16 = 40;

/// Kafka's topic config names and es's, for the keys es has.
const CONFIG_NAMES: &[(&str, &str)] = &[
    ("cleanup.policy", "cleanup_policy"),
    ("retention.ms", "retention_ms"),
    ("retention.bytes", "retention_bytes"),
    ("segment.bytes", "segment_bytes"),
    ("segment.ms", "segment_ms"),
    ("delete.retention.ms", "delete_retention_ms"),
];

/// A refusal: Kafka code and message.
type Refused = (i16, String);

fn refused(e: ApiError) -> Refused {
    (code(&e), e.message)
}

/// Kafka's configs of a CreateTopics as es's config object.
fn es_config(
    configs: &[create_topics_request::CreatableTopicConfig],
) -> Result<serde_json::Map<String, serde_json::Value>, Refused> {
    let mut out = serde_json::Map::new();
    for c in configs {
        let name = c.name.as_str();
        let Some(&(_, es)) = CONFIG_NAMES.iter().find(|(k, _)| *k == name) else {
            return Err((
                INVALID_CONFIG,
                format!("config {name:?} is not one es has (docs/kafka.md)"),
            ));
        };
        let value = match c.value.as_ref().map(|v| v.as_str()) {
            None | Some("-1") if matches!(es, "retention_ms" | "retention_bytes" | "segment_ms") => {
                serde_json::Value::Null
            }
            None => return Err((INVALID_CONFIG, format!("config {name:?} needs a value"))),
            Some(v) if es == "cleanup_policy" => serde_json::Value::from(v),
            Some(v) => serde_json::Value::from(v.parse::<u64>().map_err(|_| {
                (
                    INVALID_CONFIG,
                    format!("config {name:?} must be a non-negative integer"),
                )
            })?),
        };
        out.insert(es.to_string(), value);
    }
    Ok(out)
}

/// Checks one topic to create: its es create body.
fn checked(
    shard: &Shard,
    p: &Principal,
    t: &create_topics_request::CreatableTopic,
) -> Result<serde_json::Value, Refused> {
    let name = t.name.0.as_str();
    if let Err(e) = p.require_create_topic(name) {
        return Err((TOPIC_AUTHORIZATION_FAILED, e.message));
    }
    topic::validate_name(name).map_err(refused)?;
    let partitions = if t.num_partitions == -1 {
        1
    } else {
        t.num_partitions
    };
    if partitions < 1 || partitions as u32 > TOPIC_PARTITIONS_MAX {
        return Err((
            INVALID_PARTITIONS,
            format!("partitions must be in 1..={TOPIC_PARTITIONS_MAX}"),
        ));
    }
    let cluster = shard.config.cluster.enabled();
    let nodes = shard.config.cluster.node_ids().len();
    // -1: the broker's default (in a cluster `--default-replication-factor`,
    // else three or every node when fewer).
    let replication_factor = match t.replication_factor {
        -1 => None,
        1 if !cluster => Some(1),
        rf if cluster && rf >= 1 && rf as usize <= nodes => Some(rf),
        rf if cluster => {
            return Err((
                INVALID_REPLICATION_FACTOR,
                format!("replication factor {rf} must be in 1..={nodes} (the cluster's nodes)"),
            ))
        }
        rf => {
            return Err((
                INVALID_REPLICATION_FACTOR,
                format!("replication factor {rf} is not possible on a single node: use 1"),
            ))
        }
    };
    if !t.assignments.is_empty() {
        return Err((
            INVALID_REQUEST,
            "manual replica assignments are not supported".into(),
        ));
    }
    let config = es_config(&t.configs)?;
    TopicConfig::with_segment_bytes(shard.config.segment_bytes)
        .patched(&config)
        .map_err(|e| (INVALID_CONFIG, e.message))?;
    if shard.catalog.get(name).is_some() {
        return Err((
            ErrorCode::TopicExists.kafka(),
            format!("topic {name:?} already exists"),
        ));
    }
    let mut body = serde_json::json!({"name": name, "partitions": partitions, "config": config});
    if let Some(rf) = replication_factor {
        body["replication_factor"] = rf.into();
    }
    Ok(body)
}

pub async fn create(
    shard: &Rc<Shard>,
    p: &Principal,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let done = match checked(shard, p, &t) {
            Ok(body) if req.validate_only => Ok(body),
            Ok(body) => match serde_json::from_value::<admin::CreateTopic>(body.clone()) {
                // What was made: the replication factor the default gave.
                Ok(c) => admin::create(shard, p, c).await.map_err(refused),
                Err(e) => Err((INVALID_REQUEST, e.to_string())),
            },
            Err(r) => Err(r),
        };
        let r = CreatableTopicResult::default().with_name(t.name);
        results.push(match done {
            // v5 and later say what was made.
            Ok(body) if version >= 5 => r
                .with_num_partitions(body["partitions"].as_i64().unwrap_or(1) as i32)
                .with_replication_factor(body["replication_factor"].as_i64().unwrap_or(-1) as i16),
            Ok(_) => r,
            Err((c, m)) => r.with_error_code(c).with_error_message(Some(s(m))),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

pub async fn delete(shard: &Rc<Shard>, p: &Principal, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let names: Vec<TopicName> = req
        .topic_names
        .into_iter()
        .chain(req.topics.into_iter().filter_map(|t| t.name))
        .collect();
    let mut results = Vec::with_capacity(names.len());
    for name in names {
        let r = match admin::delete(shard, p, name.0.as_str()).await {
            Ok(_) => (0, None),
            Err(e) => (code(&e), Some(s(e.message))),
        };
        results.push(
            DeletableTopicResult::default()
                .with_name(Some(name))
                .with_error_code(r.0)
                .with_error_message(r.1),
        );
    }
    DeleteTopicsResponse::default().with_responses(results)
}

/// Resource types of DescribeConfigs.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

pub async fn describe_configs(
    shard: &Rc<Shard>,
    p: &Principal,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let mut results = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let out = DescribeConfigsResult::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        results.push(match r.resource_type {
            RESOURCE_BROKER => out,
            RESOURCE_TOPIC => {
                let name = r.resource_name.as_str();
                if !p.allows(Operation::Describe, Resource::Topic, name) {
                    results.push(out.with_error_code(TOPIC_AUTHORIZATION_FAILED));
                    continue;
                }
                // In a cluster, a topic just created through another node
                // is found after the controller's read barrier.
                match admin::lookup_synced(shard, name).await {
                    Ok(meta) => {
                        out.with_configs(topic_configs(&meta.config, r.configuration_keys.as_deref()))
                    }
                    Err(e) => out
                        .with_error_code(code(&e))
                        .with_error_message(Some(s(e.message))),
                }
            }
            _ => out
                .with_error_code(INVALID_REQUEST)
                .with_error_message(Some(s("es describes topic and broker configs only"))),
        });
    }
    DescribeConfigsResponse::default().with_results(results)
}

fn topic_configs(
    config: &TopicConfig,
    keys: Option<&[kafka_protocol::protocol::StrBytes]>,
) -> Vec<DescribeConfigsResourceResult> {
    let es = serde_json::to_value(config).unwrap_or_default();
    CONFIG_NAMES
        .iter()
        .filter(|(k, _)| keys.is_none_or(|ks| ks.iter().any(|x| x.as_str() == *k)))
        .map(|(kafka, es_key)| {
            let value = match es.get(*es_key) {
                Some(serde_json::Value::String(v)) => v.clone(),
                Some(serde_json::Value::Number(n)) => n.to_string(),
                _ => "-1".to_string(),
            };
            DescribeConfigsResourceResult::default()
                .with_name(s(*kafka))
                .with_value(Some(s(value)))
                .with_config_source(1)
        })
        .collect()
}

pub async fn init_producer_id(
    shard: &Rc<Shard>,
    p: &Principal,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    if req.transactional_id.is_some() {
        return InitProducerIdResponse::default()
            .with_error_code(INVALID_REQUEST)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    let existing = (req.producer_id.0 >= 0).then_some(req.producer_id.0);
    match crate::producers::admin::init(shard, p, existing).await {
        Ok(v) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(v["producer_id"].as_i64().unwrap_or(-1)))
            .with_producer_epoch(v["epoch"].as_i64().unwrap_or(-1) as i16),
        Err(e) => InitProducerIdResponse::default()
            .with_error_code(cluster_code(&e))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}
