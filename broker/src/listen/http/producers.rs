//! `POST /v1/producers`: a producer id for idempotent produces, or the next
//! epoch of an existing one (`{"producer_id": N}`), which fences the older
//! instances of that producer.

use std::rc::Rc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;

use super::response::{self, Body};
use crate::error::ApiError;
use crate::shard::Shard;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct InitProducer {
    producer_id: Option<i64>,
}

pub async fn init(
    shard: &Rc<Shard>,
    p: &crate::auth::Principal,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    p.require_some_topic_write()?;
    let body = response::read_body(shard, req.into_body()).await?;
    let init: InitProducer = if body.iter().all(|b| b.is_ascii_whitespace()) {
        InitProducer::default()
    } else {
        response::parse(&body)?
    };
    Ok(response::json(
        StatusCode::OK,
        &crate::producers::admin::init(shard, p, init.producer_id).await?,
    ))
}
