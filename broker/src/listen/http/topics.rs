//! Topic endpoints: create, list, describe, patch config, delete. Thin:
//! bodies in and out; the operations are in `crate::topics::admin`.

use std::rc::Rc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::response::{self, Body};
use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::topics::admin::{self, CreateTopic};

pub async fn create(
    shard: &Rc<Shard>,
    p: &Principal,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let body = response::read_body(shard, req.into_body()).await?;
    let create: CreateTopic = response::parse(&body)?;
    Ok(response::json(
        StatusCode::CREATED,
        &admin::create(shard, p, create).await?,
    ))
}

pub fn list(shard: &Shard, p: &Principal) -> Response<Body> {
    response::json(StatusCode::OK, &admin::list(shard, p))
}

pub async fn describe(shard: &Rc<Shard>, p: &Principal, name: &str) -> Result<Response<Body>, ApiError> {
    Ok(response::json(
        StatusCode::OK,
        &admin::describe(shard, p, name).await?,
    ))
}

pub async fn patch(
    shard: &Rc<Shard>,
    p: &Principal,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    p.require(Operation::Alter, Resource::Topic, name)?;
    admin::lookup_synced(shard, name).await?;
    let body = response::read_body(shard, req.into_body()).await?;
    let changes: serde_json::Map<String, serde_json::Value> = response::parse(&body)?;
    Ok(response::json(
        StatusCode::OK,
        &admin::patch(shard, p, name, changes).await?,
    ))
}

pub async fn delete(shard: &Rc<Shard>, p: &Principal, name: &str) -> Result<Response<Body>, ApiError> {
    Ok(response::json(
        StatusCode::OK,
        &admin::delete(shard, p, name).await?,
    ))
}
