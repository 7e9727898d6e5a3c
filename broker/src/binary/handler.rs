//! Binary requests to the transport-neutral operations, and errors to error
//! frames with the same codes as HTTP.

use std::rc::Rc;
use std::time::Instant;

use es_protocol::requests::fetch::{FetchOk, FetchedRecord};
use es_protocol::requests::produce::ProduceOk;
use es_protocol::{Kind, Request, Response};

use crate::admin::{self, CreateTopic};
use crate::error::ApiError;
use crate::fetch::FetchQuery;
use crate::produce::Item;
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: Request) -> Response {
    let started = Instant::now();
    let endpoint = endpoint(&req);
    let resp = match run(shard, req).await {
        Ok(r) => r,
        Err(e) => Response::error(e.code, e.message),
    };
    let status = if matches!(resp, Response::Error(_)) {
        "error"
    } else {
        "ok"
    };
    metrics::counter!("es_binary_requests_total", "endpoint" => endpoint, "status" => status).increment(1);
    metrics::histogram!("es_binary_request_duration_seconds", "endpoint" => endpoint)
        .record(started.elapsed().as_secs_f64());
    resp
}

fn endpoint(req: &Request) -> &'static str {
    match req {
        Request::Hello(_) => "hello",
        Request::Produce(_) => "produce",
        Request::Fetch(_) => "fetch",
        Request::Admin(Kind::CreateTopic, _) => "create_topic",
        Request::Admin(Kind::ListTopics, _) => "list_topics",
        Request::Admin(Kind::DescribeTopic, _) => "describe_topic",
        Request::Admin(Kind::DeleteTopic, _) => "delete_topic",
        Request::Admin(_, _) => "patch_config",
    }
}

fn name_of(body: &serde_json::Value) -> Result<&str, ApiError> {
    body.get("name")
        .and_then(|v| v.as_str())
        .ok_or_else(|| ApiError::invalid("the request needs a string \"name\""))
}

async fn run(shard: &Rc<Shard>, req: Request) -> Result<Response, ApiError> {
    match req {
        Request::Hello(_) => Err(ApiError::invalid("Hello may only be the first frame")),
        Request::Produce(p) => {
            let meta = admin::lookup(shard, &p.topic)?;
            let items = p
                .records
                .into_iter()
                .map(|r| Item {
                    key: r.key,
                    value: r.value,
                    partition: r.partition,
                    timestamp_ms: r.timestamp_ms,
                })
                .collect();
            let offsets = crate::produce::produce(shard, &meta, items, None).await?;
            Ok(Response::ProduceOk(ProduceOk { offsets }))
        }
        Request::Fetch(f) => {
            let meta = admin::lookup(shard, &f.topic)?;
            let q = FetchQuery {
                offset: f.offset,
                max_records: Some(f.max_records as u64),
                max_bytes: Some(f.max_bytes as u64),
                wait_ms: Some(f.wait_ms as u64),
            };
            let fetched = crate::fetch::fetch(shard, &meta, f.partition as u64, q).await?;
            Ok(Response::FetchOk(FetchOk {
                high_watermark: fetched.high_watermark,
                next_offset: fetched.next_offset,
                records: fetched
                    .records
                    .into_iter()
                    .map(|r| FetchedRecord {
                        offset: r.offset.0,
                        timestamp_ms: r.timestamp_ms,
                        key: r.key,
                        value: r.value,
                    })
                    .collect(),
            }))
        }
        Request::Admin(kind, body) => {
            let value = match kind {
                Kind::CreateTopic => {
                    let create: CreateTopic = serde_json::from_value(body)
                        .map_err(|e| ApiError::invalid(format!("create topic: {e}")))?;
                    admin::create(shard, create).await?
                }
                Kind::ListTopics => admin::list(shard),
                Kind::DescribeTopic => admin::describe(shard, name_of(&body)?).await?,
                Kind::DeleteTopic => admin::delete(shard, name_of(&body)?).await?,
                Kind::PatchTopicConfig => {
                    let name = name_of(&body)?.to_string();
                    let changes = body
                        .get("config")
                        .and_then(|c| c.as_object())
                        .cloned()
                        .ok_or_else(|| ApiError::invalid("the request needs a \"config\" object"))?;
                    admin::patch(shard, &name, changes).await?
                }
                other => return Err(ApiError::invalid(format!("{other:?} is not a topic request"))),
            };
            Ok(Response::AdminOk(value))
        }
    }
}
