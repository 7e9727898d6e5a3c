//! Consumer group endpoints under `/v1/groups`.

use std::rc::Rc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::response::{self, Body};
use crate::error::ApiError;
use crate::groups::admin::{self as groups, ResetTo};
use crate::groups::coordinator::{self, GroupOp};
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

pub async fn list(shard: &Rc<Shard>) -> Result<Response<Body>, ApiError> {
    Ok(ok(groups::list(shard).await?))
}

pub async fn describe(shard: &Rc<Shard>, group: &str) -> Result<Response<Body>, ApiError> {
    Ok(ok(groups::describe(shard, group).await?))
}

pub async fn delete(shard: &Rc<Shard>, group: &str) -> Result<Response<Body>, ApiError> {
    Ok(ok(groups::call(shard, group, GroupOp::Delete).await?))
}

pub async fn join(
    shard: &Rc<Shard>,
    group: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let v = body_json(shard, req).await?;
    let op = join_op(&v)?;
    Ok(response::json(
        StatusCode::CREATED,
        &groups::call(shard, group, op).await?,
    ))
}

/// A join from its JSON body `{"topics":[...], "session_timeout_ms"?}`.
pub fn join_op(v: &serde_json::Value) -> Result<GroupOp, ApiError> {
    let topics = v
        .get("topics")
        .and_then(|t| t.as_array())
        .ok_or_else(|| ApiError::invalid("topics must be an array of topic names"))?
        .iter()
        .map(|t| {
            t.as_str()
                .map(String::from)
                .ok_or_else(|| ApiError::invalid("topics must be strings"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let session_timeout_ms = match v.get("session_timeout_ms") {
        None | Some(serde_json::Value::Null) => None,
        Some(x) => Some(
            x.as_u64()
                .ok_or_else(|| ApiError::invalid("session_timeout_ms must be a positive integer"))?,
        ),
    };
    Ok(GroupOp::Join {
        topics,
        session_timeout_ms,
    })
}

pub async fn heartbeat(shard: &Rc<Shard>, group: &str, member: &str) -> Result<Response<Body>, ApiError> {
    let op = GroupOp::Heartbeat {
        member_id: member.to_string(),
    };
    Ok(ok(groups::call(shard, group, op).await?))
}

pub async fn leave(shard: &Rc<Shard>, group: &str, member: &str) -> Result<Response<Body>, ApiError> {
    let op = GroupOp::Leave {
        member_id: member.to_string(),
    };
    Ok(ok(groups::call(shard, group, op).await?))
}

/// A commit from its JSON body `{"member_id"?, "generation"?, "offsets"}`.
pub fn commit_op(v: &serde_json::Value) -> Result<GroupOp, ApiError> {
    let member = match (v.get("member_id"), v.get("generation")) {
        (None | Some(serde_json::Value::Null), None | Some(serde_json::Value::Null)) => None,
        (Some(m), Some(g)) => Some((
            m.as_str()
                .ok_or_else(|| ApiError::invalid("member_id must be a string"))?
                .to_string(),
            g.as_u64()
                .ok_or_else(|| ApiError::invalid("generation must be a non-negative integer"))?,
        )),
        _ => return Err(ApiError::invalid("member_id and generation go together")),
    };
    Ok(GroupOp::Commit {
        member,
        offsets: coordinator::parse_offsets(v)?,
    })
}

pub async fn commit(
    shard: &Rc<Shard>,
    group: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let v = body_json(shard, req).await?;
    Ok(ok(groups::call(shard, group, commit_op(&v)?).await?))
}

pub async fn commits(shard: &Rc<Shard>, group: &str) -> Result<Response<Body>, ApiError> {
    Ok(ok(groups::call(shard, group, GroupOp::Commits).await?))
}

/// A reset from `{"topic", "to": "earliest"|"latest"|"offset"|"timestamp", "offset"?, "timestamp"?}`.
pub fn reset_args(v: &serde_json::Value) -> Result<(String, ResetTo), ApiError> {
    let topic = v
        .get("topic")
        .and_then(|t| t.as_str())
        .ok_or_else(|| ApiError::invalid("topic must be a string"))?
        .to_string();
    let to = match v.get("to").and_then(|t| t.as_str()) {
        Some("earliest") => ResetTo::Earliest,
        Some("latest") => ResetTo::Latest,
        Some("offset") => ResetTo::Offset(
            v.get("offset")
                .and_then(|o| o.as_u64())
                .ok_or_else(|| ApiError::invalid("to=offset needs a non-negative integer offset"))?,
        ),
        Some("timestamp") => ResetTo::Timestamp(
            v.get("timestamp")
                .and_then(|o| o.as_i64())
                .ok_or_else(|| ApiError::invalid("to=timestamp needs an integer timestamp (ms)"))?,
        ),
        _ => {
            return Err(ApiError::invalid(
                "to must be \"earliest\", \"latest\", \"offset\" or \"timestamp\"",
            ))
        }
    };
    Ok((topic, to))
}

pub async fn reset(
    shard: &Rc<Shard>,
    group: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let v = body_json(shard, req).await?;
    let (topic, to) = reset_args(&v)?;
    Ok(ok(groups::reset(shard, group, &topic, to).await?))
}
