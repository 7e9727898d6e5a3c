//! Key management under `/v1/keys` (admin only) and `/v1/whoami`. Thin:
//! bodies in and out; the operations are in `crate::auth::admin`.

use std::rc::Rc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::response::{self, Body};
use crate::auth::{admin, Principal};
use crate::error::ApiError;
use crate::shard::Shard;

async fn body(shard: &Shard, req: Request<Incoming>) -> Result<serde_json::Value, ApiError> {
    let body = response::read_body(shard, req.into_body()).await?;
    response::parse(&body)
}

fn ok(v: serde_json::Value) -> Response<Body> {
    response::json(StatusCode::OK, &v)
}

pub async fn create(
    shard: &Rc<Shard>,
    p: &Principal,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    // Refused before the body is read.
    p.require_admin("manage API keys")?;
    let v = body(shard, req).await?;
    Ok(response::json(
        StatusCode::CREATED,
        &admin::create(shard, p, &v).await?,
    ))
}

pub fn list(shard: &Shard, p: &Principal) -> Result<Response<Body>, ApiError> {
    Ok(ok(admin::list(shard, p)?))
}

pub fn get(shard: &Shard, p: &Principal, id: &str) -> Result<Response<Body>, ApiError> {
    Ok(ok(admin::get(shard, p, id)?))
}

pub async fn patch(
    shard: &Rc<Shard>,
    p: &Principal,
    id: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    p.require_admin("manage API keys")?;
    let v = body(shard, req).await?;
    Ok(ok(admin::patch(shard, p, id, &v).await?))
}

pub async fn revoke(shard: &Rc<Shard>, p: &Principal, id: &str) -> Result<Response<Body>, ApiError> {
    Ok(ok(admin::revoke(shard, p, id).await?))
}

pub fn whoami(shard: &Shard, p: &Principal) -> Result<Response<Body>, ApiError> {
    Ok(ok(admin::whoami(shard, p)?))
}
