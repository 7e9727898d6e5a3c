//! Building responses and reading bodies.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Response, StatusCode};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

pub type Body = Full<Bytes>;

pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).expect("JSON values serialize");
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .expect("valid response")
}

pub fn error(e: &ApiError) -> Response<Body> {
    json(e.status, &e.body())
}

pub fn text(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("valid response")
}

/// Reads a whole body up to `limit` bytes; more is `payload_too_large`.
pub async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, ApiError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(too_large(limit)),
        Err(e) => Err(ApiError::invalid(format!("could not read the request body: {e}"))),
    }
}

pub fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("request body is larger than {limit} bytes (--http-body-bytes-max); send smaller batches"),
    )
}

/// Parses JSON: syntax errors are `bad_json`, well-formed JSON of the wrong
/// shape is `invalid_request`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        // A shape error may be found before a syntax error later on: only
        // well-formed JSON is reported as the wrong shape.
        match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Ok(_) => ApiError::invalid(format!("request body: {e}")),
            Err(syntax) => ApiError::bad_json(format!("request body is not valid JSON: {syntax}")),
        }
    })
}
