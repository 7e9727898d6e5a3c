//! Consumer group endpoints under `/v1/groups`.

use std::rc::Rc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::response::{self, Body};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::groups::admin::{self as groups, reset_args, set_owner_op};
use crate::groups::coordinator::GroupOp;
use crate::shard::Shard;

async fn body_json(shard: &Shard, req: Request<Incoming>) -> Result<serde_json::Value, ApiError> {
    let body = response::read_body(shard, req.into_body()).await?;
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(serde_json::json!({}));
    }
    let v: serde_json::Value = response::parse(&body)?;
    if !v.is_object() {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    Ok(v)
}

fn ok(v: serde_json::Value) -> Response<Body> {
    response::json(StatusCode::OK, &v)
}

pub async fn list(shard: &Rc<Shard>, p: &Principal) -> Result<Response<Body>, ApiError> {
    Ok(ok(groups::list(shard, p).await?))
}

pub async fn describe(shard: &Rc<Shard>, p: &Principal, group: &str) -> Result<Response<Body>, ApiError> {
    Ok(ok(groups::describe(shard, p, group).await?))
}

/// Runs `op` on `group` (delete, heartbeat, leave, the commits): its
/// answer, 200.
pub async fn call(
    shard: &Rc<Shard>,
    p: &Principal,
    group: &str,
    op: GroupOp,
) -> Result<Response<Body>, ApiError> {
    Ok(ok(groups::call(shard, p, group, op).await?))
}

/// `PATCH /v1/groups/{g}` `{"owner": id}`: an admin hands the group to
/// another key.
pub async fn patch(
    shard: &Rc<Shard>,
    p: &Principal,
    group: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    p.require_admin("change a group's owner")?;
    body_op(shard, p, group, req, StatusCode::OK, set_owner_op).await
}

/// Runs the op `make` reads from the request's JSON body on `group`
/// (join: 201, commit, patch): its answer with `status`.
pub async fn body_op(
    shard: &Rc<Shard>,
    p: &Principal,
    group: &str,
    req: Request<Incoming>,
    status: StatusCode,
    make: impl FnOnce(&serde_json::Value) -> Result<GroupOp, ApiError>,
) -> Result<Response<Body>, ApiError> {
    let v = body_json(shard, req).await?;
    let op = make(&v)?;
    Ok(response::json(status, &groups::call(shard, p, group, op).await?))
}

pub async fn reset(
    shard: &Rc<Shard>,
    p: &Principal,
    group: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let v = body_json(shard, req).await?;
    let (topic, to) = reset_args(&v)?;
    Ok(ok(groups::reset(shard, p, group, &topic, to).await?))
}
