//! Topic endpoints: create, list, describe, patch config, delete. Thin:
//! bodies in and out; the operations are in `crate::topics::admin`.

use std::rc::Rc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::response::{self, Body};
use crate::error::ApiError;
use crate::shard::Shard;
use crate::topics::admin::{self, CreateTopic};

pub async fn create(shard: &Rc<Shard>, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let body = response::read_body(shard, req.into_body()).await?;
    let create: CreateTopic = response::parse(&body)?;
    Ok(response::json(
        StatusCode::CREATED,
        &admin::create(shard, create).await?,
    ))
}

pub fn list(shard: &Shard) -> Response<Body> {
    response::json(StatusCode::OK, &admin::list(shard))
}

pub async fn describe(shard: &Rc<Shard>, name: &str) -> Result<Response<Body>, ApiError> {
    Ok(response::json(
        StatusCode::OK,
        &admin::describe(shard, name).await?,
    ))
}

pub async fn patch(
    shard: &Rc<Shard>,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    admin::lookup(shard, name)?;
    let body = response::read_body(shard, req.into_body()).await?;
    let changes: serde_json::Map<String, serde_json::Value> = response::parse(&body)?;
    Ok(response::json(
        StatusCode::OK,
        &admin::patch(shard, name, changes).await?,
    ))
}

pub async fn delete(shard: &Rc<Shard>, name: &str) -> Result<Response<Body>, ApiError> {
    Ok(response::json(StatusCode::OK, &admin::delete(shard, name).await?))
}
