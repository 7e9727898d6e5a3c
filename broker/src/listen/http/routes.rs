//! Request routing: method and path to a handler, metrics per endpoint, and
//! every error rendered in the one JSON shape.

use std::convert::Infallible;
use std::rc::Rc;
use std::time::Instant;

use hyper::body::{Body as _, Incoming};
use hyper::{Method, Request, Response, StatusCode};

use super::response::{self, Body};
use super::server::Conn;
use super::{groups, keys, producers, records, topics};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::groups::admin::{commit_op, join_op};
use crate::groups::coordinator::GroupOp;
use crate::shard::Shard;

/// Answers one request. A panic in its handling is caught
/// (`listener::guarded`: logged, counted in `es_request_panics_total`) and
/// answered 500 `internal` with `Connection: close`, so its connection
/// closes and the shard keeps serving.
pub async fn route(
    shard: Rc<Shard>,
    conn: Rc<Conn>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let what = move || format!("{method} {}", uri.path());
    match crate::listen::listener::guarded("http", what, routed(shard, conn, req)).await {
        Ok(resp) => Ok(resp),
        Err(()) => {
            let e = ApiError::internal(
                "the broker failed while handling this request (a bug; its log says more); \
                 the connection is closed",
            );
            let mut resp = response::error(&e);
            close_after(&mut resp);
            Ok(resp)
        }
    }
}

/// The connection closes once `resp` is written.
fn close_after(resp: &mut Response<Body>) {
    resp.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
}

async fn routed(shard: Rc<Shard>, conn: Rc<Conn>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    // A body announced over the limit is refused before any of it is
    // read; the connection closes rather than read what follows.
    let limit = shard.config.http_body_bytes_max;
    let (endpoint, result) = if req.body().size_hint().lower() > limit as u64 {
        (
            ErrorCode::PayloadTooLarge.as_str(),
            Err(response::too_large(limit)),
        )
    } else if is_open(req.uri().path()) {
        dispatch(&shard, &conn, &Principal::Anonymous, req).await
    } else {
        // Every request is authenticated, keep-alive or not: a revoked
        // key fails on its next request.
        match super::auth::principal(&shard, req.headers()) {
            Ok(p) => dispatch(&shard, &conn, &p, req).await,
            Err(e) => ("unauthenticated", Err(e)),
        }
    };
    let mut resp = result.unwrap_or_else(|e| response::error(&e));
    if resp.status() == StatusCode::UNAUTHORIZED {
        metrics::counter!("es_auth_unauthenticated_total", "listener" => "http").increment(1);
        resp.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static(super::auth::CHALLENGE),
        );
    }
    // A body refused midway (too large, stalled) was not read to its end.
    if matches!(
        resp.status(),
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
    ) {
        close_after(&mut resp);
    }
    let status = resp.status().as_u16().to_string();
    let out_bytes = hyper::body::Body::size_hint(resp.body()).exact().unwrap_or(0);
    metrics::counter!("es_http_bytes_out_total").increment(out_bytes);
    metrics::counter!("es_http_requests_total", "endpoint" => endpoint, "status" => status).increment(1);
    if !resp.status().is_success() {
        metrics::counter!("es_http_errors_total", "endpoint" => endpoint).increment(1);
    }
    metrics::histogram!("es_http_request_duration_seconds", "endpoint" => endpoint)
        .record(started.elapsed().as_secs_f64());
    resp
}

type Handled = (&'static str, Result<Response<Body>, ApiError>);

/// Paths served without a key: probes and the Prometheus scrape.
fn is_open(path: &str) -> bool {
    matches!(path, "/health" | "/ready" | "/metrics")
}

async fn dispatch(shard: &Rc<Shard>, conn: &Conn, p: &Principal, req: Request<Incoming>) -> Handled {
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let method = req.method().clone();
    match (segments.as_slice(), &method) {
        (["health"], &Method::GET) => (
            "health",
            Ok(response::json(
                StatusCode::OK,
                &serde_json::json!({"status": "ok"}),
            )),
        ),
        (["ready"], &Method::GET) => ("ready", Ok(ready(shard))),
        (["metrics"], &Method::GET) => (
            "metrics",
            Ok(response::text(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                crate::operate::metrics_live::render(shard).await,
            )),
        ),
        (["v1", "groups"], &Method::GET) => ("list_groups", groups::list(shard, p).await),
        (["v1", "groups", g], &Method::GET) => ("describe_group", groups::describe(shard, p, g).await),
        (["v1", "groups", g], &Method::PATCH) => ("patch_group", groups::patch(shard, p, g, req).await),
        (["v1", "groups", g], &Method::DELETE) => {
            ("delete_group", groups::call(shard, p, g, GroupOp::Delete).await)
        }
        (["v1", "groups", g, "members"], &Method::POST) => (
            "join_group",
            groups::body_op(shard, p, g, req, StatusCode::CREATED, join_op).await,
        ),
        (["v1", "groups", g, "members", m, "heartbeat"], &Method::POST) => {
            let op = GroupOp::Heartbeat {
                member_id: m.to_string(),
            };
            ("heartbeat", groups::call(shard, p, g, op).await)
        }
        (["v1", "groups", g, "members", m], &Method::DELETE) => {
            let op = GroupOp::Leave {
                member_id: m.to_string(),
            };
            ("leave_group", groups::call(shard, p, g, op).await)
        }
        (["v1", "groups", g, "commits"], &Method::POST) => (
            "commit",
            groups::body_op(shard, p, g, req, StatusCode::OK, commit_op).await,
        ),
        (["v1", "groups", g, "commits"], &Method::GET) => {
            ("fetch_commits", groups::call(shard, p, g, GroupOp::Commits).await)
        }
        (["v1", "groups", g, "reset"], &Method::POST) => {
            ("reset_group", groups::reset(shard, p, g, req).await)
        }
        (["v1", "keys"], &Method::POST) => ("create_key", keys::create(shard, p, req).await),
        (["v1", "keys"], &Method::GET) => ("list_keys", keys::list(shard, p)),
        (["v1", "keys", id], &Method::GET) => ("describe_key", keys::get(shard, p, id)),
        (["v1", "keys", id], &Method::PATCH) => ("patch_key", keys::patch(shard, p, id, req).await),
        (["v1", "keys", id], &Method::DELETE) => ("revoke_key", keys::revoke(shard, p, id).await),
        (["v1", "whoami"], &Method::GET) => ("whoami", keys::whoami(shard, p)),
        (["v1", "cluster"], &Method::GET) => (
            "cluster",
            crate::cluster::view::describe(shard, p)
                .await
                .map(|v| response::json(StatusCode::OK, &v)),
        ),
        (["v1", "producers"], &Method::POST) => ("init_producer", producers::init(shard, p, req).await),
        (["v1", "topics"], &Method::GET) => ("list_topics", Ok(topics::list(shard, p))),
        (["v1", "topics"], &Method::POST) => ("create_topic", topics::create(shard, p, req).await),
        (["v1", "topics", t], &Method::GET) => ("describe_topic", topics::describe(shard, p, t).await),
        (["v1", "topics", t], &Method::DELETE) => ("delete_topic", topics::delete(shard, p, t).await),
        (["v1", "topics", t, "config"], &Method::PATCH) => {
            ("patch_config", topics::patch(shard, p, t, req).await)
        }
        (["v1", "topics", t, "records"], &Method::POST) => {
            ("produce", records::produce(shard, p, t, req).await)
        }
        (["v1", "topics", t, "partitions", part, "records"], &Method::GET) => (
            "fetch",
            records::fetch(shard, conn, p, t, part, req.uri().query()).await,
        ),
        (known, _) if is_known(known) => (
            ErrorCode::MethodNotAllowed.as_str(),
            Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("{method} is not allowed on {path}"),
            )),
        ),
        _ => (
            ErrorCode::NotFound.as_str(),
            Err(ApiError::new(
                ErrorCode::NotFound,
                format!("no such endpoint: {method} {path}"),
            )),
        ),
    }
}

fn is_known(segments: &[&str]) -> bool {
    matches!(
        segments,
        ["health"]
            | ["ready"]
            | ["metrics"]
            | ["v1", "topics"]
            | ["v1", "keys"]
            | ["v1", "keys", _]
            | ["v1", "whoami"]
            | ["v1", "cluster"]
            | ["v1", "producers"]
            | ["v1", "groups"]
            | ["v1", "groups", _]
            | ["v1", "groups", _, "members"]
            | ["v1", "groups", _, "members", _]
            | ["v1", "groups", _, "members", _, "heartbeat"]
            | ["v1", "groups", _, "commits"]
            | ["v1", "groups", _, "reset"]
            | ["v1", "topics", _]
            | ["v1", "topics", _, "config"]
            | ["v1", "topics", _, "records"]
            | ["v1", "topics", _, "partitions", _, "records"]
    )
}

/// `GET /ready`: 200 once every shard recovered its partitions and, in
/// cluster mode, the controller group has a leader and every partition
/// replica assigned to this node is open; else 503 with what it waits for
/// (`recovering`, `no_controller_leader`, `opening_replicas`,
/// `shutting_down`). `recovered` says whether this node's own recovery is
/// done: a cluster node that recovered and waits for its peers is `true`.
fn ready(shard: &Shard) -> Response<Body> {
    let state = &shard.state;
    let unavailable = |status: &str, recovered: bool| {
        response::json(
            StatusCode::SERVICE_UNAVAILABLE,
            &serde_json::json!({"status": status, "recovered": recovered}),
        )
    };
    if state.is_shutting_down() {
        return unavailable("shutting_down", false);
    }
    if !state.is_ready(shard.shards) {
        return unavailable("recovering", false);
    }
    if shard.config.cluster.enabled() {
        if state.controller_leader().is_none() {
            return unavailable("no_controller_leader", true);
        }
        if state.replicas_opening.load(std::sync::atomic::Ordering::Acquire) > 0 {
            return unavailable("opening_replicas", true);
        }
    }
    response::json(StatusCode::OK, &serde_json::json!({"status": "ready"}))
}
