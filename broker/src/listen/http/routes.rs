//! Request routing: method and path to a handler, metrics per endpoint, and
//! every error rendered in the one JSON shape.

use std::convert::Infallible;
use std::rc::Rc;
use std::time::Instant;

use hyper::body::{Body as _, Incoming};
use hyper::{Method, Request, Response, StatusCode};

use super::response::{self, Body};
use super::server::Conn;
use super::{groups, producers, records, topics};
use crate::error::{ApiError, ErrorCode};
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
    } else {
        dispatch(&shard, &conn, req).await
    };
    let mut resp = result.unwrap_or_else(|e| response::error(&e));
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

async fn dispatch(shard: &Rc<Shard>, conn: &Conn, req: Request<Incoming>) -> Handled {
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
        (["v1", "groups"], &Method::GET) => ("list_groups", groups::list(shard).await),
        (["v1", "groups", g], &Method::GET) => ("describe_group", groups::describe(shard, g).await),
        (["v1", "groups", g], &Method::DELETE) => ("delete_group", groups::delete(shard, g).await),
        (["v1", "groups", g, "members"], &Method::POST) => ("join_group", groups::join(shard, g, req).await),
        (["v1", "groups", g, "members", m, "heartbeat"], &Method::POST) => {
            ("heartbeat", groups::heartbeat(shard, g, m).await)
        }
        (["v1", "groups", g, "members", m], &Method::DELETE) => {
            ("leave_group", groups::leave(shard, g, m).await)
        }
        (["v1", "groups", g, "commits"], &Method::POST) => ("commit", groups::commit(shard, g, req).await),
        (["v1", "groups", g, "commits"], &Method::GET) => ("fetch_commits", groups::commits(shard, g).await),
        (["v1", "groups", g, "reset"], &Method::POST) => ("reset_group", groups::reset(shard, g, req).await),
        (["v1", "producers"], &Method::POST) => ("init_producer", producers::init(shard, req).await),
        (["v1", "topics"], &Method::GET) => ("list_topics", Ok(topics::list(shard))),
        (["v1", "topics"], &Method::POST) => ("create_topic", topics::create(shard, req).await),
        (["v1", "topics", t], &Method::GET) => ("describe_topic", topics::describe(shard, t).await),
        (["v1", "topics", t], &Method::DELETE) => ("delete_topic", topics::delete(shard, t).await),
        (["v1", "topics", t, "config"], &Method::PATCH) => {
            ("patch_config", topics::patch(shard, t, req).await)
        }
        (["v1", "topics", t, "records"], &Method::POST) => ("produce", records::produce(shard, t, req).await),
        (["v1", "topics", t, "partitions", p, "records"], &Method::GET) => (
            "fetch",
            records::fetch(shard, conn, t, p, req.uri().query()).await,
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

fn ready(shard: &Shard) -> Response<Body> {
    if shard.state.is_ready(shard.shards) {
        response::json(StatusCode::OK, &serde_json::json!({"status": "ready"}))
    } else if shard.state.is_shutting_down() {
        response::json(
            StatusCode::SERVICE_UNAVAILABLE,
            &serde_json::json!({"status": "shutting_down"}),
        )
    } else {
        response::json(
            StatusCode::SERVICE_UNAVAILABLE,
            &serde_json::json!({"status": "recovering"}),
        )
    }
}
