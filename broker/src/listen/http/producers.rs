//! `POST /v1/producers`: a producer id for idempotent produces, or the next
//! epoch of an existing one (`{"producer_id": N}`), which fences the older
//! instances of that producer.

use std::rc::Rc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;

use super::response::{self, Body};
use crate::error::ApiError;
use crate::shard::message::{Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct InitProducer {
    producer_id: Option<i64>,
}

/// Runs the allocation on the controller; JSON `{"producer_id","epoch"}`.
pub async fn init_json(shard: &Rc<Shard>, existing: Option<i64>) -> Result<serde_json::Value, ApiError> {
    if existing.is_some_and(|id| id < 0) {
        return Err(ApiError::invalid("producer_id must be non-negative"));
    }
    match shard.call(CONTROLLER_SHARD, Op::InitProducer(existing)).await {
        Reply::Producer(Ok((id, epoch))) => Ok(serde_json::json!({"producer_id": id, "epoch": epoch})),
        Reply::Producer(Err(e)) | Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}

pub async fn init(shard: &Rc<Shard>, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let body = response::read_body(shard, req.into_body()).await?;
    let init: InitProducer = if body.iter().all(|b| b.is_ascii_whitespace()) {
        InitProducer::default()
    } else {
        response::parse(&body)?
    };
    Ok(response::json(
        StatusCode::OK,
        &init_json(shard, init.producer_id).await?,
    ))
}
