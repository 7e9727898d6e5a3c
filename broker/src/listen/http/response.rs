//! Building responses and reading bodies.

use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as _, Incoming};
use hyper::{Response, StatusCode};
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorCode};
use crate::limits::CHARGED_BODY_BYTES_MIN;
use crate::shard::budget::Charge;
use crate::shard::Shard;

pub type Body = Full<Bytes>;

pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).expect("JSON values serialize");
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .expect("valid response")
}

/// A JSON body already serialized.
pub fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .expect("valid response")
}

pub fn error(e: &ApiError) -> Response<Body> {
    json(status(e.code), &e.body())
}

/// The HTTP status of `code`, from the error table (error.rs): the one
/// place a transport-neutral code becomes a `hyper::StatusCode`.
pub fn status(code: ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.http_status()).expect("the error table holds valid statuses")
}

pub fn text(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("valid response")
}

/// A request body read whole, with its charge of the shard's budget (if
/// it is large), held while the body lives.
pub struct ReadBody {
    bytes: Bytes,
    _charge: Option<Charge>,
}

impl std::ops::Deref for ReadBody {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Reads a whole body, up to `--http-body-bytes-max` bytes (more is 413
/// `payload_too_large`, a `Content-Length` over it is refused before this,
/// in routes.rs). A large body is charged first (its `Content-Length`;
/// without one, once it passes `CHARGED_BODY_BYTES_MIN`, the whole limit,
/// until it has all come), in turn with the shard's other large requests;
/// it is copied into one buffer of its size as it arrives (nothing of
/// hyper's read buffers is kept). A body that sends nothing for
/// `--frame-stall-ms` is 408 `request_timeout`, and its connection closes.
pub async fn read_body(shard: &Shard, body: Incoming) -> Result<ReadBody, ApiError> {
    read_body_up_to(shard, body, shard.config.http_body_bytes_max).await
}

/// [`read_body`] with a limit of `limit` bytes (more is 413
/// `payload_too_large`), for a listener with its own (the registry's).
pub async fn read_body_up_to(shard: &Shard, mut body: Incoming, limit: usize) -> Result<ReadBody, ApiError> {
    let announced = body.size_hint().exact().map(|n| n as usize);
    if announced.is_some_and(|n| n > limit) {
        return Err(too_large(limit));
    }
    let mut charge = match announced {
        Some(n) if n >= CHARGED_BODY_BYTES_MIN => Some(take(shard, n).await),
        _ => None,
    };
    let mut bytes = Vec::with_capacity(announced.unwrap_or(0));
    let stall = Duration::from_millis(shard.config.frame_stall_ms);
    let mut timer = glommio::timer::Timer::new(stall);
    loop {
        let frame = {
            let next = body.frame().fuse();
            futures::pin_mut!(next);
            futures::select! {
                f = next => f,
                _ = (&mut timer).fuse() => {
                    metrics::counter!("es_http_body_stalled_total").increment(1);
                    return Err(stalled(shard.config.frame_stall_ms));
                }
            }
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| ApiError::invalid(format!("could not read the request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        if bytes.len() + data.len() > limit {
            return Err(too_large(limit));
        }
        if charge.is_none() && bytes.len() + data.len() >= CHARGED_BODY_BYTES_MIN {
            // No length was announced: the most it can be, until it ends.
            charge = Some(take(shard, limit).await);
        }
        bytes.extend_from_slice(&data);
        timer.reset(stall);
    }
    if let Some(c) = &mut charge {
        c.resize(bytes.len() as u64);
    }
    Ok(ReadBody {
        bytes: Bytes::from(bytes),
        _charge: charge,
    })
}

/// `bytes` of the shard's budget, in turn; a wait is counted.
async fn take(shard: &Shard, bytes: usize) -> Charge {
    let budget = &shard.request_budget;
    if let Some(held) = budget.try_take(bytes as u64) {
        return Charge::shard_only(held);
    }
    metrics::counter!("es_request_budget_waits_total", "listener" => "http").increment(1);
    Charge::shard_only(budget.take(bytes as u64).await)
}

/// A body that stopped arriving.
fn stalled(stall_ms: u64) -> ApiError {
    ApiError::new(ErrorCode::RequestTimeout,
        format!("the request body stopped arriving for {stall_ms} ms (--frame-stall-ms); the connection is closed"),
    )
}

pub fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("request body is larger than {limit} bytes (--http-body-bytes-max); send smaller batches"),
    )
}

/// Parses JSON: a body that is not well-formed JSON (a syntax error,
/// invalid UTF-8, nesting deeper than 128) is `bad_json`; well-formed JSON
/// of the wrong shape is `invalid_request`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        if e.classify() != serde_json::error::Category::Data {
            return ApiError::bad_json(format!("request body is not valid JSON: {e}"));
        }
        // A shape error may be found before a syntax error later on: only
        // well-formed JSON is reported as the wrong shape. Parsed as a
        // `Value`, which checks what skipping a value does not: strings are
        // UTF-8, nesting stays within serde_json's recursion limit.
        match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(_) => ApiError::invalid(format!("request body: {e}")),
            Err(syntax) => ApiError::bad_json(format!("request body is not valid JSON: {syntax}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Named {
        name: String,
    }

    fn code<T: DeserializeOwned + std::fmt::Debug>(bytes: &[u8]) -> &'static str {
        parse::<T>(bytes).expect_err("refused").code.as_str()
    }

    #[test]
    fn json_that_is_not_well_formed_is_bad_json() {
        // Invalid UTF-8 in a string, where a field is read and where one is
        // only skipped past a shape error.
        assert_eq!(code::<Named>(b"{\"name\":\"a\xff\"}"), "bad_json");
        assert_eq!(code::<Named>(b"{\"other\":1,\"x\":\"\xc3\x28\"}"), "bad_json");
        assert_eq!(code::<serde_json::Value>(b"{\"v\":\"\xff\"}"), "bad_json");
        // Nesting past serde_json's limit of 128, into a typed body and a
        // free-form one.
        let deep = format!("{{\"name\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(code::<Named>(deep.as_bytes()), "bad_json");
        let deep_value = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(code::<serde_json::Value>(deep_value.as_bytes()), "bad_json");
        // Truncated, trailing garbage, a wrong shape followed by a syntax
        // error.
        assert_eq!(code::<Named>(b"{\"name\":"), "bad_json");
        assert_eq!(code::<Named>(b"{\"name\":\"a\"} x"), "bad_json");
        assert_eq!(code::<Named>(b"{\"name\":1, }"), "bad_json");
    }

    #[test]
    fn well_formed_json_of_the_wrong_shape_is_invalid_request() {
        assert_eq!(code::<Named>(b"{\"name\":1}"), "invalid_request");
        assert_eq!(code::<Named>(b"{\"nom\":\"a\"}"), "invalid_request");
        assert_eq!(code::<Named>(b"[1,2]"), "invalid_request");
        // Deep, but within the limit.
        let nested = format!("{{\"name\":{}{}}}", "[".repeat(100), "]".repeat(100));
        assert_eq!(code::<Named>(nested.as_bytes()), "invalid_request");
        assert_eq!(parse::<Named>(b"{\"name\":\"a\"}").unwrap().name, "a");
    }
}
